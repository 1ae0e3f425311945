"""Padded mixed steps: which steps with prefill rows are padded, to which shape, and where padding goes.

A step that holds a prefill chunk runs every kernel of the forward once; launched one by one from
Python that costs tens of milliseconds of host time for a few milliseconds of device work. With
``cuda_graphs`` on, such a step of ``T`` rows in ``B`` chunks (no prompt logits asked) runs instead
as a batch of ``num_tokens`` rows in ``num_seqs`` sequences, the smallest
:func:`graph_token_buckets` entry and :func:`~engine.decode_padding.graph_batch_sizes` entry with
``num_seqs > B`` and ``num_tokens >= T + (num_seqs - B)``, so one graph per such shape serves every
mixed step. The real chunks come first and keep their rows; after them come ``num_seqs - B``
padding sequences, each of at least one row:

* the first takes every padding row but one per remaining padding sequence: token id 0 at
  positions ``0 .. n - 1`` on its own scratch pages (:func:`num_mixed_scratch_pages` of them,
  after the decode scratch pages), all of its KV new this step;
* padding sequence ``1 + k`` is one row laid out as decode padding row ``k``: token 0 at position
  ``k % page_size`` on decode scratch page ``k // page_size``, KV length ``position + 1``.

Scratch pages lie past the page pool, so no request's page table names one: padding rows write
nowhere a request reads and read only scratch pages. Sample rows past the real sampled rows name
the last padding row. With row-independent kernels (the kernel contracts) every real row's values
equal those of the unpadded step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

__all__ = ["graph_token_buckets", "MixedShape", "mixed_shape", "num_mixed_scratch_pages", "padding_sequences"]

_MIN_BUCKET = 32


def graph_token_buckets(max_num_batched_tokens: int, max_model_len: int) -> tuple[int, ...]:
    """Padded row counts of mixed steps: 32, 64, 128, ... below the step budget, then the budget
    itself; none above ``max_model_len`` (the first padding sequence's positions must exist)."""
    for name, value in (("max_num_batched_tokens", max_num_batched_tokens), ("max_model_len", max_model_len)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    top = min(max_num_batched_tokens, max_model_len)
    buckets, bucket = [], _MIN_BUCKET
    while bucket < top:
        buckets.append(bucket)
        bucket *= 2
    return (*buckets, top)


def num_mixed_scratch_pages(max_bucket: int, page_size: int) -> int:
    """Scratch pages of the first padding sequence of the largest mixed step."""
    return -(-max_bucket // page_size)


class _Chunk(Protocol):
    start: int
    end: int
    is_sampled: bool
    prompt_rows: tuple[int, int]


@dataclass(frozen=True, slots=True)
class MixedShape:
    """The padded shape of a mixed step: what a graph is captured for."""

    num_tokens: int
    num_seqs: int


def mixed_shape(chunks: Sequence[_Chunk], *, buckets: Sequence[int], sizes: Sequence[int]) -> MixedShape | None:
    """The padded shape of a step that holds a prefill chunk, or None when it runs eagerly
    (no buckets, prompt logits asked, or no graph shape holds it)."""
    if not buckets or not chunks or any(c.prompt_rows[1] > c.prompt_rows[0] for c in chunks):
        return None
    num_rows, num_chunks = sum(c.end - c.start for c in chunks), len(chunks)
    for num_seqs in sizes:
        if num_seqs <= num_chunks:
            continue
        needed = num_rows + num_seqs - num_chunks  # every padding sequence holds at least one row
        bucket = next((b for b in buckets if b >= needed), None)
        return None if bucket is None else MixedShape(bucket, num_seqs)
    return None


@dataclass(frozen=True, slots=True)
class PaddingSequence:
    """One padding sequence of a mixed step: rows ``0 .. end - 1`` of ``token_ids`` on ``page_table``;
    rows ``start .. end - 1`` are computed this step (field names as the runner's chunks)."""

    token_ids: tuple[int, ...]
    page_table: tuple[int, ...]
    start: int
    end: int
    is_sampled: bool = False
    prompt_rows: tuple[int, int] = (0, 0)


def padding_sequences(num_rows: int, num_chunks: int, shape: MixedShape, *, page_size: int,
                      num_pool_pages: int, num_decode_scratch_pages: int) -> list[PaddingSequence]:
    """The padding sequences that fill a step of ``num_rows`` rows in ``num_chunks`` chunks to ``shape``."""
    num_padding = shape.num_seqs - num_chunks
    first = shape.num_tokens - num_rows - (num_padding - 1)
    if num_padding < 1 or first < 1:
        raise ValueError(f"a step of {num_rows} rows in {num_chunks} chunks does not fit {shape}")
    base = num_pool_pages + num_decode_scratch_pages
    out = [PaddingSequence((0,) * first, tuple(range(base, base + -(-first // page_size))), 0, first)]
    for k in range(num_padding - 1):  # as decode padding row k: its own slot on a decode scratch page
        position = k % page_size
        out.append(PaddingSequence((0,) * (position + 1), (num_pool_pages + k // page_size,), position, position + 1))
    return out
