"""Split-K combine fused with the residual RMSNorm that follows it: one program per token row.

A residual branch's last matmul (o_proj, down_proj) leaves its fp32 split-K partials
[SPLITS, T, H] (kernels/matmul_split.py); this kernel folds a row's partials in ascending split
order starting from partial 0, rounds the sum to the activation dtype (the branch output the
separate combine would store), then runs kernels/rmsnorm.py's residual add and norm on it with the
same roundings: ``residual_out = round(branch + residual)``,
``out = weight * round(residual_out * rsqrt(mean(residual_out^2) + eps))``. Its bits are those of
matmul_combine_kernel followed by rms_norm_kernel, in one launch instead of two. It reads only the
row's own partials, residual row and the weight (a row-local prologue); SPLITS is a constexpr
from (N, K, dtype), so the fold is the same for every T. No atomics.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["matmul_combine_norm_kernel", "check_matmul_combine_norm", "launch_matmul_combine_norm"]


@triton.jit(do_not_specialize=["stride_ps", "stride_res"])
def matmul_combine_norm_kernel(partial_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, stride_ps, stride_res,
                               H: tl.constexpr, BLOCK_H: tl.constexpr, SPLITS: tl.constexpr, EPS: tl.constexpr,
                               DTYPE: tl.constexpr, PDL: tl.constexpr = False):
    # partial: [SPLITS, T, H] fp32, split stride stride_ps; res: [T, H] row stride stride_res;
    # w: [H]; out, res_out: [T, H] contiguous
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    mask = offs < H
    acc = tl.load(partial_ptr + row * H + offs, mask=mask, other=0.0)
    for split in tl.static_range(1, SPLITS):
        acc = acc + tl.load(partial_ptr + split * stride_ps + row * H + offs, mask=mask, other=0.0)
    x = acc.to(DTYPE).to(tl.float32) + tl.load(res_ptr + row * stride_res + offs, mask=mask, other=0.0).to(tl.float32)
    r = x.to(DTYPE)
    tl.store(res_out_ptr + row * H + offs, r, mask=mask)
    rf = r.to(tl.float32)
    var = tl.sum(rf * rf, axis=0) / H
    inv = tl.rsqrt(var + EPS)
    normed = (rf * inv).to(DTYPE).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * H + offs, (normed * w).to(DTYPE), mask=mask)


def check_matmul_combine_norm(partial: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                              out: torch.Tensor, residual_out: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of matmul_combine_norm_kernel (shared with the CPU path).

    Premise not checked here: the first half (kernels/matmul_split.py) wrote every partial of
    the rows it folds.
    """
    # partial: [SPLITS, T, H] fp32; residual, out, residual_out: [T, H]; weight: [H]
    c = entry.constexpr_dict()
    assert entry.kernel == "matmul_combine_norm", f"entry {entry.key} is not a matmul_combine_norm entry"
    hidden = c["H"]
    assert residual.dim() == 2 and residual.shape[1] == hidden, \
        f"residual shape {tuple(residual.shape)} is not [T, {hidden}]"
    num_rows = residual.shape[0]
    assert partial.dim() == 3 and tuple(partial.shape) == (c["SPLITS"], num_rows, hidden), \
        f"partial shape {tuple(partial.shape)} is not (SPLITS, T, H) = ({c['SPLITS']}, {num_rows}, {hidden})"
    assert partial.dtype == torch.float32 and partial.is_contiguous(), "partial must be contiguous float32"
    assert residual.stride(1) == 1 and (num_rows <= 1 or residual.stride(0) >= hidden), \
        f"residual rows need unit column stride and must not overlap, got strides {residual.stride()}"
    for name, t in (("residual", residual), ("out", out), ("residual_out", residual_out)):
        assert tuple(t.shape) == (num_rows, hidden), f"{name} shape {tuple(t.shape)} is not ({num_rows}, {hidden})"
        assert dtype_name(t.dtype) == c["DTYPE"], f"{name} dtype {t.dtype} is not {c['DTYPE']}"
    assert out.is_contiguous() and residual_out.is_contiguous(), "outputs must be contiguous"
    assert tuple(weight.shape) == (hidden,) and weight.is_contiguous() and dtype_name(weight.dtype) == c["DTYPE"], \
        f"weight must be a contiguous [{hidden}] {c['DTYPE']} tensor, got {tuple(weight.shape)} {weight.dtype}"
    assert len({t.device for t in (partial, residual, weight, out, residual_out)}) == 1, \
        "all tensors must be on one device"
    assert max(max_offset(partial), max_offset(residual), max_offset(out), max_offset(residual_out)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def launch_matmul_combine_norm(partial: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                               out: torch.Tensor, residual_out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch matmul_combine_norm_kernel on grid (T,)."""
    check_matmul_combine_norm(partial, residual, weight, out, residual_out, entry)
    if residual.shape[0] == 0:
        return
    matmul_combine_norm_kernel[(residual.shape[0],)](partial, residual, weight, out, residual_out, partial.stride(0),
                                                     residual.stride(0), **launch_kwargs(entry))
