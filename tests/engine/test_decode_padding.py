"""Padded decode batches: graph batch sizes, where padding rows go, and padded vs eager on the CPU.

On the CPU ``cuda_graphs=True`` runs the exact padded batches a CUDA graph would replay, eagerly
(graphs do not exist there), so these tests check the padding logic itself: padding rows read
and write only scratch pages outside the pool, and every real row's logits, token and sampler
state equal the unpadded engine's bitwise. Graph capture and replay are checked on a GPU
(tests/gpu/test_engine_speed_gpu.py).
"""

import dataclasses
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.cuda_graphs
from engine.config import EngineConfig
from engine.decode_padding import (graph_batch_size, graph_batch_sizes, graph_table_widths, is_decode_step,
                                   num_scratch_pages, pad_decode)
from engine.llm_engine import LLM, LLMEngine
from engine.sampling_params import SamplingParams

P = 16
ENGINE = dict(page_size=P, num_pages=40, max_num_seqs=8, max_num_batched_tokens=8 * P, max_model_len=8 * P)
PROMPTS = [[5, 6, 7], list(range(10, 10 + P + 1)), [9] * (2 * P), list(range(40, 40 + 2 * P + 3)), [1], [3, 1, 4]]
GREEDY = SamplingParams(max_tokens=5, ignore_eos=True)
SAMPLED = SamplingParams(max_tokens=5, temperature=0.9, top_p=0.9, seed=11, ignore_eos=True)


@dataclass(frozen=True)
class Row:
    token_ids: list
    page_table: list
    start: int
    end: int
    is_sampled: bool = True


def decode_row(length: int, pages: list) -> Row:
    return Row(list(range(100, 100 + length)), pages, length - 1, length)


@pytest.mark.parametrize("max_num_seqs, sizes", [
    (1, (1,)), (3, (1, 2, 3)), (8, (1, 2, 4, 8)), (16, (1, 2, 4, 8, 16)), (20, (1, 2, 4, 8, 16, 20)),
    (33, (1, 2, 4, 8, 16, 24, 32, 33)),
])
def test_graph_batch_sizes(max_num_seqs, sizes):
    assert graph_batch_sizes(max_num_seqs) == sizes
    assert EngineConfig(max_num_seqs=max_num_seqs, cuda_graphs=True).graph_batch_sizes == sizes
    assert EngineConfig(max_num_seqs=max_num_seqs).graph_batch_sizes == ()


@pytest.mark.parametrize("max_num_seqs", [1, 5, 8, 16, 50, 256])
def test_every_batch_gets_the_smallest_size_that_holds_it(max_num_seqs):
    sizes = graph_batch_sizes(max_num_seqs)
    for n in range(1, max_num_seqs + 1):
        size = graph_batch_size(n, sizes)
        assert size >= n and size in sizes and not any(n <= s < size for s in sizes)
        assert size - n < max(n, 8)  # at most doubles small batches, at most 7 padding rows above 8
    with pytest.raises(ValueError, match="exceeds the largest graph batch size"):
        graph_batch_size(max_num_seqs + 1, sizes)


def test_only_single_sampled_rows_make_a_decode_step():
    one = decode_row(5, [0])
    sizes = (1, 2, 4)
    assert is_decode_step([one, decode_row(17, [1, 2])], sizes)
    assert not is_decode_step([], sizes)
    assert not is_decode_step([one], ())
    assert not is_decode_step([one, Row(one.token_ids, [0], 0, 5)], sizes)  # a prefill chunk
    assert not is_decode_step([Row(one.token_ids, [0], 3, 4, is_sampled=False)], sizes)
    assert not is_decode_step([one] * 5, sizes)


