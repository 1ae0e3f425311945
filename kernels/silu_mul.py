"""SiLU-and-multiply: ``out = round(round(silu(gate)) * up)`` for ``gate_up = [gate | up]``.

Program (t, j) handles columns [j*BLOCK_I, +BLOCK_I) of token t; elementwise, so a row's
output depends on that row only. The two roundings match Hugging Face Llama's bf16
``act_fn(gate) * up`` (none in fp32).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["silu_mul_kernel", "check_silu_mul", "launch_silu_mul"]


@triton.jit
def silu_mul_kernel(gu_ptr, out_ptr, stride_gu, stride_out, I: tl.constexpr, BLOCK_I: tl.constexpr,
                    DTYPE: tl.constexpr, PDL: tl.constexpr = False):
    # gu: [T, 2*I] row stride stride_gu; out: [T, I] row stride stride_out
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = offs < I
    gate = tl.load(gu_ptr + row * stride_gu + offs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gu_ptr + row * stride_gu + I + offs, mask=mask, other=0.0).to(tl.float32)
    act = (gate / (1.0 + tl.exp(-gate))).to(DTYPE).to(tl.float32)
    tl.store(out_ptr + row * stride_out + offs, (act * up).to(DTYPE), mask=mask)


def check_silu_mul(gate_up: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of silu_mul_kernel (shared with the CPU path)."""
    # gate_up: [T, 2*I]; out: [T, I]
    c = entry.constexpr_dict()
    assert entry.kernel == "silu_mul", f"entry {entry.key} is not a silu_mul entry"
    width = c["I"]
    assert gate_up.dim() == 2 and gate_up.shape[1] == 2 * width, \
        f"gate_up shape {tuple(gate_up.shape)} is not [T, {2 * width}]"
    assert gate_up.stride(1) == 1 and (gate_up.shape[0] <= 1 or gate_up.stride(0) >= 2 * width), \
        f"gate_up needs unit column stride and non-overlapping rows, got strides {gate_up.stride()}"
    assert dtype_name(gate_up.dtype) == c["DTYPE"] and out.dtype == gate_up.dtype, \
        f"gate_up {gate_up.dtype} and out {out.dtype} must be {c['DTYPE']}"
    assert tuple(out.shape) == (gate_up.shape[0], width) and out.is_contiguous(), \
        f"out must be a contiguous [{gate_up.shape[0]}, {width}] tensor, got {tuple(out.shape)}"
    assert gate_up.device == out.device, "all tensors must be on one device"
    assert max(max_offset(gate_up), max_offset(out)) <= MAX_INDEX, "a tensor is too large for 32-bit offsets"


def launch_silu_mul(gate_up: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch silu_mul_kernel on grid (T, cdiv(I, BLOCK_I))."""
    check_silu_mul(gate_up, out, entry)
    c = entry.constexpr_dict()
    if gate_up.shape[0] == 0:
        return
    grid = (gate_up.shape[0], triton.cdiv(c["I"], c["BLOCK_I"]))
    silu_mul_kernel[grid](gate_up, out, gate_up.stride(0), out.stride(0), **launch_kwargs(entry))
