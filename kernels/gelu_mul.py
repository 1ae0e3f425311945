"""GeGLU with tanh-GELU: ``out = round(round(gelu_tanh(gate)) * up)`` for ``gate_up = [gate | up]``.

``gelu_tanh(x) = 0.5 x (1 + tanh(u))`` with ``u = sqrt(2/pi) (x + 0.044715 x^3)`` (torch's
``gelu(approximate="tanh")``, transformers' ``gelu_pytorch_tanh``), written as the equal
``x / (1 + exp(-2u))`` so it needs only ``exp`` (the CPU path has a position-independent one).
Program (t, j) handles columns [j*BLOCK_I, +BLOCK_I) of token t; elementwise, so a row's output
depends on that row only. The two roundings match Hugging Face Gemma3's bf16
``act_fn(gate_proj(x)) * up_proj(x)`` (none in fp32).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["gelu_tanh_mul_kernel", "check_gelu_tanh_mul", "launch_gelu_tanh_mul", "SQRT_2_OVER_PI", "GELU_CUBIC"]

SQRT_2_OVER_PI = 0.7978845608028654
GELU_CUBIC = 0.044715


@triton.jit
def gelu_tanh_mul_kernel(gu_ptr, out_ptr, stride_gu, stride_out, I: tl.constexpr, BLOCK_I: tl.constexpr,
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
    inner = 0.7978845608028654 * (gate + 0.044715 * (gate * gate * gate))
    act = (gate / (1.0 + tl.exp(-2.0 * inner))).to(DTYPE).to(tl.float32)
    tl.store(out_ptr + row * stride_out + offs, (act * up).to(DTYPE), mask=mask)


def check_gelu_tanh_mul(gate_up: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of gelu_tanh_mul_kernel (shared with the CPU path)."""
    # gate_up: [T, 2*I]; out: [T, I] (silu_mul's layout; kept here so the verifier reads these asserts)
    c = entry.constexpr_dict()
    assert entry.kernel == "gelu_tanh_mul", f"entry {entry.key} is not a gelu_tanh_mul entry"
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


def launch_gelu_tanh_mul(gate_up: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch gelu_tanh_mul_kernel on grid (T, cdiv(I, BLOCK_I))."""
    check_gelu_tanh_mul(gate_up, out, entry)
    c = entry.constexpr_dict()
    if gate_up.shape[0] == 0:
        return
    grid = (gate_up.shape[0], triton.cdiv(c["I"], c["BLOCK_I"]))
    gelu_tanh_mul_kernel[grid](gate_up, out, gate_up.stride(0), out.stride(0), **launch_kwargs(entry))
