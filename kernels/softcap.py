"""Final-logit softcapping: ``out = CAP * tanh(logits / CAP)`` on float32 logit rows (Gemma's
``final_logit_softcapping``).

``tanh(y)`` is written as the equal ``2 / (1 + exp(-2y)) - 1`` so it needs only ``exp`` (the
CPU path has a position-independent one); ``exp`` overflowing to inf gives exactly -1, underflowing
to 0 exactly 1. Program (t, j) handles columns [j*BLOCK_V, +BLOCK_V) of row t; elementwise, so a
row's output depends on that row only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, max_offset

__all__ = ["logit_softcap_kernel", "check_logit_softcap", "launch_logit_softcap"]


@triton.jit
def logit_softcap_kernel(x_ptr, out_ptr, stride_x, stride_out, V: tl.constexpr, BLOCK_V: tl.constexpr,
                         CAP: tl.constexpr, PDL: tl.constexpr = False):
    # x: [S, V] float32 row stride stride_x; out: [S, V] float32 row stride stride_out
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    mask = offs < V
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0)
    y = x / CAP
    t = 2.0 / (1.0 + tl.exp(-2.0 * y)) - 1.0
    tl.store(out_ptr + row * stride_out + offs, t * CAP, mask=mask)


def check_logit_softcap(logits: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of logit_softcap_kernel (shared with the CPU path)."""
    # logits, out: [S, V] float32
    c = entry.constexpr_dict()
    assert entry.kernel == "logit_softcap", f"entry {entry.key} is not a logit_softcap entry"
    width = c["V"]
    assert logits.dim() == 2 and logits.shape[1] == width and logits.dtype == torch.float32, \
        f"logits must be a [S, {width}] float32 tensor, got {tuple(logits.shape)} {logits.dtype}"
    assert logits.stride(1) == 1 and (logits.shape[0] <= 1 or logits.stride(0) >= width), \
        f"logits need unit column stride and non-overlapping rows, got strides {logits.stride()}"
    assert tuple(out.shape) == tuple(logits.shape) and out.dtype == torch.float32 and out.is_contiguous(), \
        f"out must be a contiguous [{logits.shape[0]}, {width}] float32 tensor, got {tuple(out.shape)}"
    assert logits.device == out.device, "all tensors must be on one device"
    assert max(max_offset(logits), max_offset(out)) <= MAX_INDEX, "a tensor is too large for 32-bit offsets"


def launch_logit_softcap(logits: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch logit_softcap_kernel on grid (S, cdiv(V, BLOCK_V))."""
    check_logit_softcap(logits, out, entry)
    c = entry.constexpr_dict()
    if logits.shape[0] == 0:
        return
    grid = (logits.shape[0], triton.cdiv(c["V"], c["BLOCK_V"]))
    logit_softcap_kernel[grid](logits, out, logits.stride(0), out.stride(0), **launch_kwargs(entry))
