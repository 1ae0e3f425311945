"""Staging decode steps: block-table rows written incrementally hold exactly a fresh packing's values."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.decode_padding import PaddedDecodeBatch
from engine.model_runner import Chunk, _pack
from engine.staging import StepBuffers

MAX_SEQS, MAX_PAGES, PAGE = 4, 12, 16


def batch_of(tables: list[list[int]]) -> PaddedDecodeBatch:
    n = len(tables)
    return PaddedDecodeBatch(n, tuple(range(n)), tuple(range(n)), tuple(range(n)), tuple(tables),
                             tuple(range(1, n + 1)))


def expected_table(tables: list[list[int]]) -> torch.Tensor:
    out = torch.zeros(len(tables), MAX_PAGES, dtype=torch.int32)
    for row, pages in enumerate(tables):
        out[row, :len(pages)] = torch.tensor(pages, dtype=torch.int32)
    return out


# One step: the tables of its rows, each grown, kept, replaced or shrunk from the previous
# step's row, or an eager (packed) step in between.
step_ops = st.lists(st.one_of(
    st.just("eager"),
    st.lists(st.tuples(st.sampled_from(["grow", "keep", "replace", "shrink"]), st.integers(0, 99)),
             min_size=1, max_size=MAX_SEQS)), min_size=1, max_size=25)


@settings(max_examples=120, deadline=None)
@given(step_ops)
def test_staged_block_tables_equal_a_fresh_packing(steps):
    buffers = StepBuffers(max_num_rows=64, max_num_seqs=MAX_SEQS, max_pages_per_seq=MAX_PAGES,
                          device=torch.device("cpu"))
    tables: list[list[int]] = [[] for _ in range(MAX_SEQS)]
    for step in steps:
        if step == "eager":
            chunk = Chunk(list(range(20)), [7, 8], 0, 20, True)
            buffers.stage(_pack([chunk, chunk], PAGE, MAX_PAGES))
            continue
        for row, (op, value) in enumerate(step):
            pages = tables[row]
            if op == "grow" and len(pages) < MAX_PAGES:
                pages.append(value)  # the same list object, appended to, as a live page table is
            elif op == "replace":
                pages[:] = [value] * (value % MAX_PAGES + 1)  # same object, new contents (re-admission)
            elif op == "shrink" and pages:
                pages.pop()
        staged = buffers.stage_decode(batch_of([tables[row] for row in range(len(step))]))
        assert torch.equal(staged.block_table, expected_table(tables[:len(step)]))


def test_a_decode_batch_is_staged_whole():
    buffers = StepBuffers(max_num_rows=64, max_num_seqs=MAX_SEQS, max_pages_per_seq=MAX_PAGES,
                          device=torch.device("cpu"))
    batch = PaddedDecodeBatch(1, (5, 0), (17, 1), (33, 161), ([3, 2], [10]), (18, 2))
    staged = buffers.stage_decode(batch)
    assert staged.input_ids.tolist() == [5, 0] and staged.positions.tolist() == [17, 1]
    assert staged.slot_mapping.tolist() == [33, 161] and staged.seq_lens.tolist() == [18, 2]
    assert staged.query_start_loc.tolist() == [0, 1, 2] and staged.sample_rows.tolist() == [0, 1]
    assert staged.block_table.tolist() == expected_table([[3, 2], [10]]).tolist()
    # every row is a one-token request and sampled: what the forward would compute, staged
    assert staged.seq_idx.dtype == torch.int32 and staged.seq_idx.tolist() == [0, 1]
    assert staged.is_every_row_sampled


def test_packed_steps_leave_the_request_index_to_the_forward():
    buffers = StepBuffers(max_num_rows=64, max_num_seqs=MAX_SEQS, max_pages_per_seq=MAX_PAGES,
                          device=torch.device("cpu"))
    staged = buffers.stage(_pack([Chunk(list(range(20)), [7, 8], 0, 20, True)], PAGE, MAX_PAGES))
    assert staged.seq_idx is None and not staged.is_every_row_sampled


@pytest.mark.parametrize("size", [1, MAX_SEQS])
def test_views_have_the_sizes_asked_for(size):
    buffers = StepBuffers(max_num_rows=64, max_num_seqs=MAX_SEQS, max_pages_per_seq=MAX_PAGES,
                          device=torch.device("cpu"))
    views = buffers.views(size, size, size)
    assert views.input_ids.shape == (size,) and views.block_table.shape == (size, MAX_PAGES)
    assert views.query_start_loc.shape == (size + 1,)


@pytest.mark.parametrize("size", [1, 3, MAX_SEQS])
def test_a_decode_step_reads_only_the_copied_part_of_the_region(size):
    """One copy of ``used_bytes(size)`` bytes carries every input of a decode step of ``size`` rows."""
    buffers = StepBuffers(max_num_rows=64, max_num_seqs=MAX_SEQS, max_pages_per_seq=MAX_PAGES,
                          device=torch.device("cpu"))
    staged = buffers.stage_decode(batch_of([[row + 1] for row in range(size)]))
    base = buffers.decode.device_bytes.data_ptr()
    used = buffers.decode.used_bytes(size)
    for name in ("input_ids", "positions", "slot_mapping", "block_table", "query_start_loc", "seq_lens",
                 "sample_rows", "seq_idx"):
        view = getattr(staged, name)
        assert view.is_contiguous() and base <= view.data_ptr()
        assert view.data_ptr() + view.numel() * view.element_size() <= base + used, name
    assert buffers.decode.used_bytes(MAX_SEQS) == buffers.decode.device_bytes.numel()
