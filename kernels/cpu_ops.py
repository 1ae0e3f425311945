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
from kernels.gelu_mul import GELU_CUBIC, SQRT_2_OVER_PI, check_gelu_tanh_mul
from kernels.matmul import check_matmul
from kernels.matmul_combine import check_matmul_combine
from kernels.matmul_combine_norm import check_matmul_combine_norm
from kernels.matmul_silu import check_matmul_silu
from kernels.matmul_split import check_matmul_split
from kernels.plan import PlanEntry
from kernels.rmsnorm import check_rms_norm
from kernels.rope_store_kv import check_rope_store_kv
from kernels.silu_mul import check_silu_mul
from kernels.softcap import check_logit_softcap

__all__ = ["embedding", "rms_norm", "matmul", "matmul_split", "matmul_combine", "matmul_combine_norm", "matmul_silu",
           "silu_mul", "gelu_tanh_mul", "logit_softcap", "rope_store_kv"]

# Bound on the [rows, N, BLOCK_K] product tensor of one matmul step; rows are independent,
# so splitting them into groups changes no row's arithmetic.
_MAX_PRODUCT_ELEMENTS = 1 << 21


def embedding(token_ids: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """``out[t] = weight[token_ids[t]]`` (a gather: exact), times SCALE with one rounding when set."""
    check_embedding(token_ids, weight, out, entry)
    rows = weight.index_select(0, token_ids)
    scale = entry.constexpr_dict().get("SCALE", 0.0)
    out.copy_(rows if scale == 0.0 else (rows.float() * scale).to(out.dtype))


def rms_norm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, out: torch.Tensor,
             residual_out: torch.Tensor, entry: PlanEntry) -> None:
    """Residual add and RMSNorm with the Triton kernel's roundings; sum of squares by tree_sum."""
    check_rms_norm(x, residual, weight, out, residual_out, entry)
    _norm_rows(x.float() if residual is None else x.float() + residual.float(), weight, out, residual_out, entry)


def _norm_rows(summed: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, residual_out: torch.Tensor,
               entry: PlanEntry) -> None:
    """``residual_out = round(summed)``, ``out = round(weight * round(residual_out * rsqrt(mean sq + eps)))``
    (with OFFSET: ``out = round(residual_out * rsqrt(...) * (1 + weight))``)."""
    c = entry.constexpr_dict()
    rounded = summed.to(out.dtype)
    residual_out.copy_(rounded)
    r = rounded.float()  # r: [T, H]
    inv = rsqrt(tree_sum(r * r) / c["H"] + c["EPS"])  # inv: [T]
    if c.get("OFFSET", False):
        out.copy_(((r * inv[:, None]) * (1.0 + weight.float())).to(out.dtype))
        return
    normed = (r * inv[:, None]).to(out.dtype).float()
    out.copy_((normed * weight.float()).to(out.dtype))


def _accumulate(x: torch.Tensor, weight: torch.Tensor, k_start: int, k_end: int, block_k: int,
                out: torch.Tensor) -> None:
    """``out = sum over K steps [k_start, k_end) of x @ weight.T`` in fp32, from zero, ascending BLOCK_K steps.

    Each step adds ``tree_sum(x[r, k0:k1] * weight[n, k0:k1])`` to ``acc[r, n]``: the order of
    every product and add is fixed by the K range and BLOCK_K alone.
    """
    # x: [M, K]; weight: [N, K]; out: [M, N] float32
    width = weight.shape[0]
    xf, wf = x.float(), weight.float()  # xf: [M, K]; wf: [N, K]
    rows_per_group = max(1, _MAX_PRODUCT_ELEMENTS // (width * block_k))
    for r0 in range(0, x.shape[0], rows_per_group):
        xs = xf[r0:r0 + rows_per_group]
        acc = torch.zeros(xs.shape[0], width, dtype=torch.float32)
        for k0 in range(k_start, k_end, block_k):
            k1 = min(k0 + block_k, k_end)
            products = xs[:, None, k0:k1] * wf[None, :, k0:k1]  # [rows, N, <=BLOCK_K]
            acc = acc + tree_sum(products)
        out[r0:r0 + rows_per_group] = acc


def _epilogue(acc: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor) -> None:
    if bias is not None:
        acc = acc + bias.float()
    out.copy_(acc.to(out.dtype))


def matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
           entry: PlanEntry) -> None:
    """``out = x @ weight.T (+ bias)``: fp32 accumulation of each of the SPLITS K ranges in BLOCK_K steps, the
    ranges added in ascending order, like the kernel (side by side or not: the same arithmetic)."""
    check_matmul(x, weight, bias, out, entry)
    c = entry.constexpr_dict()
    splits = c.get("SPLITS", 1)
    span = c["K"] // splits
    partial = torch.empty(splits, x.shape[0], c["N"], dtype=torch.float32)
    for split in range(splits):
        _accumulate(x, weight, split * span, (split + 1) * span, c["BLOCK_K"], partial[split])
    _epilogue(_fold(partial, splits), bias, out)


