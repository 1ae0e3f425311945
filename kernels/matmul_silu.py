"""The MLP's gate/up projection with SiLU-and-multiply in its epilogue:
``out[M, I] = round(round(silu(round(x @ gate^T))) * round(x @ up^T))`` for ``weight = [gate | up]``.

Program (pid_m, pid_n) (grid axes swapped with ``N_MAJOR``) owns output tile rows
[pid_m*BLOCK_M, +BLOCK_M) x columns [pid_n*BLOCK_N, +BLOCK_N): it accumulates those columns of
gate (weight rows j) and of up (weight rows I + j) in two fp32 tiles over K in ascending BLOCK_K
steps with ``tl.dot``, rounds each to the activation dtype as the gate/up matmul stores them, and
applies kernels/silu_mul.py's arithmetic. Its BLOCK_K and K order are the gate/up weight's
(kernels/matmul_configs.py), so a row's bits are those of the matmul followed by silu_mul, in one
launch and without the [M, 2I] intermediate. A row's value depends only on that row of x and the
weight; rows past M are loaded as zeros and never stored.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["matmul_silu_kernel", "check_matmul_silu", "launch_matmul_silu"]


@triton.jit(do_not_specialize=["M"])
def matmul_silu_kernel(x_ptr, w_ptr, out_ptr, M, stride_xm, stride_wn, stride_om,
                       I: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, DTYPE: tl.constexpr, N_MAJOR: tl.constexpr = False,
                       PDL: tl.constexpr = False):
    # x: [M, K] row stride stride_xm; w: [2*I, K] row stride stride_wn (gate rows, then up rows); out: [M, I]
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
    if N_MAJOR:
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(1)
    else:
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc_gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_idx = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                    mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
        w_mask = (offs_n[None, :] < I) & (k_idx[:, None] < K)
        w_gate = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None], mask=w_mask, other=0.0)
        w_up = tl.load(w_ptr + (I + offs_n[None, :]) * stride_wn + k_idx[:, None], mask=w_mask, other=0.0)
        acc_gate = tl.dot(x, w_gate, acc_gate, input_precision="ieee")
        acc_up = tl.dot(x, w_up, acc_up, input_precision="ieee")
    if PDL:  # dependents start once the K loop is done; started with it they slowed a step (docs/performance.md)
        tl.extra.cuda.gdc_launch_dependents()
    gate = acc_gate.to(DTYPE).to(tl.float32)
    up = acc_up.to(DTYPE).to(tl.float32)
    act = (gate / (1.0 + tl.exp(-gate))).to(DTYPE).to(tl.float32)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], (act * up).to(DTYPE),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < I))


def check_matmul_silu(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of matmul_silu_kernel (shared with the CPU path)."""
    # x: [M, K]; weight: [2*I, K]; out: [M, I]
    c = entry.constexpr_dict()
    assert entry.kernel == "matmul_silu", f"entry {entry.key} is not a matmul_silu entry"
    assert x.dim() == 2 and weight.dim() == 2 and out.dim() == 2, \
        f"matmul_silu wants 2-D x, weight, out; got {tuple(x.shape)}, {tuple(weight.shape)}, {tuple(out.shape)}"
    num_rows, width = x.shape[0], c["I"]
    assert tuple(weight.shape) == (2 * width, c["K"]), \
        f"weight shape {tuple(weight.shape)} is not (2 I, K) = ({2 * width}, {c['K']}) of {entry.key}"
    assert x.shape[1] == c["K"], f"x has {x.shape[1]} columns, {entry.key} needs K = {c['K']}"
    assert tuple(out.shape) == (num_rows, width), f"out shape {tuple(out.shape)} is not ({num_rows}, {width})"
    assert x.dtype == weight.dtype == out.dtype and dtype_name(x.dtype) == c["DTYPE"], \
        f"x {x.dtype}, weight {weight.dtype} and out {out.dtype} must all be {c['DTYPE']} for {entry.key}"
    assert x.stride(1) == 1 and (num_rows <= 1 or x.stride(0) >= c["K"]), \
        f"x needs unit column stride and non-overlapping rows, got strides {x.stride()}"
    assert weight.is_contiguous(), f"weight must be contiguous, got strides {weight.stride()}"
    assert out.is_contiguous(), f"out must be contiguous, got strides {out.stride()}"
    max_rows, min_rows = entry.static_dict().get("max_rows"), entry.static_dict().get("min_rows")
    assert max_rows is None or num_rows <= max_rows, \
        f"{entry.key} is the decode bucket's tile for at most {max_rows} rows, got {num_rows}"
    assert min_rows is None or num_rows >= min_rows, \
        f"{entry.key} is the prefill bucket's tile for at least {min_rows} rows, got {num_rows}"
    assert x.device == weight.device == out.device, "x, weight and out must be on one device"
    assert max(max_offset(x), max_offset(weight), max_offset(out)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def launch_matmul_silu(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch matmul_silu_kernel on grid (cdiv(M, BLOCK_M), cdiv(I, BLOCK_N)), its
    axes swapped with N_MAJOR."""
    check_matmul_silu(x, weight, out, entry)
    c = entry.constexpr_dict()
    num_rows = x.shape[0]
    if num_rows == 0:
        return
    grid = (triton.cdiv(num_rows, c["BLOCK_M"]), triton.cdiv(c["I"], c["BLOCK_N"]))
    if c.get("N_MAJOR"):
        grid = grid[::-1]
    matmul_silu_kernel[grid](x, weight, out, num_rows, x.stride(0), weight.stride(0), out.stride(0),
                             **launch_kwargs(entry))
