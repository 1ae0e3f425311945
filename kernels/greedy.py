"""The greedy token on the GPU: ``torch.argmax`` of each float32 logit row in two small launches.

A row of V entries is cut into PARTS equal parts of PART entries. The first launch (one program
per row and part) finds its part's maximum and the first index holding it; the second (one
program per row) picks the first part whose maximum is the row's and adds that part's index.
That part holds the row's first maximal entry, so the token is ``torch.argmax(row)``, with NaN
as the largest value (the first NaN wins, as in torch). Only comparisons, no arithmetic on the
values: the index does not depend on how the reductions are ordered. Not a plan kernel: it
selects an index and computes no value of the model (engine/sampler.py's ``greedy_tokens``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton import knobs

__all__ = ["part_argmax_kernel", "pick_part_kernel", "greedy_argmax"]


@triton.jit
def _first_max(x, offs, BIG: tl.constexpr):
    """(the block's maximum, NaN if it holds one; the first index holding it, BIG if none)."""
    is_nan = x != x
    first_nan = tl.min(tl.where(is_nan, offs, BIG), axis=0)
    finite_or_inf = tl.where(is_nan, float("-inf"), x)
    largest = tl.max(finite_or_inf, axis=0)
    first_largest = tl.min(tl.where(finite_or_inf == largest, offs, BIG), axis=0)
    has_nan = first_nan < BIG
    return tl.where(has_nan, float("nan"), largest), tl.where(has_nan, first_nan, first_largest)


@triton.jit
def part_argmax_kernel(logits_ptr, best_ptr, where_ptr, stride_row, PARTS: tl.constexpr, PART: tl.constexpr,
                       BLOCK: tl.constexpr):
    # logits: [S, PARTS * PART] float32 row stride stride_row; best: [S, PARTS] float32; where: [S, PARTS] int32
    row = tl.program_id(0)
    part = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    # lanes past the part read -inf and sit at indices past every real lane, so they never win
    x = tl.load(logits_ptr + row * stride_row + part * PART + offs, mask=offs < PART, other=float("-inf"))
    best, where = _first_max(x, offs, BLOCK)
    tl.store(best_ptr + row * PARTS + part, best)
    tl.store(where_ptr + row * PARTS + part, where)


@triton.jit
def pick_part_kernel(best_ptr, where_ptr, token_ptr, PARTS: tl.constexpr, PART: tl.constexpr,
                     BLOCK_P: tl.constexpr):
    # best: [S, PARTS] float32; where: [S, PARTS] int32; token: [S] int64
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_P)
    is_part = offs < PARTS
    best = tl.load(best_ptr + row * PARTS + offs, mask=is_part, other=float("-inf"))
    _, part = _first_max(best, offs, BLOCK_P)
    where = tl.sum(tl.where(offs == part, tl.load(where_ptr + row * PARTS + offs, mask=is_part, other=0), 0), axis=0)
    tl.store(token_ptr + row, part.to(tl.int64) * PART + where.to(tl.int64))


def greedy_argmax(logits: torch.Tensor, parts: int) -> torch.Tensor:
    """``[S]`` int64 ``torch.argmax(logits, dim=-1)`` of CUDA float32 ``logits`` [S, V] through ``parts``
    equal parts (a divisor of V) of each row."""
    num_rows, vocab_size = logits.shape
    assert logits.is_cuda or knobs.runtime.interpret, "logits must be on CUDA (or run under the Triton interpreter)"
    assert logits.dtype == torch.float32, f"logits must be float32, got {logits.dtype}"
    assert logits.stride(1) == 1, f"logit rows need unit stride, got strides {logits.stride()}"
    assert parts >= 1 and vocab_size % parts == 0, f"{parts} parts do not divide a row of {vocab_size}"
    assert num_rows * max(logits.stride(0), vocab_size) < 2**31, "logits too large for 32-bit offsets"
    part_len = vocab_size // parts
    best = torch.empty(num_rows, parts, dtype=torch.float32, device=logits.device)
    where = torch.empty(num_rows, parts, dtype=torch.int32, device=logits.device)
    tokens = torch.empty(num_rows, dtype=torch.int64, device=logits.device)
    if num_rows == 0:
        return tokens
    block = triton.next_power_of_2(part_len)
    part_argmax_kernel[(num_rows, parts)](logits, best, where, logits.stride(0), PARTS=parts, PART=part_len,
                                          BLOCK=block, num_warps=4 if block >= 1024 else 2)
    pick_part_kernel[(num_rows,)](best, where, tokens, PARTS=parts, PART=part_len,
                                  BLOCK_P=triton.next_power_of_2(parts), num_warps=1)
    return tokens
