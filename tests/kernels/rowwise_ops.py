"""Row-wise op scenarios for the invariance tests: the op, its selected rows and filler rows.

A scenario is built from the tiny shape, a dtype, a seed and a layout flag; the same builders
serve the CPU tests and the GPU tests (``device``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch

from kernels import ops
from kernels.shapes import ModelShape
from tests.kernels.invariance import fill_rows
from tests.kernels.reference import rope_table

ROWWISE_OPS = ("linear", "linear_bias", "linear_down", "down_fold_norm", "logits", "rms_norm", "rms_norm_residual",
               "rope_store_kv", "silu_mul", "gate_up_silu_mul", "embedding", "rms_norm_offset", "gelu_tanh_mul",
               "logit_softcap", "embedding_scaled")
# Gemma3's ops (kernels/shapes.py): the (1 + w) norm, GeGLU, the final-logit softcap, the scaled embedding
GEMMA_OPS = ("rms_norm_offset", "gelu_tanh_mul", "logit_softcap", "embedding_scaled")


def gemma_variant(shape: ModelShape) -> ModelShape:
    """``shape`` with Gemma3's kernels (a softcap of 0.7, below |logits| of random weights)."""
    return replace(shape, norm_offset=True, embed_scale=True, activation="gelu_tanh", post_norms=True,
                   final_logit_softcap=0.7)


@dataclass(frozen=True)
class Scenario:
    """``fn`` maps row-indexed inputs to row-indexed outputs; ``selected`` are the rows under test."""

    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]
    selected: tuple[torch.Tensor, ...]
    make_others: Callable[[str, int, torch.Generator], tuple[torch.Tensor, ...]]
    shape: ModelShape  # the shape whose plan must be active


def _weights(gen: torch.Generator, dtype: torch.dtype, *shape: int, device: str) -> torch.Tensor:
    return (torch.randn(*shape, generator=gen) / shape[-1] ** 0.5).to(dtype).to(device)


def padded(x: torch.Tensor, pad: int) -> torch.Tensor:
    """``x`` as a view with row stride ``x.shape[1] + pad``: same values, another layout (NaN padding)."""
    if pad == 0:
        return x
    wide = torch.full((x.shape[0], x.shape[1] + pad), float("nan"), dtype=x.dtype, device=x.device)
    wide[:, :x.shape[1]] = x
    return wide[:, :x.shape[1]]


