"""Engine determinism on CUDA with the Llama-3.2-1B shape in bfloat16 (random weights).

Bitwise (torch.equal on full float32 logit rows, tokens, sampler states) against singleton
references across batch composition and order, chunk budgets, prefix reuse in one engine
lifetime, preemption under page pressure, and teacher-forced prefill of decode positions; plus
one check-mode run and a fidelity check of the small preset against the float64 reference.
Set BITCASE_GPU_MODEL_DIR to reuse an existing llama-1b checkpoint directory.
"""

import os
from pathlib import Path

import pytest
import torch

from engine.checkpoint import make_checkpoint
from engine.config import EngineConfig
from engine.llm_engine import LLM, LLMEngine
from engine.reference import ReferenceModel
from engine.sampling_params import SamplingParams

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ENGINE = dict(device="cuda", dtype="bfloat16", page_size=16, num_pages=256, max_num_seqs=16,
              max_num_batched_tokens=512, max_model_len=512)
LENGTHS = (17, 31, 32, 33, 63, 64, 65, 129)
GREEDY = SamplingParams(max_tokens=8, ignore_eos=True)
SAMPLED = SamplingParams(max_tokens=8, temperature=0.8, top_p=0.95, seed=7, ignore_eos=True)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    given = os.environ.get("BITCASE_GPU_MODEL_DIR")
    if given:
        return Path(given)
    return make_checkpoint("llama-1b", tmp_path_factory.mktemp("llama-1b"), seed=0)


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(2026)
    base = torch.randint(0, 128000, (max(LENGTHS),), generator=g).tolist()
    return [base[:n] for n in LENGTHS]  # nested prefixes: the cache has something to reuse


@pytest.fixture(scope="module")
def singletons(llama_dir, prompts):
    llm = LLM(llama_dir, **{**ENGINE, "enable_prefix_caching": False})
    return {kind: [llm.generate([p], params)[0] for p in prompts] for kind, params in
            (("greedy", GREEDY), ("sampled", SAMPLED))}


def assert_bitwise_equal(outputs, references):
    for out, ref in zip(outputs, references):
        assert out.token_ids == ref.token_ids and out.sampler_state == ref.sampler_state
        for i, (a, b) in enumerate(zip(out.trace.entries, ref.trace.entries)):
            assert torch.equal(a.logits, b.logits), f"logit row {i} of {out.request_id} differs"
            assert a.token == b.token and a.sampler_state == b.sampler_state


@pytest.mark.parametrize("kind", ["greedy", "sampled"])
@pytest.mark.parametrize("order", [1, -1])
def test_batch_composition_and_order(llama_dir, prompts, singletons, kind, order):
    params = GREEDY if kind == "greedy" else SAMPLED
    outs = LLM(llama_dir, **ENGINE).generate(prompts[::order], params)
    assert_bitwise_equal(outs, singletons[kind][::order])


@pytest.mark.parametrize("budget", [16, 64, 128])
def test_chunk_budgets(llama_dir, prompts, singletons, budget):
    outs = LLM(llama_dir, **{**ENGINE, "max_num_batched_tokens": budget}).generate(prompts, GREEDY)
    assert any(len(o.prefill_chunk_ends) > 1 for o in outs)
    assert_bitwise_equal(outs, singletons["greedy"])


def test_prefix_reuse_and_preemption(llama_dir, prompts, singletons):
    engine = LLMEngine(llama_dir, EngineConfig(**{**ENGINE, "num_pages": 34}))
    ids = [engine.add_request(p, GREEDY) for p in prompts + prompts]
    preempted, done = 0, {}
    while engine.has_unfinished():
        step = engine.step()
        preempted += len(step.preempted)
        done.update({o.request_id: o for o in step.finished})
    outs = [done[i] for i in ids]
    assert sum(o.num_cached_tokens for o in outs) > 0 and preempted > 0
    assert_bitwise_equal(outs, singletons["greedy"] * 2)


def test_decode_rows_equal_teacher_forced_prefill(llama_dir, singletons):
    ref = singletons["greedy"][3]
    llm = LLM(llama_dir, **{**ENGINE, "enable_prefix_caching": False})
    for i in (1, 4, 7):
        forced = llm.generate([list(ref.prompt_token_ids) + list(ref.token_ids[:i])],
                              SamplingParams(max_tokens=1, ignore_eos=True))[0]
        assert torch.equal(forced.trace.entries[0].logits, ref.trace.entries[i].logits)


def test_check_mode_run(llama_dir, prompts, singletons):
    llm = LLM(llama_dir, **{**ENGINE, "check_mode": True, "max_num_batched_tokens": 64})
    assert_bitwise_equal(llm.generate(prompts[:3], GREEDY), singletons["greedy"][:3])


def test_fidelity_of_bfloat16_on_cuda(tmp_path):
    small = make_checkpoint("small", tmp_path / "small", seed=1)
    prompt = list(range(5, 40))
    out = LLM(small, **{**ENGINE, "dtype": "bfloat16"}).generate([prompt], GREEDY)[0]
    expected = ReferenceModel(small).logits(prompt + list(out.token_ids))[len(prompt) - 1:-1]
    got = torch.stack([e.logits for e in out.trace.entries]).double()
    assert float((got - expected).abs().max()) <= 5e-2