def matmul_split(x: torch.Tensor, weight: torch.Tensor, partial: torch.Tensor, entry: PlanEntry) -> None:
    """``partial[s] = x[:, Ks] @ weight[:, Ks].T`` for the fixed K range Ks of each split s, like the kernel."""
    check_matmul_split(x, weight, partial, entry)
    c = entry.constexpr_dict()
    span = c["K"] // c["SPLITS"]
    for split in range(c["SPLITS"]):
        _accumulate(x, weight, split * span, (split + 1) * span, c["BLOCK_K"], partial[split])


def matmul_combine(partial: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor, entry: PlanEntry) -> None:
    """``out = ((partial[0] + partial[1]) + ...) (+ bias)``: ascending split order from partial 0, like the kernel."""
    check_matmul_combine(partial, bias, out, entry)
    _epilogue(_fold(partial, entry.constexpr_dict()["SPLITS"]), bias, out)


def _fold(partial: torch.Tensor, splits: int) -> torch.Tensor:
    """``((partial[0] + partial[1]) + ...) + partial[splits - 1]``, starting from partial 0 itself."""
    acc = partial[0]
    for split in range(1, splits):
        acc = acc + partial[split]
    return acc


def matmul_combine_norm(partial: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, out: torch.Tensor,
                        residual_out: torch.Tensor, entry: PlanEntry) -> None:
    """The fold of :func:`matmul_combine` rounded to the activation dtype, then :func:`rms_norm` with the residual."""
    check_matmul_combine_norm(partial, residual, weight, out, residual_out, entry)
    branch = _fold(partial, entry.constexpr_dict()["SPLITS"]).to(out.dtype)
    _norm_rows(branch.float() + residual.float(), weight, out, residual_out, entry)


def matmul_silu(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """:func:`matmul` of the ``[2 I, K]`` gate/up weight rounded to the activation dtype, then :func:`silu_mul`."""
    check_matmul_silu(x, weight, out, entry)
    c = entry.constexpr_dict()
    acc = torch.empty(x.shape[0], 2 * c["I"], dtype=torch.float32)
    _accumulate(x, weight, 0, c["K"], c["BLOCK_K"], acc)
    _silu_rows(acc.to(out.dtype), c["I"], out)


def silu_mul(gate_up: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """``round(round(gate / (1 + exp(-gate))) * up)`` with the position-independent exp."""
    check_silu_mul(gate_up, out, entry)
    _silu_rows(gate_up, entry.constexpr_dict()["I"], out)


def _silu_rows(gate_up: torch.Tensor, width: int, out: torch.Tensor) -> None:
    gate, up = gate_up[:, :width].float(), gate_up[:, width:].float()
    act = (gate / (1.0 + exp(-gate))).to(out.dtype).float()
    out.copy_((act * up).to(out.dtype))


def gelu_tanh_mul(gate_up: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """``round(round(gate / (1 + exp(-2 u))) * up)``, ``u = sqrt(2/pi) (gate + 0.044715 gate^3)``, like the kernel."""
    check_gelu_tanh_mul(gate_up, out, entry)
    width = entry.constexpr_dict()["I"]
    gate, up = gate_up[:, :width].float(), gate_up[:, width:].float()
    inner = SQRT_2_OVER_PI * (gate + GELU_CUBIC * (gate * gate * gate))
    act = (gate / (1.0 + exp(-2.0 * inner))).to(out.dtype).float()
    out.copy_((act * up).to(out.dtype))


def logit_softcap(logits: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """``CAP * (2 / (1 + exp(-2 logits / CAP)) - 1)`` in float32, like the kernel."""
    check_logit_softcap(logits, out, entry)
    cap = entry.constexpr_dict()["CAP"]
    y = logits / cap
    out.copy_((2.0 / (1.0 + exp(-2.0 * y)) - 1.0) * cap)


def rope_store_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor,
                  q_out: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
                  nonfinite: torch.Tensor, entry: PlanEntry) -> None:
    """Rotate-half RoPE of q and k in fp32 with one rounding; rotated K and V copied to their slots
    (slots must be distinct); non-finite K/V rows flagged."""
    # q, q_out: [T, Hq, D]; k, v: [T, Hkv, D]; nonfinite: [T, Hkv] float32
    check_rope_store_kv(q, k, v, positions, cos_sin, q_out, k_cache, v_cache, slot_mapping, nonfinite, entry)
    c = entry.constexpr_dict()
    table = cos_sin.index_select(0, positions)  # [T, D]
    cos, sin = table[:, None, :c["HALF"]], table[:, None, c["HALF"]:]
    q_out.copy_(_rotated(q, cos, sin, c["HALF"]))
    k_rot = _rotated(k, cos, sin, c["HALF"])  # [T, Hkv, D]
    k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, slot_mapping, k_rot)
    v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, slot_mapping, v)
    if c["CHECK"]:
        nonfinite.copy_(any_nonfinite(torch.cat([k_rot, v], dim=-1), 1))  # [T, Hkv]: K or V row
    else:
        nonfinite.zero_()


def _rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, half: int) -> torch.Tensor:
    """``x`` [T, heads, D] rotated by ``cos``/``sin`` [T, 1, D/2] in fp32, rounded once to x's dtype."""
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)
