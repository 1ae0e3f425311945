"""Split-K matmul, first half: fp32 partial products of fixed K ranges, ``partial[s] = x[:, Ks] @ weight[:, Ks]^T``.

Program (pid_m, pid_n, s) owns output tile rows [pid_m*BLOCK_M, +BLOCK_M) x columns
[pid_n*BLOCK_N, +BLOCK_N) of split s, whose K range is [s * K/SPLITS, (s + 1) * K/SPLITS); it
accumulates from zero in fp32 over that range in ascending BLOCK_K steps with ``tl.dot`` and
stores the tile to ``partial[s]`` of an fp32 buffer [SPLITS, M, N]. SPLITS and the ranges are
constexprs from (N, K, dtype) (kernels/matmul_configs.py), never from M, so every row of every batch,
prefill or decode, runs the same K ranges in the same order; the second half
(kernels/matmul_combine.py) folds a row's partials in ascending split order. No atomics: each
partial element has exactly one writer. Rows past M are loaded as zeros and never stored.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["matmul_split_kernel", "check_matmul_split", "launch_matmul_split", "split_partials"]


@triton.jit(do_not_specialize=["M", "stride_xm", "stride_ps"])
def matmul_split_kernel(x_ptr, w_ptr, partial_ptr, M, stride_xm, stride_wn, stride_ps, N: tl.constexpr,
                        K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        SPLITS: tl.constexpr, PDL: tl.constexpr = False):
    # x: [M, K] row stride stride_xm; w: [N, K] row stride stride_wn; partial: [SPLITS, M, N] fp32
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    split = tl.program_id(2)  # K columns [split * K // SPLITS, (split + 1) * K // SPLITS)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(split * (K // SPLITS), (split + 1) * (K // SPLITS), BLOCK_K):
        k_idx = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                    mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
        w = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None],
                    mask=(offs_n[None, :] < N) & (k_idx[:, None] < K), other=0.0)
        acc = tl.dot(x, w, acc, input_precision="ieee")
    tl.store(partial_ptr + split * stride_ps + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def split_partials(x: torch.Tensor, entry: PlanEntry) -> torch.Tensor:
    """Uninitialised fp32 partials [SPLITS, M, N] for ``x`` [M, K], every element written by the first half.

    Allocated per launch from torch's caching allocator (no host sync, no zeroing); inside a
    captured CUDA graph the graph's memory pool gives it the same address at every replay.
    """
    c = entry.constexpr_dict()
    return torch.empty(c["SPLITS"], x.shape[0], c["N"], dtype=torch.float32, device=x.device)


def check_matmul_split(x: torch.Tensor, weight: torch.Tensor, partial: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of matmul_split_kernel (shared with the CPU path)."""
    # x: [M, K]; weight: [N, K]; partial: [SPLITS, M, N] fp32
    c = entry.constexpr_dict()
    assert entry.kernel == "matmul_split", f"entry {entry.key} is not a matmul_split entry"
    assert c["SPLITS"] >= 2 and c["K"] % (c["SPLITS"] * c["BLOCK_K"]) == 0, \
        f"{entry.key}: K = {c['K']} is not a multiple of SPLITS * BLOCK_K = {c['SPLITS']} * {c['BLOCK_K']}"
    assert x.dim() == 2 and weight.dim() == 2 and partial.dim() == 3, \
        f"matmul_split wants 2-D x, weight and 3-D partial; got {tuple(x.shape)}, {tuple(weight.shape)}, " \
        f"{tuple(partial.shape)}"
    num_rows = x.shape[0]
    assert tuple(weight.shape) == (c["N"], c["K"]), \
        f"weight shape {tuple(weight.shape)} is not (N, K) = ({c['N']}, {c['K']}) of {entry.key}"
    assert x.shape[1] == c["K"], f"x has {x.shape[1]} columns, {entry.key} needs K = {c['K']}"
    assert tuple(partial.shape) == (c["SPLITS"], num_rows, c["N"]), \
        f"partial shape {tuple(partial.shape)} is not (SPLITS, M, N) = ({c['SPLITS']}, {num_rows}, {c['N']})"
    assert x.dtype == weight.dtype and dtype_name(x.dtype) == entry.static_dict()["dtype"], \
        f"x {x.dtype} and weight {weight.dtype} must both be {entry.static_dict()['dtype']} for {entry.key}"
    assert partial.dtype == torch.float32 and partial.is_contiguous(), "partial must be contiguous float32"
    assert x.stride(1) == 1 and (num_rows <= 1 or x.stride(0) >= c["K"]), \
        f"x needs unit column stride and non-overlapping rows, got strides {x.stride()}"
    assert weight.is_contiguous(), f"weight must be contiguous, got strides {weight.stride()}"
    assert x.device == weight.device == partial.device, "x, weight and partial must be on one device"
    assert max(max_offset(x), max_offset(weight), max_offset(partial)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def launch_matmul_split(x: torch.Tensor, weight: torch.Tensor, partial: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch matmul_split_kernel on grid (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N), SPLITS)."""
    check_matmul_split(x, weight, partial, entry)
    c = entry.constexpr_dict()
    num_rows = x.shape[0]
    if num_rows == 0:
        return
    grid = (triton.cdiv(num_rows, c["BLOCK_M"]), triton.cdiv(c["N"], c["BLOCK_N"]), c["SPLITS"])
    matmul_split_kernel[grid](x, weight, partial, num_rows, x.stride(0), weight.stride(0), partial.stride(0),
                              **launch_kwargs(entry))
