"""Building paged-attention launches from logical requests, for invariance tests on any device.

A :class:`Request` holds the logical q/k/v of every position. A :class:`Step` asks for the
queries [q_start, q_end) of a request with KV 0..q_end-1 already cached. ``run_steps`` packs
several steps into one launch: pages are placed at random physical ids, every slot that holds
no logical KV (the future part of a last page, spare pages) is poisoned, and block-table
padding names a page that does not exist, so reading any of them would show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from kernels import ops
from tests.kernels.invariance import bits_equal, fill_rows

POISONS = ("nan", "inf", "huge", "random", "zero")
MISSING_PAGE = 2**30  # block-table padding: never a valid page id


@dataclass(frozen=True)
class Request:
    """Logical queries, keys and values of positions 0..L-1."""

    q: torch.Tensor  # [L, Hq, D]
    k: torch.Tensor  # [L, Hkv, D]
    v: torch.Tensor  # [L, Hkv, D]

    @property
    def length(self) -> int:
        return self.q.shape[0]


@dataclass(frozen=True)
class Step:
    """Queries [q_start, q_end) of ``request``; its KV 0..q_end-1 is cached."""

    request: Request
    q_start: int
    q_end: int


def make_request(length: int, num_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype,
                 gen: torch.Generator, fill: str = "random") -> Request:
    """A request whose q/k/v hold ``fill`` values (see invariance.fill_rows)."""
    def values(heads: int) -> torch.Tensor:
        return fill_rows(fill, (length, heads, head_dim), dtype, gen)
    return Request(values(num_heads), values(num_kv_heads), values(num_kv_heads))


def _poison(kind: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if kind == "inf":
        return torch.full(shape, float("inf"), dtype=dtype)
    return fill_rows(kind, shape, dtype, gen)


def run_steps(steps: list[Step], *, page_size: int, scale: float, gen: torch.Generator, poison: str = "nan",
              num_spare_pages: int = 2, device: str = "cpu",
              attention: Callable[..., torch.Tensor] = ops.paged_attention) -> list[torch.Tensor]:
    """One ``attention`` launch (signature of ops.paged_attention) for all steps; each step's output rows."""
    first = steps[0].request
    num_kv_heads, head_dim, dtype = first.k.shape[1], first.k.shape[2], first.k.dtype
    pages_per_step = [-(-s.q_end // page_size) for s in steps]
    num_pages = sum(pages_per_step) + num_spare_pages
    physical = torch.randperm(num_pages, generator=gen).tolist()
    cache_shape = (num_pages, page_size, num_kv_heads, head_dim)
    k_cache, v_cache = _poison(poison, cache_shape, dtype, gen), _poison(poison, cache_shape, dtype, gen)
    table = torch.full((len(steps), max(pages_per_step) + 1), MISSING_PAGE, dtype=torch.int32)
    for b, step in enumerate(steps):
        pages, physical = physical[:pages_per_step[b]], physical[pages_per_step[b]:]
        table[b, :len(pages)] = torch.tensor(pages, dtype=torch.int32)
        for pos in range(step.q_end):
            page, offset = pages[pos // page_size], pos % page_size
            k_cache[page, offset] = step.request.k[pos]
            v_cache[page, offset] = step.request.v[pos]
    q = torch.cat([s.request.q[s.q_start:s.q_end] for s in steps])
    q_lens = [s.q_end - s.q_start for s in steps]
    query_start_loc = torch.tensor([0] + q_lens, dtype=torch.int64).cumsum(0).to(torch.int32)
    seq_lens = torch.tensor([s.q_end for s in steps], dtype=torch.int32)
    out = attention(q.to(device), k_cache.to(device), v_cache.to(device), table.to(device),
                              query_start_loc.to(device), seq_lens.to(device), scale).cpu()
    return list(out.split(q_lens))


def chunk_bounds(length: int, cuts: list[int]) -> list[tuple[int, int]]:
    """[start, end) chunks of [0, length) split at the given cut points."""
    points = [0] + sorted({c for c in cuts if 0 < c < length}) + [length]
    return list(zip(points[:-1], points[1:]))


def schedule_failures(request: Request, chunks: list[tuple[int, int]], companions: list[list[Step]],
                      positions_in_batch: list[int], *, page_size: int, scale: float, seed: int, poison: str,
                      device: str = "cpu", attention: Callable[..., torch.Tensor] = ops.paged_attention) -> list[str]:
    """Run ``request`` as ``chunks`` (each in a batch with its companions, at the given batch
    position) and report every chunk whose rows differ in any bit from the request's own full
    prefill run alone."""
    gen = torch.Generator().manual_seed(seed)
    reference = run_steps([Step(request, 0, request.length)], page_size=page_size, scale=scale, gen=gen,
                          poison="zero", num_spare_pages=0, device=device, attention=attention)[0]
    failures = []
    for (start, end), others, where in zip(chunks, companions, positions_in_batch):
        steps = list(others)
        index = min(where, len(steps))
        steps.insert(index, Step(request, start, end))
        got = run_steps(steps, page_size=page_size, scale=scale, gen=gen, poison=poison, device=device,
                        attention=attention)[index]
        expected = reference[start:end]
        if not bits_equal(got, expected):
            diff = (got.double() - expected.double()).abs().nan_to_num(nan=float("inf")).max().item()
            failures.append(f"chunk [{start}, {end}) with {len(others)} companions at {index}, poison {poison}: "
                            f"max |diff| {diff:.3g}")
    return failures


def one_kernel_attention(*, kernel: bool, entry=None) -> Callable[..., torch.Tensor]:
    """An attention function with ops.paged_attention's signature that runs the one-kernel form
    (kernels/attention_prefill.py) on every launch, however short: which launches take it is a
    choice of speed, so tests hold it to the pair's bits on any schedule. ``kernel``: the Triton
    kernel (CUDA or the interpreter), else its CPU twin; a launch of no more tokens than requests
    takes the decode bucket's entry, as in kernels/ops.py; ``entry``: a configuration outside the
    plan to launch instead of the active plan's entry."""
    from kernels import configs, cpu_attention, metadata
    from kernels.attention_prefill import launch_attention_prefill
    from kernels.launch import require
    from kernels.tensors import dtype_name

    def attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, scale, seq_idx=None, nonfinite=None,
                  *, softcap=0.0):
        planned = entry or require(configs.prefill_attention_config(
            num_heads=q.shape[1], num_kv_heads=k_cache.shape[2], head_dim=q.shape[-1], page_size=k_cache.shape[1],
            scale=scale, dtype=dtype_name(q.dtype), softcap=softcap, decode=q.shape[0] <= block_table.shape[0]))
        seq_idx = metadata.token_requests(query_start_loc, q.shape[0]) if seq_idx is None else seq_idx
        out = torch.empty_like(q)
        flags = torch.full((q.shape[0], q.shape[1]), -1.0, device=q.device) if nonfinite is None else nonfinite
        (launch_attention_prefill if kernel else cpu_attention.attention_prefill)(
            q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, flags, planned)
        return out
    return attention
