"""Split-K matmul, second half: fold a row's fp32 partials in ascending split order, add the bias, cast.

Program (row, pid_n) reads ``partial[s, row, cols]`` for its BLOCK_N columns and computes
``((p0 + p1) + p2) + ...`` in split order 0, 1, ..., SPLITS - 1, starting from partial 0 itself
(not ``0.0 + p0``, which would turn a -0.0 partial into +0.0), then ``+ bias`` in fp32 and one
rounding to OUT_DTYPE. The fold reads only the row's own partials; SPLITS is a constexpr from
(N, K, dtype), so the order is the same for every M. No atomics.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["matmul_combine_kernel", "check_matmul_combine", "launch_matmul_combine"]


@triton.jit(do_not_specialize=["stride_ps", "stride_om"])
def matmul_combine_kernel(partial_ptr, bias_ptr, out_ptr, stride_ps, stride_om, N: tl.constexpr,
                          BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, HAS_BIAS: tl.constexpr,
                          OUT_DTYPE: tl.constexpr, PDL: tl.constexpr = False):
    # partial: [SPLITS, M, N] fp32, split stride stride_ps; bias: [N]; out: [M, N]
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    is_col = offs_n < N
    acc = tl.load(partial_ptr + row * N + offs_n, mask=is_col, other=0.0)
    for split in tl.static_range(1, SPLITS):
        acc = acc + tl.load(partial_ptr + split * stride_ps + row * N + offs_n, mask=is_col, other=0.0)
    if HAS_BIAS:
        acc = acc + tl.load(bias_ptr + offs_n, mask=is_col, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_om + offs_n, acc.to(OUT_DTYPE), mask=is_col)


def check_matmul_combine(partial: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
                         entry: PlanEntry) -> None:
    """The launch contract of matmul_combine_kernel (shared with the CPU path).

    Premise not checked here: the first half (kernels/matmul_split.py) wrote every partial of
    the rows it combines.
    """
    # partial: [SPLITS, M, N] fp32; bias: [N] | None; out: [M, N]
    c = entry.constexpr_dict()
    assert entry.kernel == "matmul_combine", f"entry {entry.key} is not a matmul_combine entry"
    assert partial.dim() == 3 and out.dim() == 2, \
        f"matmul_combine wants 3-D partial and 2-D out, got {tuple(partial.shape)}, {tuple(out.shape)}"
    num_rows = out.shape[0]
    assert tuple(partial.shape) == (c["SPLITS"], num_rows, c["N"]), \
        f"partial shape {tuple(partial.shape)} is not (SPLITS, M, N) = ({c['SPLITS']}, {num_rows}, {c['N']})"
    assert partial.dtype == torch.float32 and partial.is_contiguous(), "partial must be contiguous float32"
    assert out.shape[1] == c["N"], f"out has {out.shape[1]} columns, {entry.key} needs N = {c['N']}"
    assert dtype_name(out.dtype) == c["OUT_DTYPE"], f"out dtype {out.dtype} is not {c['OUT_DTYPE']}"
    assert out.is_contiguous(), f"out must be contiguous, got strides {out.stride()}"
    assert (bias is not None) == c["HAS_BIAS"], \
        f"bias given={bias is not None} but {entry.key} has HAS_BIAS={c['HAS_BIAS']}"
    if bias is not None:
        assert tuple(bias.shape) == (c["N"],) and bias.is_contiguous() and \
            dtype_name(bias.dtype) == entry.static_dict()["dtype"], \
            f"bias must be a contiguous [{c['N']}] {entry.static_dict()['dtype']} tensor, got {tuple(bias.shape)} " \
            f"{bias.dtype}"
        assert bias.device == out.device, "bias is on another device"
    assert partial.device == out.device, "partial and out must be on one device"
    assert max(max_offset(partial), max_offset(out)) <= MAX_INDEX, "a tensor is too large for 32-bit offsets"


def launch_matmul_combine(partial: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
                          entry: PlanEntry) -> None:
    """Check the contract, then launch matmul_combine_kernel on grid (M, cdiv(N, BLOCK_N))."""
    check_matmul_combine(partial, bias, out, entry)
    c = entry.constexpr_dict()
    if out.shape[0] == 0:
        return
    grid = (out.shape[0], triton.cdiv(c["N"], c["BLOCK_N"]))
    matmul_combine_kernel[grid](partial, bias if bias is not None else partial, out, partial.stride(0),
                                out.stride(0), **launch_kwargs(entry))
