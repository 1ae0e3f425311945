"""Embedding gather: program t copies row ``token_ids[t]`` of the table to output row t.

With SCALED (Gemma3) the row is multiplied by SCALE, sqrt(hidden_size) already rounded to the
table's dtype (kernels/configs.py ``embedding_scale``), in fp32 with one rounding to DTYPE: in
bf16 the product of two bf16 values is exact in fp32, so this is Gemma3TextScaledWordEmbedding's
bf16 multiply.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["embedding_kernel", "check_embedding", "launch_embedding"]


@triton.jit
def embedding_kernel(ids_ptr, w_ptr, out_ptr, stride_w, stride_out, H: tl.constexpr, BLOCK_H: tl.constexpr,
                     SCALE: tl.constexpr = 0.0, DTYPE: tl.constexpr = None, PDL: tl.constexpr = False):
    # ids: [T] int64; w: [V, H] row stride stride_w; out: [T, H] row stride stride_out
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    token = tl.load(ids_ptr + row)
    offs = tl.arange(0, BLOCK_H)
    mask = offs < H
    values = tl.load(w_ptr + token * stride_w + offs, mask=mask, other=0.0)
    if SCALE != 0.0:
        values = (values.to(tl.float32) * SCALE).to(DTYPE)
    tl.store(out_ptr + row * stride_out + offs, values, mask=mask)


def check_embedding(token_ids: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of embedding_kernel (shared with the CPU path).

    Premise not checked here: every id is in [0, V) (kernels/metadata.py checks it when
    metadata checks are on).
    """
    # token_ids: [T] int64; weight: [V, H]; out: [T, H]
    c, static = entry.constexpr_dict(), entry.static_dict()
    assert entry.kernel == "embedding", f"entry {entry.key} is not an embedding entry"
    assert token_ids.dim() == 1 and token_ids.dtype == torch.int64 and token_ids.is_contiguous(), \
        f"token_ids must be a contiguous 1-D int64 tensor, got {tuple(token_ids.shape)} {token_ids.dtype}"
    assert tuple(weight.shape) == (static["vocab_size"], c["H"]) and weight.is_contiguous(), \
        f"weight must be a contiguous [{static['vocab_size']}, {c['H']}] table, got {tuple(weight.shape)}"
    assert dtype_name(weight.dtype) == static["dtype"] and out.dtype == weight.dtype, \
        f"weight {weight.dtype} and out {out.dtype} must be {static['dtype']}"
    assert tuple(out.shape) == (token_ids.shape[0], c["H"]) and out.is_contiguous(), \
        f"out must be a contiguous [{token_ids.shape[0]}, {c['H']}] tensor, got {tuple(out.shape)}"
    assert token_ids.device == weight.device == out.device, "all tensors must be on one device"
    assert max(max_offset(weight), max_offset(out)) <= MAX_INDEX, "a tensor is too large for 32-bit offsets"


def launch_embedding(token_ids: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch embedding_kernel on grid (T,)."""
    check_embedding(token_ids, weight, out, entry)
    num_tokens = token_ids.shape[0]
    if num_tokens == 0:
        return
    embedding_kernel[(num_tokens,)](token_ids, weight, out, weight.stride(0), out.stride(0),
                                    **launch_kwargs(entry))
