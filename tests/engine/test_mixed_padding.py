"""Padded mixed steps: token buckets, shapes, where padding sequences go, and padded vs eager on the CPU.

On the CPU ``cuda_graphs=True`` runs the exact padded steps a CUDA graph would replay, eagerly, so
these tests check the padding itself: padding sequences read and write only scratch pages outside
the pool, and every real row's logits, token and sampler state equal the unpadded engine's
bitwise, with chunked prefill, decode rows beside prefill rows and prefix reuse. Capture and
replay are checked on a GPU (tests/gpu/test_engine_speed_gpu.py).
"""

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.mixed_graphs
from engine.config import EngineConfig
from engine.llm_engine import LLM
from engine.mixed_padding import (MixedShape, graph_token_buckets, mixed_shape, num_mixed_scratch_pages,
                                  padding_sequences)
from engine.sampling_params import SamplingParams

P = 16
ENGINE = dict(page_size=P, num_pages=40, max_num_seqs=8, max_num_batched_tokens=8 * P, max_model_len=8 * P)
PROMPTS = [[5, 6, 7], list(range(10, 10 + P + 1)), [9] * (2 * P), list(range(40, 40 + 2 * P + 3)), [1], [3, 1, 4],
           [t % 200 + 1 for t in range(5 * P + 3)]]  # the last is chunked: more rows than one step's budget
GREEDY = SamplingParams(max_tokens=5, ignore_eos=True)
SAMPLED = SamplingParams(max_tokens=5, temperature=0.9, top_p=0.9, seed=11, ignore_eos=True)


@dataclass(frozen=True)
class Rows:
    start: int
    end: int
    is_sampled: bool = True
    prompt_rows: tuple = (0, 0)


@pytest.mark.parametrize("budget, max_len, buckets", [
    (512, 1024, (32, 64, 128, 256, 512)), (128, 128, (32, 64, 128)), (100, 4096, (32, 64, 100)),
    (512, 80, (32, 64, 80)), (16, 16, (16,)), (32, 32, (32,))])
def test_graph_token_buckets(budget, max_len, buckets):
    assert graph_token_buckets(budget, max_len) == buckets
    config = EngineConfig(max_num_batched_tokens=budget, max_model_len=max_len, page_size=16, cuda_graphs=True)
    assert config.graph_token_buckets == buckets
    assert EngineConfig().graph_token_buckets == ()  # graphs off: nothing padded
    with pytest.raises(ValueError, match="max_model_len must be a positive integer"):
        graph_token_buckets(512, 0)


def test_the_shape_is_the_smallest_that_holds_the_rows_and_a_padding_sequence():
    shape = lambda *rows, **kw: mixed_shape([Rows(0, n) for n in rows], buckets=(32, 64, 128),
                                            sizes=(2, 4, 8), **kw)
    assert shape(20) == MixedShape(32, 2)  # one chunk + one padding sequence
    assert shape(31) == MixedShape(32, 2) and shape(32) == MixedShape(64, 2)  # the padding needs a row
    assert shape(10, 1, 1) == MixedShape(32, 4)  # 3 chunks: 4 sequences, 12 + 1 padding rows
    assert shape(121, 1, 1, 1, 1, 1, 1) == MixedShape(128, 8) and shape(122, 1, 1, 1, 1, 1, 1) is None
    assert shape(*[1] * 8) is None  # no size above 8 chunks: eager
    assert shape(129) is None
    assert mixed_shape([], buckets=(32,), sizes=(2,)) is None
    assert mixed_shape([Rows(0, 5)], buckets=(), sizes=(2,)) is None  # graphs off
    assert mixed_shape([Rows(0, 5, prompt_rows=(1, 3))], buckets=(32,), sizes=(2,)) is None  # prompt logits: eager


@st.composite
def mixed_steps(draw):
    num_chunks = draw(st.integers(0, 7))
    rows = [draw(st.integers(1, 40)) for _ in range(num_chunks)]
    shape = mixed_shape([Rows(0, n) for n in rows], buckets=(32, 64, 128), sizes=(2, 4, 8)) if rows else \
        MixedShape(draw(st.sampled_from((32, 64, 128))), draw(st.sampled_from((2, 4, 8))))
    return rows, shape, draw(st.integers(1, 50))


