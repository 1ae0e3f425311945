"""Padded decode batches: which steps are padded, to which size, and where padding rows go (torch-free).

With ``cuda_graphs`` on, a *decode step* (every scheduled chunk is one sampled row) of ``n`` rows
runs as a batch of ``graph_batch_size(n)`` rows, so one captured graph per size serves every
step. Row ``i`` of the padded batch, for ``n <= i < size``, is a padding row:

* token id 0 at position ``i % page_size``, KV length ``position + 1``;
* its K/V go to *scratch* slot ``i``: page ``num_pool_pages + i // page_size``, offset
  ``i % page_size``; its block-table row names only that scratch page.

Graphs are captured per batch size and *table width*: the block-table columns the attention
kernels see (:func:`graph_table_widths`). A step takes the narrowest width that holds every
row's KV length, so a short-context step does not launch programs for the KV segments of the
longest possible request; which segments run never changes a value (a query merges the
segments up to its own position; the kernel contracts let the table width differ).

Scratch pages lie past the page pool (ids ``>= num_pool_pages``), which is all the block manager
ever hands out, so no request's page table names one: padding rows write nowhere a request reads
and read nothing a request wrote. Each padding row reads only its own scratch page up to its own
slot. Real rows keep their index, token, position, slot, table and length, so with row-
independent kernels (the kernel contracts) their values equal those of the unpadded batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

__all__ = ["graph_batch_sizes", "graph_batch_size", "graph_table_widths", "num_scratch_pages", "is_decode_step",
           "PaddedDecodeBatch", "pad_decode"]

_SMALL_SIZES = (1, 2, 4, 8)
_SIZE_STEP = 8  # above 8 rows, sizes are multiples of 8 (at most 7 padding rows)


def graph_batch_sizes(max_num_seqs: int) -> tuple[int, ...]:
    """Padded batch sizes for ``max_num_seqs``: 1, 2, 4, 8, then multiples of 8, and max_num_seqs itself."""
    if not isinstance(max_num_seqs, int) or max_num_seqs <= 0:
        raise ValueError(f"max_num_seqs must be a positive integer, got {max_num_seqs!r}")
    sizes = {s for s in _SMALL_SIZES if s <= max_num_seqs}
    sizes.update(range(_SIZE_STEP * 2, max_num_seqs + 1, _SIZE_STEP))
    sizes.add(max_num_seqs)
    return tuple(sorted(sizes))


def graph_batch_size(num_rows: int, sizes: Sequence[int]) -> int:
    """The smallest size in ``sizes`` that holds ``num_rows`` rows."""
    for size in sizes:
        if size >= num_rows:
            return size
    raise ValueError(f"a decode step of {num_rows} rows exceeds the largest graph batch size "
                     f"{max(sizes, default=0)}")


_MIN_TABLE_PAGES = 64  # 1,024 positions at the default page size: one KV segment of the bf16 plans


def graph_table_widths(max_pages_per_seq: int) -> tuple[int, ...]:
    """Block-table widths of decode graphs: 64, 128, 256, ... pages below ``max_pages_per_seq``, then it."""
    if not isinstance(max_pages_per_seq, int) or max_pages_per_seq <= 0:
        raise ValueError(f"max_pages_per_seq must be a positive integer, got {max_pages_per_seq!r}")
    widths, width = [], _MIN_TABLE_PAGES
    while width < max_pages_per_seq:
        widths.append(width)
        width *= 2
    return (*widths, max_pages_per_seq)


def num_scratch_pages(max_batch_size: int, page_size: int) -> int:
    """Scratch pages that give each row index of the largest padded batch its own slot."""
    return -(-max_batch_size // page_size)


class _Chunk(Protocol):
    token_ids: Sequence[int]
    page_table: Sequence[int]
    start: int
    end: int
    is_sampled: bool


def is_decode_step(chunks: Sequence[_Chunk], sizes: Sequence[int]) -> bool:
    """Whether a step is padded: at least one chunk, every chunk one sampled row, within the sizes."""
    return bool(sizes) and 0 < len(chunks) <= max(sizes) and \
        all(c.end - c.start == 1 and c.is_sampled for c in chunks)


@dataclass(frozen=True, slots=True)
class PaddedDecodeBatch:
    """The rows of one padded decode step; entry ``i`` of every field belongs to row ``i``."""

    num_rows: int  # real rows, first; rows past them are padding
    token_ids: tuple[int, ...]
    positions: tuple[int, ...]
    slots: tuple[int, ...]
    page_tables: tuple[Sequence[int], ...]  # the pages each row's attention may visit
    seq_lens: tuple[int, ...]  # KV length including this step's row
    table_width: int | None = None  # block-table columns the step's kernels see (None: all)

    @property
    def batch_size(self) -> int:
        return len(self.token_ids)


def pad_decode(chunks: Sequence[_Chunk], *, batch_size: int, page_size: int, num_pool_pages: int,
               table_widths: Sequence[int] = (), tokens_on_device: bool = False) -> PaddedDecodeBatch:
    """The padded batch of a decode step (``chunks`` may be empty: an all-padding batch for capture).

    Its table width is the smallest of ``table_widths`` whose pages hold every row's KV length
    (None when ``table_widths`` is empty). With ``tokens_on_device`` the real rows' tokens are
    not known on the host yet (a step planned ahead of the one that samples them): their token
    id is a placeholder 0, which the runner overwrites on the device before the step runs.
    """
    if len(chunks) > batch_size:
        raise ValueError(f"{len(chunks)} rows do not fit a padded batch of {batch_size}")
    if any(c.end - c.start != 1 or not c.is_sampled for c in chunks):
        raise ValueError("a padded decode step holds only single sampled rows")
    token_ids, positions, slots, tables, seq_lens = [], [], [], [], []
    for c in chunks:
        position = c.start
        token_ids.append(0 if tokens_on_device else c.token_ids[position])
        positions.append(position)
        slots.append(c.page_table[position // page_size] * page_size + position % page_size)
        tables.append(c.page_table)
        seq_lens.append(c.end)
    for i in range(len(chunks), batch_size):
        page, offset = num_pool_pages + i // page_size, i % page_size
        token_ids.append(0)
        positions.append(offset)
        slots.append(page * page_size + offset)
        tables.append((page,))
        seq_lens.append(offset + 1)
    width = None
    if table_widths:
        num_pages = -(-max(seq_lens) // page_size)
        width = next((w for w in sorted(table_widths) if w >= num_pages), None)
        if width is None:
            raise ValueError(f"a decode row of {max(seq_lens)} positions needs {num_pages} pages, more than the "
                             f"widest graph table ({max(table_widths)} pages)")
    return PaddedDecodeBatch(len(chunks), tuple(token_ids), tuple(positions), tuple(slots), tuple(tables),
                             tuple(seq_lens), width)