@st.composite
def decode_steps(draw):
    num_pool_pages = draw(st.integers(1, 40))
    lengths = draw(st.lists(st.integers(1, 4 * P), min_size=0, max_size=8))
    free = list(range(num_pool_pages))
    rows = []
    for length in lengths:
        need = -(-length // P)
        if need > len(free):
            break
        pages = draw(st.permutations(free))[:need]
        free = [p for p in free if p not in pages]
        rows.append(decode_row(length, pages))
    size = draw(st.sampled_from([s for s in graph_batch_sizes(8) if s >= max(len(rows), 1)]))
    return rows, size, num_pool_pages


@settings(max_examples=150, deadline=None)
@given(decode_steps())
def test_padding_rows_name_only_their_own_scratch_slots(step):
    rows, size, num_pool_pages = step
    batch = pad_decode(rows, batch_size=size, page_size=P, num_pool_pages=num_pool_pages)
    assert batch.batch_size == size and batch.num_rows == len(rows)
    scratch = range(num_pool_pages, num_pool_pages + num_scratch_pages(size, P))
    for i in range(size):
        pos, slot, table = batch.positions[i], batch.slots[i], batch.page_tables[i]
        assert slot == table[pos // P] * P + pos % P  # the row's K/V lands where its attention reads it
        assert batch.seq_lens[i] == pos + 1
        if i < len(rows):  # a real row is exactly the unpadded row
            r = rows[i]
            assert (batch.token_ids[i], pos, table) == (r.token_ids[r.start], r.start, r.page_table)
        else:  # padding: one scratch page, its slot i, never a pool page
            assert list(table) == [num_pool_pages + i // P] and table[0] in scratch
            assert slot == num_pool_pages * P + i and batch.token_ids[i] == 0
    assert len(set(batch.slots)) == size  # no two rows of the step write one slot


def test_an_all_padding_batch_is_what_graphs_are_captured_with():
    batch = pad_decode((), batch_size=4, page_size=P, num_pool_pages=10)
    assert batch.num_rows == 0 and batch.slots == (160, 161, 162, 163) and batch.positions == (0, 1, 2, 3)


def test_pad_decode_refuses_what_is_not_a_padded_decode_step():
    with pytest.raises(ValueError, match="do not fit"):
        pad_decode([decode_row(3, [0])] * 3, batch_size=2, page_size=P, num_pool_pages=4)
    with pytest.raises(ValueError, match="only single sampled rows"):
        pad_decode([Row([1, 2, 3], [0], 0, 3)], batch_size=2, page_size=P, num_pool_pages=4)


def test_cuda_graphs_must_be_a_bool():
    with pytest.raises(ValueError, match="cuda_graphs"):
        EngineConfig(cuda_graphs="yes")


def run(model_dir, prompts, params, **overrides):
    llm = LLM(model_dir, **{**ENGINE, **overrides})
    return llm.generate(prompts, params), llm.engine


def assert_same_traces(outputs, references):
    for out, ref in zip(outputs, references, strict=True):
        assert out.token_ids == ref.token_ids and out.sampler_state == ref.sampler_state
        assert len(out.trace) == len(ref.trace)
        for a, b in zip(out.trace.entries, ref.trace.entries):
            assert torch.equal(a.logits, b.logits) and a.logits_digest == b.logits_digest
            assert a.token == b.token and a.sampler_state == b.sampler_state


def pool_kv(engine):
    pages = engine.config.num_pages
    return engine.runner.kv.k[:, :pages], engine.runner.kv.v[:, :pages]


def scratch_written(engine) -> bool:
    return bool(engine.runner.kv.k[:, engine.config.num_pages:].ne(0).any())


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.parametrize("num_prompts", [3, 5])  # padded to 4 and to 8
def test_padded_decode_equals_eager_bitwise_and_writes_nowhere_in_the_pool(tiny_dir, params, num_prompts):
    prompts = PROMPTS[:num_prompts]
    eager, eager_engine = run(tiny_dir, prompts, params)
    padded, padded_engine = run(tiny_dir, prompts, params, cuda_graphs=True)
    assert padded_engine.runner.num_decode_scratch_pages == 1 and scratch_written(padded_engine)  # padding ran
    assert_same_traces(padded, eager)
    for a, b in zip(pool_kv(padded_engine), pool_kv(eager_engine)):
        assert torch.equal(a, b)  # padding rows changed no pool page


def test_the_pool_comparison_detects_a_padding_row_writing_into_the_pool(tiny_dir, monkeypatch):
    # Negative control: padding rows aimed at the pool's last page (no request holds it).
    def leaky_pad(chunks, *, num_pool_pages, **kwargs):
        return pad_decode(chunks, num_pool_pages=num_pool_pages - 1, **kwargs)

    eager, eager_engine = run(tiny_dir, PROMPTS[:3], GREEDY)
    monkeypatch.setattr(engine.cuda_graphs, "pad_decode", leaky_pad)
    padded, padded_engine = run(tiny_dir, PROMPTS[:3], GREEDY, cuda_graphs=True)
    assert_same_traces(padded, eager)  # rows stay independent...
    assert not torch.equal(pool_kv(padded_engine)[0], pool_kv(eager_engine)[0])  # ...but the pool changed


def staggered(model_dir, **overrides):
    """The donor alone for two steps (its pages are published), then two requests that reuse them."""
    engine = LLMEngine(model_dir, EngineConfig(**{**ENGINE, **overrides}))
    ids = [engine.add_request(PROMPTS[3], GREEDY)]
    done = {o.request_id: o for _ in range(2) for o in engine.step().finished}
    ids += [engine.add_request(p, GREEDY) for p in (PROMPTS[3][:P + 4], PROMPTS[3][:2 * P + 1])]
    done.update({o.request_id: o for o in engine.run()})
    return [done[i] for i in ids], engine


def test_check_mode_holds_on_padded_decode_with_prefix_reuse(tiny_dir):
    eager, _ = staggered(tiny_dir)
    padded, engine = staggered(tiny_dir, cuda_graphs=True, check_mode=True, check_kv_pages_per_step=4)
    assert_same_traces(padded, eager)
    assert padded[1].num_cached_tokens == P and padded[2].num_cached_tokens == 2 * P and scratch_written(engine)


def test_the_decode_mode_is_part_of_d(tiny_dir):
    _, eager = run(tiny_dir, [[1]], GREEDY)
    _, padded = run(tiny_dir, [[1]], GREEDY, cuda_graphs=True)
    assert padded.deployment.fields["engine"]["cuda_graphs"] is True
    assert padded.deployment.fields["engine"]["graph_batch_sizes"] == [1, 2, 4, 8]
    assert eager.deployment.fields["engine"]["graph_batch_sizes"] == []
    assert padded.deployment.fields["engine"]["graph_table_widths"] == [8]  # max_model_len 8 pages
    assert eager.deployment.fields["engine"]["graph_table_widths"] == []
    assert padded.deployment.digest != eager.deployment.digest


@pytest.mark.parametrize("max_pages, widths", [(1, (1,)), (64, (64,)), (65, (64, 65)), (128, (64, 128)),
                                                (1536, (64, 128, 256, 512, 1024, 1536))])
def test_graph_table_widths(max_pages, widths):
    assert graph_table_widths(max_pages) == widths
    config = EngineConfig(max_model_len=max_pages * P, num_pages=max_pages, cuda_graphs=True)
    assert config.graph_table_widths == widths
    with pytest.raises(ValueError, match="positive integer"):
        graph_table_widths(0)


def test_a_step_takes_the_narrowest_table_that_holds_its_rows():
    def width(*lengths):
        rows = [decode_row(n, list(range(-(-n // P)))) for n in lengths]
        return pad_decode(rows, batch_size=4, page_size=P, num_pool_pages=200, table_widths=(64, 128)).table_width

    assert width(1, 17) == 64 and width(64 * P) == 64 and width(3, 64 * P + 1) == 128
    assert pad_decode((), batch_size=4, page_size=P, num_pool_pages=10).table_width is None
    with pytest.raises(ValueError, match="more than the widest graph table"):
        width(128 * P + 1)


def test_narrow_table_graphs_equal_eager_steps(tiny_dir):
    # max_model_len of 128 pages: tables of 64 and 128 pages (8 and 16 KV segments of the fp32
    # plan); the long prompt's decode rows move from the narrow to the wide table mid-run.
    long = dict(max_model_len=128 * P, num_pages=160, max_num_batched_tokens=512)
    prompts = [PROMPTS[0], [t % 250 + 1 for t in range(64 * P - 2)], PROMPTS[3]]
    eager, _ = run(tiny_dir, prompts, GREEDY, **long)
    padded, engine = run(tiny_dir, prompts, GREEDY, cuda_graphs=True, **long)
    assert engine.config.graph_table_widths == (64, 128)
    assert_same_traces(padded, eager)
    widths = {w for (_, w) in engine.runner.buffers._decode_views}
    assert widths == {64, 128}  # both tables were used


def _staged_decode(model_dir):
    """A runner and a decode step of three requests staged as a padded decode step is."""
    engine = LLMEngine(model_dir, EngineConfig(**ENGINE, cuda_graphs=True))
    runner = engine.runner
    rows = [decode_row(3, [0]), decode_row(P + 1, [1, 2]), decode_row(5, [3])]
    batch = runner.buffers.stage_decode(runner.padded_decode.pad(rows))
    return runner, batch


def _forward(runner, batch):
    from kernels.launch import use_plan

    with use_plan(runner.plan, check_metadata=True):
        return runner.model.forward(batch, runner.kv)[0]


def test_the_staged_request_index_and_sampled_rows_give_the_computed_ones_bits(tiny_dir):
    runner, staged = _staged_decode(tiny_dir)
    assert staged.seq_idx is not None and staged.is_every_row_sampled
    computed = dataclasses.replace(staged, seq_idx=None, is_every_row_sampled=False)
    assert torch.equal(_forward(runner, staged).view(torch.int32), _forward(runner, computed).view(torch.int32))


def test_a_wrong_staged_request_index_or_sampled_row_claim_is_refused(tiny_dir):
    runner, staged = _staged_decode(tiny_dir)
    wrong_idx = dataclasses.replace(staged, seq_idx=staged.seq_idx.flip(0).contiguous())
    with pytest.raises(ValueError, match="attention seq_idx"):
        _forward(runner, wrong_idx)
    wrong_rows = dataclasses.replace(staged, sample_rows=staged.sample_rows.flip(0).contiguous())
    with pytest.raises(ValueError, match="is_every_row_sampled"):
        _forward(runner, wrong_rows)
