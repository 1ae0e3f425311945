"""Matmul ``out[M, N] = x[M, K] @ weight[N, K]^T (+ bias)``: a 2-D grid, fixed K ranges per tile.

Program (pid_m, pid_n) (grid axes swapped with ``N_MAJOR``) owns output tile rows
[pid_m*BLOCK_M, +BLOCK_M) x columns [pid_n*BLOCK_N, +BLOCK_N). K is cut into SPLITS equal
ranges (fixed split-K inside one program; SPLITS from (N, K, dtype) only, 1 for most weights):
each range accumulates from zero in fp32 in ascending BLOCK_K steps with ``tl.dot``, and the
ranges' sums are added in ascending order, starting from range 0 itself. ``LOCKSTEP`` (the
decode bucket of a split weight) advances the ranges side by side, one accumulator each, so a
program's MMA chains do not wait on one another; otherwise they run one after another. Either
way every element is the same sequence of dot steps and adds. No persistent scheduling; tile
sizes come from (N, K, dtype) through the plan, and for launches of at most DECODE_ROWS rows
(or at least PREFILL_ROWS) from the decode (prefill) bucket's entry (same BLOCK_K, ranges and K
order, kernels/matmul_configs.py). A row's value therefore depends only on that row of x, the
weight and the bias; rows past M are loaded as zeros and never stored. M is a runtime int that
Triton must not specialise on (``do_not_specialize``), so every M of a bucket runs the same
compiled code.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["matmul_kernel", "check_matmul", "launch_matmul"]


@triton.jit(do_not_specialize=["M"])
def matmul_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, M, stride_xm, stride_wn, stride_om,
                  N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, HAS_BIAS: tl.constexpr, OUT_DTYPE: tl.constexpr, N_MAJOR: tl.constexpr = False,
                  SPLITS: tl.constexpr = 1, LOCKSTEP: tl.constexpr = False, PDL: tl.constexpr = False):
    # x: [M, K] row stride stride_xm; w: [N, K] row stride stride_wn; bias: [N]; out: [M, N]
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    if N_MAJOR:  # column tiles on grid axis 0: programs launched together share rows of x, the weight stays in L2
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(1)
    else:
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    SPAN: tl.constexpr = K // SPLITS  # range s is K columns [s * SPAN, (s + 1) * SPAN)
    if LOCKSTEP:  # ranges side by side (SPLITS of 2 or 4; the wrapper asserts SPAN % BLOCK_K == 0)
        x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]
        w_ptrs = w_ptr + offs_n[None, :] * stride_wn + offs_k[:, None]
        x_mask = offs_m[:, None] < M
        w_mask = offs_n[None, :] < N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc3 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, SPAN, BLOCK_K):
            acc = tl.dot(tl.load(x_ptrs + k0, mask=x_mask, other=0.0),
                         tl.load(w_ptrs + k0, mask=w_mask, other=0.0), acc, input_precision="ieee")
            acc1 = tl.dot(tl.load(x_ptrs + (SPAN + k0), mask=x_mask, other=0.0),
                          tl.load(w_ptrs + (SPAN + k0), mask=w_mask, other=0.0), acc1, input_precision="ieee")
            if SPLITS == 4:
                acc2 = tl.dot(tl.load(x_ptrs + (2 * SPAN + k0), mask=x_mask, other=0.0),
                              tl.load(w_ptrs + (2 * SPAN + k0), mask=w_mask, other=0.0), acc2, input_precision="ieee")
                acc3 = tl.dot(tl.load(x_ptrs + (3 * SPAN + k0), mask=x_mask, other=0.0),
                              tl.load(w_ptrs + (3 * SPAN + k0), mask=w_mask, other=0.0), acc3, input_precision="ieee")
        acc = acc + acc1
        if SPLITS == 4:
            acc = acc + acc2
            acc = acc + acc3
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for split in tl.static_range(SPLITS):
            part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(split * SPAN, (split + 1) * SPAN, BLOCK_K):
                k_idx = k0 + offs_k
                x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                            mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
                w = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None],
                            mask=(offs_n[None, :] < N) & (k_idx[:, None] < K), other=0.0)
                part = tl.dot(x, w, part, input_precision="ieee")
            acc = part if split == 0 else acc + part
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
        acc = acc + bias.to(tl.float32)[None, :]
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], acc.to(OUT_DTYPE),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def check_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
                 entry: PlanEntry) -> None:
    """The launch contract of matmul_kernel (shared with the CPU path)."""
    # x: [M, K]; weight: [N, K]; bias: [N] | None; out: [M, N]
    c = entry.constexpr_dict()
    assert entry.kernel == "matmul", f"entry {entry.key} is not a matmul entry"
    assert x.dim() == 2 and weight.dim() == 2 and out.dim() == 2, \
        f"matmul wants 2-D x, weight, out; got {tuple(x.shape)}, {tuple(weight.shape)}, {tuple(out.shape)}"
    num_rows = x.shape[0]
    assert tuple(weight.shape) == (c["N"], c["K"]), \
        f"weight shape {tuple(weight.shape)} is not (N, K) = ({c['N']}, {c['K']}) of {entry.key}"
    assert x.shape[1] == c["K"], f"x has {x.shape[1]} columns, {entry.key} needs K = {c['K']}"
    assert tuple(out.shape) == (num_rows, c["N"]), f"out shape {tuple(out.shape)} is not ({num_rows}, {c['N']})"
    assert x.dtype == weight.dtype and dtype_name(x.dtype) == entry.static_dict()["dtype"], \
        f"x {x.dtype} and weight {weight.dtype} must both be {entry.static_dict()['dtype']} for {entry.key}"
    assert dtype_name(out.dtype) == c["OUT_DTYPE"], f"out dtype {out.dtype} is not {c['OUT_DTYPE']}"
    assert x.stride(1) == 1 and (num_rows <= 1 or x.stride(0) >= c["K"]), \
        f"x needs unit column stride and non-overlapping rows, got strides {x.stride()}"
    assert weight.is_contiguous(), f"weight must be contiguous, got strides {weight.stride()}"
    assert out.is_contiguous(), f"out must be contiguous, got strides {out.stride()}"
    max_rows, min_rows = entry.static_dict().get("max_rows"), entry.static_dict().get("min_rows")
    assert max_rows is None or num_rows <= max_rows, \
        f"{entry.key} is the decode bucket's tile for at most {max_rows} rows, got {num_rows}"
    assert min_rows is None or num_rows >= min_rows, \
        f"{entry.key} is the prefill bucket's tile for at least {min_rows} rows, got {num_rows}"
    splits = c.get("SPLITS", 1)
    assert splits >= 1 and c["K"] % splits == 0, f"{entry.key}: K = {c['K']} is not cut into {splits} equal ranges"
    assert not c.get("LOCKSTEP") or (splits in (2, 4) and c["K"] // splits % c["BLOCK_K"] == 0), \
        f"{entry.key}: side-by-side ranges need 2 or 4 of them, each a whole number of BLOCK_K steps"
    assert (bias is not None) == c["HAS_BIAS"], f"bias given={bias is not None} but {entry.key} has HAS_BIAS={c['HAS_BIAS']}"
    if bias is not None:
        assert tuple(bias.shape) == (c["N"],) and bias.is_contiguous() and bias.dtype == weight.dtype, \
            f"bias must be a contiguous [{c['N']}] {weight.dtype} tensor, got {tuple(bias.shape)} {bias.dtype}"
        assert bias.device == x.device, "bias is on another device"
    assert x.device == weight.device == out.device, "x, weight and out must be on one device"
    assert max(max_offset(x), max_offset(weight), max_offset(out)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def launch_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
                  entry: PlanEntry) -> None:
    """Check the contract, then launch matmul_kernel on grid (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)), its
    axes swapped with N_MAJOR."""
    check_matmul(x, weight, bias, out, entry)
    c = entry.constexpr_dict()
    num_rows = x.shape[0]
    if num_rows == 0:
        return
    grid = (triton.cdiv(num_rows, c["BLOCK_M"]), triton.cdiv(c["N"], c["BLOCK_N"]))
    if c.get("N_MAJOR"):
        grid = grid[::-1]
    matmul_kernel[grid](x, weight, bias if bias is not None else weight, out, num_rows,
                        x.stride(0), weight.stride(0), out.stride(0), **launch_kwargs(entry))