def scenario(op: str, shape: ModelShape, dtype: torch.dtype, seed: int, *, num_selected: int = 2,
             strided: bool = False, device: str = "cpu") -> Scenario:
    """The invariance scenario of ``op`` (one of ROWWISE_OPS) at ``shape``."""
    gen = torch.Generator().manual_seed(seed)
    pad = 3 if strided else 0
    shape = gemma_variant(shape) if op in GEMMA_OPS else shape
    hidden, hq, hkv, d = shape.hidden_size, shape.num_heads, shape.num_kv_heads, shape.head_dim

    def rows(width: int, scale: float = 1.0) -> Callable[[str, int, torch.Generator], torch.Tensor]:
        return lambda kind, count, g: (fill_rows(kind, (count, width), dtype, g) * scale).to(device)

    def single(make: Callable[[str, int, torch.Generator], torch.Tensor]):
        return lambda kind, count, g: (make(kind, count, g),)

    if op in ("linear", "linear_bias"):
        shape = shape if op == "linear" else replace(shape, has_qkv_bias=True)
        n = (hq + 2 * hkv) * d  # the fused qkv projection (the only weight a bias shape biases)
        weight = _weights(gen, dtype, n, hidden, device=device)
        bias = _weights(gen, dtype, n, device=device) if op == "linear_bias" else None
        make = rows(hidden)
        return Scenario(lambda x: ops.linear(padded(x, pad), weight, bias), (make("random", num_selected, gen),),
                        single(make), shape)
    if op == "linear_down":  # the down projection: a fixed split-K pair in the tiny and llama-1b plans
        weight = _weights(gen, dtype, hidden, shape.intermediate_size, device=device)
        make = rows(shape.intermediate_size)
        return Scenario(lambda x: ops.linear(padded(x, pad), weight), (make("random", num_selected, gen),),
                        single(make), shape)
    if op == "down_fold_norm":  # down's split-K partials folded by the residual norm after it
        weight = _weights(gen, dtype, hidden, shape.intermediate_size, device=device)
        norm_weight = (torch.rand(hidden, generator=gen) + 0.5).to(dtype).to(device)
        make_x, make_res = rows(shape.intermediate_size), rows(hidden)

        def fold_norm(x, res):
            return ops.rms_norm(ops.linear_unfolded(padded(x, pad), weight), norm_weight, shape.rms_norm_eps, res)
        return Scenario(fold_norm, (make_x("random", num_selected, gen), make_res("random", num_selected, gen)),
                        lambda kind, count, g: (make_x(kind, count, g), make_res(kind, count, g)), shape)
    if op == "logits":
        weight = _weights(gen, dtype, shape.vocab_size, hidden, device=device)
        make = rows(hidden)
        return Scenario(lambda x: ops.logits(padded(x, pad), weight), (make("random", num_selected, gen),),
                        single(make), shape)
    if op in ("rms_norm", "rms_norm_residual"):
        weight = (torch.rand(hidden, generator=gen) + 0.5).to(dtype).to(device)
        with_residual = op == "rms_norm_residual"
        make = rows(hidden)

        def norm(x, res):
            return ops.rms_norm(padded(x, pad), weight, shape.rms_norm_eps, res if with_residual else None)
        return Scenario(norm, (make("random", num_selected, gen), make("random", num_selected, gen)),
                        lambda kind, count, g: (make(kind, count, g), make(kind, count, g)), shape)
    if op == "rope_store_kv":
        cos_sin = rope_table(256, d, shape.rope_theta).to(device)

        def rotate_and_store(q, k, v, positions):
            if strided:  # q, k and v as views of one fused qkv row, the engine's layout
                qkv = torch.cat([q.flatten(1), k.flatten(1), v.flatten(1)], dim=1)
                q, k, v = (qkv[:, :hq * d].view(-1, hq, d), qkv[:, hq * d:(hq + hkv) * d].view(-1, hkv, d),
                           qkv[:, (hq + hkv) * d:].view(-1, hkv, d))
            num_tokens = q.shape[0]
            # A fresh NaN cache; the rows take slots in reverse order past the first page, so a
            # row's slot moves with the batch around it
            num_slots = (num_tokens // shape.page_size + 2) * shape.page_size
            k_cache, v_cache = (torch.full((num_slots // shape.page_size, shape.page_size, hkv, d), float("nan"),
                                           dtype=dtype, device=device) for _ in range(2))
            slots = (torch.arange(num_tokens, device=device).flip(0) + shape.page_size).to(torch.int64)
            q_out = ops.rope_store_kv(q, k, v, positions, cos_sin, k_cache, v_cache, slots)
            return q_out, k_cache.view(num_slots, hkv, d)[slots], v_cache.view(num_slots, hkv, d)[slots]

        def make_rope(kind, count, g):
            return (fill_rows(kind, (count, hq, d), dtype, g).to(device),
                    fill_rows(kind, (count, hkv, d), dtype, g).to(device),
                    fill_rows(kind, (count, hkv, d), dtype, g).to(device),
                    torch.randint(0, 256, (count,), generator=g).to(device))
        return Scenario(rotate_and_store, make_rope("random", num_selected, gen), make_rope, shape)
    if op == "silu_mul":
        make = rows(2 * shape.intermediate_size, scale=4.0)
        return Scenario(lambda gu: ops.silu_mul(padded(gu, pad)), (make("random", num_selected, gen),),
                        single(make), shape)
    if op == "gate_up_silu_mul":  # the gate/up projection with SiLU in its epilogue: one launch per bucket
        weight = _weights(gen, dtype, 2 * shape.intermediate_size, hidden, device=device)
        make = rows(hidden, scale=4.0)
        return Scenario(lambda x: ops.gate_up_silu_mul(padded(x, pad), weight), (make("random", num_selected, gen),),
                        single(make), shape)
    if op == "embedding":
        table = fill_rows("random", (shape.vocab_size, hidden), dtype, gen).to(device)

        def ids(kind, count, g):
            return torch.randint(0, shape.vocab_size, (count,), generator=g).to(device)
        return Scenario(lambda token_ids: ops.embedding(token_ids, table), (ids("random", num_selected, gen),),
                        single(ids), shape)
    if op == "rms_norm_offset":
        weight = (0.3 * torch.randn(hidden, generator=gen)).to(dtype).to(device)  # centred on 0, as Gemma's
        make = rows(hidden)

        def offset_norm(x, res):
            return ops.rms_norm(padded(x, pad), weight, shape.rms_norm_eps, res, offset=True)
        return Scenario(offset_norm, (make("random", num_selected, gen), make("random", num_selected, gen)),
                        lambda kind, count, g: (make(kind, count, g), make(kind, count, g)), shape)
    if op == "gelu_tanh_mul":
        make = rows(2 * shape.intermediate_size, scale=4.0)
        return Scenario(lambda gu: ops.gelu_tanh_mul(padded(gu, pad)), (make("random", num_selected, gen),),
                        single(make), shape)
    if op == "logit_softcap":
        def logit_rows(kind, count, g):
            return (fill_rows(kind, (count, shape.vocab_size), torch.float32, g) * 3).to(device)
        return Scenario(lambda x: ops.logit_softcap(padded(x, pad), shape.final_logit_softcap),
                        (logit_rows("random", num_selected, gen),), single(logit_rows), shape)
    if op == "embedding_scaled":
        table = fill_rows("random", (shape.vocab_size, hidden), dtype, gen).to(device)

        def token_ids(kind, count, g):
            return torch.randint(0, shape.vocab_size, (count,), generator=g).to(device)
        return Scenario(lambda ids: ops.embedding(ids, table, scaled=True), (token_ids("random", num_selected, gen),),
                        single(token_ids), shape)
    raise ValueError(f"unknown op {op!r}; known: {ROWWISE_OPS}")
