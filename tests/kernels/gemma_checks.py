"""Gemma3's row-local kernels under Triton's CPU interpreter (run from interpreter_checks.py).

The (1 + w) RMSNorm, the scaled embedding, GeGLU with tanh-GELU and the final-logit softcap:
each is row-invariant bitwise under the interpreter (a row's bits do not depend on the rows
beside it) and close to a float64 formula of what transformers computes. The embedding has no
transcendental, so its float32 bits also equal the CPU path's; the others use the interpreter's
numpy exp/rsqrt, which need not round as the CPU path's polynomials do.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from kernels import configs, cpu_ops
from kernels.embedding import launch_embedding
from kernels.gelu_mul import launch_gelu_tanh_mul
from kernels.launch import require, use_plan
from kernels.plan import plan_for
from kernels.rmsnorm import launch_rms_norm
from kernels.shapes import ModelShape
from kernels.softcap import launch_logit_softcap
from kernels.tensors import dtype_name
from tests.kernels import reference
from tests.kernels.invariance import Case, bits_equal, fill_rows, row_invariance_failures

__all__ = ["check_gemma"]

CASES = [Case(2, 0, "random", 1), Case(5, 3, "nan", 2), Case(9, 6, "huge", 3), Case(17, 0, "zero", 4)]
CAP = 0.7


def _gemma_shape(shape: ModelShape, dtype: torch.dtype) -> ModelShape:
    return replace(shape, dtype=dtype_name(dtype), norm_offset=True, embed_scale=True, activation="gelu_tanh",
                   post_norms=True, final_logit_softcap=CAP)


def check_gemma(shape: ModelShape, dtype: torch.dtype) -> str:
    """Run the four kernels of a Gemma variant of ``shape`` under its own sealed plan."""
    with use_plan(plan_for(_gemma_shape(shape, dtype))):
        return _check(shape, dtype)


def _check(shape: ModelShape, dtype: torch.dtype) -> str:
    gen = torch.Generator().manual_seed(11)
    h, eps, dt = shape.hidden_size, shape.rms_norm_eps, dtype_name(dtype)
    weight = (0.3 * torch.randn(h, generator=gen)).to(dtype)  # Gemma's norm weights centre on 0
    norm_entry = require(configs.rms_norm_config(hidden_size=h, eps=eps, has_residual=True, dtype=dt, offset=True))

    def norm(x, res):
        out, res_out = torch.empty_like(x), torch.empty_like(x)
        launch_rms_norm(x, res, weight, out, res_out, norm_entry)
        return out, res_out
    rows = (fill_rows("random", (2, h), dtype, gen), fill_rows("random", (2, h), dtype, gen))
    failures = row_invariance_failures(norm, rows, lambda k, n, g: (fill_rows(k, (n, h), dtype, g),) * 2, CASES)
    expected = reference.rms_norm(rows[0], 1.0 + weight.double(), eps, rows[1])[0]
    reference.assert_close(norm(*rows)[0], expected, dtype, what="rms_norm (1 + w)")

    table = (torch.randn(shape.vocab_size, h, generator=gen) / 3).to(dtype)
    embed_entry = require(configs.embedding_config(vocab_size=shape.vocab_size, hidden_size=h, dtype=dt, scaled=True))

    def embed(ids):
        out = torch.empty(ids.shape[0], h, dtype=dtype)
        launch_embedding(ids, table, out, embed_entry)
        return out
    ids = torch.tensor([0, 5, shape.vocab_size - 1])
    cpu = torch.empty(3, h, dtype=dtype)
    cpu_ops.embedding(ids, table, cpu, embed_entry)
    scale = configs.embedding_scale(hidden_size=h, dtype=dt)
    reference.assert_close(embed(ids), table[ids].double() * scale, dtype, what="scaled embedding")
    if dtype == torch.float32:  # the interpreter truncates fp32 -> bf16 casts (interpreter_checks.py)
        assert bits_equal(embed(ids), cpu), "the interpreted scaled embedding differs from the CPU path"

    width = 2 * shape.intermediate_size
    gelu_entry = require(configs.gelu_tanh_mul_config(intermediate_size=shape.intermediate_size, dtype=dt))

    def gelu(gu):
        out = torch.empty(gu.shape[0], gu.shape[1] // 2, dtype=dtype)
        launch_gelu_tanh_mul(gu, out, gelu_entry)
        return out
    gate_up = (fill_rows("random", (2, width), dtype, gen) * 4,)
    failures += row_invariance_failures(gelu, gate_up, lambda k, n, g: (fill_rows(k, (n, width), dtype, g),), CASES)
    g64, u64 = gate_up[0].double()[:, :width // 2], gate_up[0].double()[:, width // 2:]
    reference.assert_close(gelu(*gate_up), torch.nn.functional.gelu(g64, approximate="tanh") * u64, dtype,
                           what="gelu_tanh_mul")

    cap_entry = require(configs.logit_softcap_config(vocab_size=shape.vocab_size, cap=CAP))

    def softcap(logits):
        out = torch.empty_like(logits)
        launch_logit_softcap(logits, out, cap_entry)
        return out
    logits = (fill_rows("random", (2, shape.vocab_size), torch.float32, gen) * 3,)
    failures += row_invariance_failures(
        softcap, logits, lambda k, n, g: (fill_rows(k, (n, shape.vocab_size), torch.float32, g),), CASES)
    reference.assert_close(softcap(*logits), torch.tanh(logits[0].double() / CAP) * CAP, torch.float32,
                           what="logit_softcap")
    assert not failures, failures
    return "(1 + w) norm, scaled embedding, GeGLU and softcap rows invariant and close to transformers' formulas"
