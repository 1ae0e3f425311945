"""RMSNorm with an optional fused residual add: one program per token row.

``residual_out = x (+ residual)`` rounded to the activation dtype, then
``out = weight * round(residual_out * rsqrt(mean(residual_out^2) + eps))`` with the same two
roundings Hugging Face Llama applies in bf16 (none in fp32). With OFFSET (Gemma3RMSNorm) the
weight is ``1 + w`` and only the product is rounded: ``out = round(residual_out * rsqrt(...) * (1 + w))``.
The sum of squares is one ``tl.sum`` over a fixed BLOCK_H = next_pow2(H) block of the row, so it
depends on that row only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["rms_norm_kernel", "check_rms_norm", "launch_rms_norm"]


@triton.jit
def rms_norm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, stride_x, stride_res, stride_out,
                    stride_res_out, H: tl.constexpr, BLOCK_H: tl.constexpr, EPS: tl.constexpr,
                    HAS_RESIDUAL: tl.constexpr, DTYPE: tl.constexpr, OFFSET: tl.constexpr = False,
                    PDL: tl.constexpr = False):
    # x, res, out, res_out: [T, H] with row strides as given; w: [H]
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    mask = offs < H
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(res_ptr + row * stride_res + offs, mask=mask, other=0.0).to(tl.float32)
    r = x.to(DTYPE)
    tl.store(res_out_ptr + row * stride_res_out + offs, r, mask=mask)
    rf = r.to(tl.float32)
    var = tl.sum(rf * rf, axis=0) / H
    inv = tl.rsqrt(var + EPS)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if OFFSET:  # Gemma3: the fp32 norm times (1 + w), one rounding
        tl.store(out_ptr + row * stride_out + offs, ((rf * inv) * (1.0 + w)).to(DTYPE), mask=mask)
    else:
        normed = (rf * inv).to(DTYPE).to(tl.float32)
        tl.store(out_ptr + row * stride_out + offs, (normed * w).to(DTYPE), mask=mask)


def check_rms_norm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, out: torch.Tensor,
                   residual_out: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of rms_norm_kernel (shared with the CPU path)."""
    # x, residual, out, residual_out: [T, H]; weight: [H]
    c = entry.constexpr_dict()
    assert entry.kernel == "rms_norm", f"entry {entry.key} is not an rms_norm entry"
    hidden = c["H"]
    assert x.dim() == 2 and x.shape[1] == hidden, f"x shape {tuple(x.shape)} is not [T, {hidden}]"
    num_rows = x.shape[0]
    assert (residual is not None) == c["HAS_RESIDUAL"], \
        f"residual given={residual is not None} but {entry.key} has HAS_RESIDUAL={c['HAS_RESIDUAL']}"
    rows = [x, out, residual_out] + ([residual] if residual is not None else [])
    for t in rows:
        assert tuple(t.shape) == (num_rows, hidden), f"shape {tuple(t.shape)} is not ({num_rows}, {hidden})"
        assert dtype_name(t.dtype) == c["DTYPE"], f"dtype {t.dtype} is not {c['DTYPE']}"
        assert t.stride(1) == 1 and (num_rows <= 1 or t.stride(0) >= hidden), \
            f"rows need unit column stride and must not overlap, got strides {t.stride()}"
        assert t.device == x.device, "all tensors must be on one device"
    assert out.is_contiguous() and residual_out.is_contiguous(), "outputs must be contiguous"
    assert tuple(weight.shape) == (hidden,) and weight.is_contiguous() and dtype_name(weight.dtype) == c["DTYPE"], \
        f"weight must be a contiguous [{hidden}] {c['DTYPE']} tensor, got {tuple(weight.shape)} {weight.dtype}"
    assert weight.device == x.device, "weight is on another device"
    assert max(max_offset(t) for t in rows) <= MAX_INDEX, "a tensor is too large for 32-bit offsets"


def launch_rms_norm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, out: torch.Tensor,
                    residual_out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch rms_norm_kernel on grid (T,)."""
    check_rms_norm(x, residual, weight, out, residual_out, entry)
    num_rows = x.shape[0]
    if num_rows == 0:
        return
    res = residual if residual is not None else x
    rms_norm_kernel[(num_rows,)](x, res, weight, out, residual_out, x.stride(0), res.stride(0), out.stride(0),
                                 residual_out.stride(0), **launch_kwargs(entry))
