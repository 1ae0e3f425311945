"""The CPU path of every op except attention: torch formulations invariant by construction.

Each function takes the same tensors and plan entry as its Triton wrapper, checks the same
launch contract (the ``check_*`` function of the kernel's module) and writes the outputs.
Every output row is computed from that row's inputs by a fixed sequence of elementwise,
correctly rounded ops (kernels/cpu_math.py); no op reduces across rows and no reduction order
depends on the number of rows, so a row's bits do not depend on the batch it sits in.
"""

from __future__ import annotations

import torch

from kernels.cpu_math import exp, rsqrt, tree_sum
from kernels.embedding import check_embedding
from kernels.finiteness import any_nonfinite
from kernels.matmul import check_matmul
from kernels.plan import PlanEntry
from kernels.rmsnorm import check_rms_norm
from kernels.rope import check_rope
from kernels.silu_mul import check_silu_mul
from kernels.store_kv import check_store_kv

__all__ = ["embedding", "rms_norm", "matmul", "rope", "silu_mul", "store_kv"]

# Bound on the [rows, N, BLOCK_K] product tensor of one matmul step; rows are independent,
# so splitting them into groups changes no row's arithmetic.
_MAX_PRODUCT_ELEMENTS = 1 << 21


def embedding(token_ids: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """``out[t] = weight[token_ids[t]]`` (a gather: exact)."""
    check_embedding(token_ids, weight, out, entry)
    out.copy_(weight.index_select(0, token_ids))


def rms_norm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, out: torch.Tensor,
             residual_out: torch.Tensor, entry: PlanEntry) -> None:
    """Residual add and RMSNorm with the Triton kernel's roundings; sum of squares by tree_sum."""
    check_rms_norm(x, residual, weight, out, residual_out, entry)
    c = entry.constexpr_dict()
    summed = x.float() if residual is None else x.float() + residual.float()
    rounded = summed.to(out.dtype)
    residual_out.copy_(rounded)
    r = rounded.float()  # r: [T, H]
    inv = rsqrt(tree_sum(r * r) / c["H"] + c["EPS"])  # inv: [T]
    normed = (r * inv[:, None]).to(out.dtype).float()
    out.copy_((normed * weight.float()).to(out.dtype))


def matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
           entry: PlanEntry) -> None:
    """``out = x @ weight.T (+ bias)``: fp32 accumulation over K in BLOCK_K steps, like the kernel.

    Each step adds ``tree_sum(x[r, k0:k1] * weight[n, k0:k1])`` to ``acc[r, n]``: the order of
    every product and add is fixed by K and BLOCK_K alone.
    """
    check_matmul(x, weight, bias, out, entry)
    c = entry.constexpr_dict()
    block_k, width, depth = c["BLOCK_K"], c["N"], c["K"]
    xf, wf = x.float(), weight.float()  # xf: [M, K]; wf: [N, K]
    rows_per_group = max(1, _MAX_PRODUCT_ELEMENTS // (width * block_k))
    for r0 in range(0, x.shape[0], rows_per_group):
        xs = xf[r0:r0 + rows_per_group]
        acc = torch.zeros(xs.shape[0], width, dtype=torch.float32)
        for k0 in range(0, depth, block_k):
            products = xs[:, None, k0:k0 + block_k] * wf[None, :, k0:k0 + block_k]  # [rows, N, <=BLOCK_K]
            acc = acc + tree_sum(products)
        if bias is not None:
            acc = acc + bias.float()
        out[r0:r0 + rows_per_group].copy_(acc.to(out.dtype))


def rope(x: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor, out: torch.Tensor,
         entry: PlanEntry) -> None:
    """Rotate-half RoPE in fp32 with one rounding to the activation dtype."""
    check_rope(x, positions, cos_sin, out, entry)
    half = entry.constexpr_dict()["HALF"]
    xf = x.float()  # xf: [T, heads, D]
    x1, x2 = xf[..., :half], xf[..., half:]
    table = cos_sin.index_select(0, positions)  # table: [T, D]
    cos, sin = table[:, None, :half], table[:, None, half:]
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    out.copy_(torch.cat([out1, out2], dim=-1).to(out.dtype))


def silu_mul(gate_up: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """``round(round(gate / (1 + exp(-gate))) * up)`` with the position-independent exp."""
    check_silu_mul(gate_up, out, entry)
    width = entry.constexpr_dict()["I"]
    gate, up = gate_up[:, :width].float(), gate_up[:, width:].float()
    act = (gate / (1.0 + exp(-gate))).to(out.dtype).float()
    out.copy_((act * up).to(out.dtype))


def store_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
             slot_mapping: torch.Tensor, nonfinite: torch.Tensor, entry: PlanEntry) -> None:
    """Copy each token's K and V rows to its slot (slots must be distinct); flag non-finite rows."""
    # k, v: [T, Hkv, D]; nonfinite: [T, Hkv] float32
    check_store_kv(k, v, k_cache, v_cache, slot_mapping, nonfinite, entry)
    k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, slot_mapping, k)
    v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, slot_mapping, v)
    if entry.constexpr_dict()["CHECK"]:
        nonfinite.copy_(any_nonfinite(torch.cat([k, v], dim=-1), 1))  # [T, Hkv]: K or V row
    else:
        nonfinite.zero_()
