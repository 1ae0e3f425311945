"""Prompt logit rows (``SamplingParams.prompt_logits``): computed for every prompt position, bitwise equal
to the rows the same positions get when they are decoded, chunked or not, batched or not, and never
skipped by a prefix-cache hit."""

import torch

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams

from .conftest import P, SMALL_ENGINE


def _run(engine: LLMEngine, requests):
    """Run ``(prompt, params)`` requests together; per request: (output, prompt rows [n, V] by position)."""
    ids = [engine.add_request(p, params) for p, params in requests]
    outputs, rows = {}, {i: {} for i in ids}
    while engine.has_unfinished():
        result = engine.step()
        for pr in result.prompt_rows:
            for k in range(pr.rows.shape[0]):
                assert pr.start + k not in rows[pr.request_id], "a prompt row was handed out twice"
                rows[pr.request_id][pr.start + k] = pr.rows[k]
        outputs.update({o.request_id: o for o in result.finished})
    return [(outputs[i], rows[i]) for i in ids]


def _prompt(n: int, salt: int = 0) -> list[int]:
    return [(7 * i + 3 + salt) % 251 + 1 for i in range(n)]


def test_prompt_rows_equal_decode_rows(tiny_dir):
    engine = LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE))
    prompt = _prompt(P + 3)
    (decoded, rows), = _run(engine, [(prompt, SamplingParams(max_tokens=8, ignore_eos=True))])
    assert rows == {}  # not asked for: none computed
    history = prompt + list(decoded.token_ids[:7])
    (echo, echo_rows), = _run(engine, [(history, SamplingParams(max_tokens=1, ignore_eos=True,
                                                                 prompt_logits=True))])
    assert sorted(echo_rows) == list(range(len(history) - 1))
    assert echo.num_cached_tokens == 0  # the first request's pages were published, and not used
    for i in range(7):  # decode row i sits at position len(prompt) - 1 + i of the longer history
        row = echo_rows[len(prompt) - 1 + i]
        assert torch.equal(row.view(torch.int32), decoded.trace.entries[i].logits.view(torch.int32)), i
    assert torch.equal(echo.trace.entries[0].logits.view(torch.int32),
                       decoded.trace.entries[7].logits.view(torch.int32))


def test_prompt_rows_same_chunked_batched_and_alone(tiny_dir):
    prompt = _prompt(3 * P + 5, salt=1)
    params = SamplingParams(max_tokens=2, ignore_eos=True, prompt_logits=True)
    (alone, alone_rows), = _run(LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE)), [(prompt, params)])
    chunked = LLMEngine(tiny_dir, EngineConfig(**{**SMALL_ENGINE, "max_num_batched_tokens": P}))
    companions = [(_prompt(2 * P - 1, salt=2), SamplingParams(max_tokens=3, ignore_eos=True)),
                  (_prompt(P + 1, salt=3), params)]
    results = _run(chunked, [companions[0], (prompt, params), companions[1]])
    together, together_rows = results[1]
    assert len(together.prefill_chunk_ends) > 1  # the prompt really was chunked
    assert sorted(together_rows) == sorted(alone_rows) == list(range(len(prompt) - 1))
    for p, row in alone_rows.items():
        assert torch.equal(row.view(torch.int32), together_rows[p].view(torch.int32)), p
    assert together.token_ids == alone.token_ids
    assert sorted(results[2][1]) == list(range(P))
    assert results[0][1] == {}


def test_prompt_logits_in_to_dict_only_when_set():
    assert "prompt_logits" not in SamplingParams().to_dict()
    assert SamplingParams(prompt_logits=True).to_dict()["prompt_logits"] is True
