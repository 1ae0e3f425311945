"""Rotary position embedding, Hugging Face Llama rotate-half convention.

Program (t, b) rotates heads [b*BLOCK_HEADS, +BLOCK_HEADS) of token t by the angles of ``positions[t]``
(heads past the tensor's last masked off; a program per head made prefill launches of hundreds of
thousands of one-warp programs):
``out[:D/2] = x1*cos - x2*sin`` and ``out[D/2:] = x2*cos + x1*sin`` in fp32, rounded once to
the activation dtype. The table row ``cos_sin[pos]`` holds cos in its first D/2 columns and sin
in its last D/2. One launch per tensor (q, then k); both use the same plan entry.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["rope_kernel", "check_rope", "launch_rope"]


@triton.jit
def rope_kernel(x_ptr, out_ptr, pos_ptr, cs_ptr, heads, stride_xt, stride_xh, stride_ot, stride_oh, stride_cs,
                HALF: tl.constexpr, BLOCK_HEADS: tl.constexpr, DTYPE: tl.constexpr, PDL: tl.constexpr = False):
    # x, out: [T, heads, 2*HALF] with token/head strides as given; pos: [T] int64; cs: [max_pos, 2*HALF] fp32
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    head = tl.program_id(1) * BLOCK_HEADS + tl.arange(0, BLOCK_HEADS)
    offs = tl.arange(0, HALF)
    pos = tl.load(pos_ptr + row)
    cos = tl.load(cs_ptr + pos * stride_cs + offs)[None, :]
    sin = tl.load(cs_ptr + pos * stride_cs + HALF + offs)[None, :]
    mask = (head[:, None] < heads) & (offs[None, :] < HALF)
    src = x_ptr + row * stride_xt + head[:, None] * stride_xh + offs[None, :]
    x1 = tl.load(src, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=mask, other=0.0).to(tl.float32)
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    dst = out_ptr + row * stride_ot + head[:, None] * stride_oh + offs[None, :]
    tl.store(dst, out1.to(DTYPE), mask=mask)
    tl.store(dst + HALF, out2.to(DTYPE), mask=mask)


def check_rope(x: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor, out: torch.Tensor,
               entry: PlanEntry) -> None:
    """The launch contract of rope_kernel (shared with the CPU path).

    Premise not checked here: every position is in [0, max_pos) (kernels/metadata.py).
    """
    # x, out: [T, heads, D]; positions: [T] int64; cos_sin: [max_pos, D] float32
    c = entry.constexpr_dict()
    assert entry.kernel == "rope", f"entry {entry.key} is not a rope entry"
    head_dim = 2 * c["HALF"]
    assert x.dim() == 3 and x.shape[2] == head_dim, f"x shape {tuple(x.shape)} is not [T, heads, {head_dim}]"
    assert x.stride(2) == 1, f"x needs a unit stride on head_dim, got strides {x.stride()}"
    assert x.shape[1] <= 1 or x.stride(1) >= head_dim, f"x heads overlap: strides {x.stride()}"
    assert x.shape[0] <= 1 or x.stride(0) >= x.shape[1] * head_dim, f"x tokens overlap: strides {x.stride()}"
    assert dtype_name(x.dtype) == c["DTYPE"] and out.dtype == x.dtype, f"x and out must be {c['DTYPE']}"
    assert tuple(out.shape) == tuple(x.shape) and out.is_contiguous(), "out must be contiguous and shaped like x"
    assert tuple(positions.shape) == (x.shape[0],) and positions.dtype == torch.int64 and positions.is_contiguous(), \
        f"positions must be a contiguous [{x.shape[0]}] int64 tensor, got {tuple(positions.shape)} {positions.dtype}"
    assert cos_sin.dim() == 2 and cos_sin.shape[1] == head_dim and cos_sin.dtype == torch.float32, \
        f"cos_sin must be [max_pos, {head_dim}] float32, got {tuple(cos_sin.shape)} {cos_sin.dtype}"
    assert cos_sin.is_contiguous(), "cos_sin must be contiguous"
    assert x.device == positions.device == cos_sin.device == out.device, "all tensors must be on one device"
    assert max(max_offset(x), max_offset(out), max_offset(cos_sin)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def launch_rope(x: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor, out: torch.Tensor,
                entry: PlanEntry) -> None:
    """Check the contract, then launch rope_kernel on grid (T, cdiv(heads, BLOCK_HEADS))."""
    check_rope(x, positions, cos_sin, out, entry)
    if x.shape[0] == 0 or x.shape[1] == 0:
        return
    grid = (x.shape[0], triton.cdiv(x.shape[1], entry.constexpr_dict()["BLOCK_HEADS"]))
    rope_kernel[grid](x, out, positions, cos_sin, x.shape[1], x.stride(0), x.stride(1), out.stride(0),
                      out.stride(1), cos_sin.stride(0), **launch_kwargs(entry))
