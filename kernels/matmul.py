"""Matmul ``out[M, N] = x[M, K] @ weight[N, K]^T (+ bias)``: a 2-D grid, one K order per tile.

Program (pid_m, pid_n) (grid axes swapped with ``N_MAJOR``) owns output tile rows
[pid_m*BLOCK_M, +BLOCK_M) x columns [pid_n*BLOCK_N, +BLOCK_N) and accumulates it in fp32 over K
in ascending BLOCK_K steps with ``tl.dot``. No split-K, no persistent scheduling; tile sizes
come from (N, K, dtype) through the plan, and for launches of at most DECODE_ROWS rows (or at
least PREFILL_ROWS) from the decode (prefill) bucket's entry (same BLOCK_K and K order,
kernels/matmul_configs.py). A row's value therefore depends only on that row of x, the weight
and the bias; rows past M are loaded as zeros and never stored. M is a
runtime int that Triton must not specialise on (``do_not_specialize``), so every M of a bucket
runs the same compiled code.
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
                  PDL: tl.constexpr = False):
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
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_idx = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                    mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
        w = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None],
                    mask=(offs_n[None, :] < N) & (k_idx[:, None] < K), other=0.0)
        acc = tl.dot(x, w, acc, input_precision="ieee")
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