@settings(max_examples=200, deadline=None)
@given(mixed_steps())
def test_padding_fills_the_shape_on_scratch_pages_only(step):
    rows, shape, num_pool_pages = step
    if shape is None:
        return
    decode_scratch = -(-8 // P)
    padding = padding_sequences(sum(rows), len(rows), shape, page_size=P, num_pool_pages=num_pool_pages,
                                num_decode_scratch_pages=decode_scratch)
    assert len(rows) + len(padding) == shape.num_seqs
    assert sum(rows) + sum(p.end - p.start for p in padding) == shape.num_tokens
    limit = num_pool_pages + decode_scratch + num_mixed_scratch_pages(128, P)
    slots = []
    for p in padding:
        assert not p.is_sampled and p.end - p.start >= 1 and len(p.token_ids) == p.end
        assert all(num_pool_pages <= page < limit for page in p.page_table)  # never a pool page
        assert -(-p.end // P) <= len(p.page_table)  # every position it reads has a page
        slots += [p.page_table[q // P] * P + q % P for q in range(p.start, p.end)]
    assert len(slots) == len(set(slots))  # no two padding rows write one slot


def test_padding_refuses_a_step_that_does_not_fit():
    with pytest.raises(ValueError, match="does not fit"):
        padding_sequences(32, 1, MixedShape(32, 2), page_size=P, num_pool_pages=10, num_decode_scratch_pages=1)
    with pytest.raises(ValueError, match="does not fit"):
        padding_sequences(5, 2, MixedShape(32, 2), page_size=P, num_pool_pages=10, num_decode_scratch_pages=1)


def run(model_dir, prompts, params, **overrides):
    llm = LLM(model_dir, **{**ENGINE, **overrides})
    return llm.generate(prompts, params), llm.engine


def assert_same_traces(outputs, references):
    for out, ref in zip(outputs, references, strict=True):
        assert out.token_ids == ref.token_ids and out.sampler_state == ref.sampler_state
        assert len(out.trace) == len(ref.trace) > 0
        for a, b in zip(out.trace.entries, ref.trace.entries):
            assert torch.equal(a.logits, b.logits) and a.logits_digest == b.logits_digest


def pool_kv(engine):
    pages = engine.config.num_pages
    return engine.runner.kv.k[:, :pages], engine.runner.kv.v[:, :pages]


@pytest.fixture
def mixed_runs(monkeypatch):
    """Count the mixed steps that ran padded, by shape."""
    shapes = []
    run_padded = engine.mixed_graphs.PaddedMixed.run

    def counting(self, chunks, shape):
        shapes.append(shape)
        return run_padded(self, chunks, shape)

    monkeypatch.setattr(engine.mixed_graphs.PaddedMixed, "run", counting)
    return shapes


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_padded_mixed_steps_equal_eager_bitwise_and_write_nowhere_in_the_pool(tiny_dir, params, mixed_runs):
    eager, eager_engine = run(tiny_dir, PROMPTS, params)
    padded, padded_engine = run(tiny_dir, PROMPTS, params, cuda_graphs=True)
    assert len(mixed_runs) >= 2 and len(set(mixed_runs)) >= 2  # prefill steps ran padded, in several shapes
    assert_same_traces(padded, eager)
    for a, b in zip(pool_kv(padded_engine), pool_kv(eager_engine)):
        assert torch.equal(a, b)  # padding sequences changed no pool page


def test_decode_rows_beside_a_prefill_equal_eager(tiny_dir, mixed_runs):
    """Requests arriving while others decode: the arrival's step holds both kinds of rows."""
    def staggered(**overrides):
        llm = LLM(tiny_dir, **{**ENGINE, **overrides})
        eng, ids, done = llm.engine, [], {}
        for prompt in PROMPTS:
            ids.append(eng.add_request(prompt, GREEDY))
            for _ in range(2):
                done.update({o.request_id: o for o in eng.step().finished})
        done.update({o.request_id: o for o in eng.run()})
        return [done[i] for i in ids]

    eager = staggered()
    padded = staggered(cuda_graphs=True, check_mode=True)  # check mode also recomputes pages cold
    assert any(s.num_seqs > 2 for s in mixed_runs)
    assert_same_traces(padded, eager)


def test_prompt_logits_steps_stay_eager_and_equal(tiny_dir, mixed_runs):
    scored = SamplingParams(max_tokens=2, ignore_eos=True, prompt_logits=True)

    def prompt_rows(**overrides):
        llm = LLM(tiny_dir, **{**ENGINE, **overrides})
        for prompt in PROMPTS[:3]:
            llm.engine.add_request(prompt, scored)
        rows = []
        while llm.engine.has_unfinished():
            rows += [(r.request_id, r.start, r.rows) for r in llm.engine.step().prompt_rows]
        return rows

    eager, padded = prompt_rows(), prompt_rows(cuda_graphs=True)
    assert mixed_runs == [] and len(eager) >= 3
    for (rid_a, start_a, a), (rid_b, start_b, b) in zip(eager, padded, strict=True):
        assert (rid_a, start_a) == (rid_b, start_b) and torch.equal(a, b)


def test_the_pool_comparison_detects_a_padding_sequence_writing_into_the_pool(tiny_dir, monkeypatch):
    # Negative control: the first padding sequence aimed at the pool's last pages (no request holds them).
    def leaky(num_rows, num_chunks, shape, *, num_pool_pages, num_decode_scratch_pages, **kwargs):
        return padding_sequences(num_rows, num_chunks, shape, num_pool_pages=num_pool_pages - 9,
                                 num_decode_scratch_pages=num_decode_scratch_pages, **kwargs)

    eager, eager_engine = run(tiny_dir, PROMPTS[:3], GREEDY)
    monkeypatch.setattr(engine.mixed_graphs, "padding_sequences", leaky)
    padded, padded_engine = run(tiny_dir, PROMPTS[:3], GREEDY, cuda_graphs=True)
    assert_same_traces(padded, eager)  # rows stay independent...
    assert not torch.equal(pool_kv(padded_engine)[0], pool_kv(eager_engine)[0])  # ...but the pool changed


def test_the_token_buckets_are_part_of_d(tiny_dir):
    _, eager = run(tiny_dir, [[1]], GREEDY)
    _, padded = run(tiny_dir, [[1]], GREEDY, cuda_graphs=True)
    assert padded.deployment.fields["engine"]["graph_token_buckets"] == [32, 64, 128]
    assert eager.deployment.fields["engine"]["graph_token_buckets"] == []
    assert padded.runner.num_scratch_pages == 1 + 8  # decode slots, then the first padding sequence's pages
