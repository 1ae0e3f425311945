"""Accuracy of the CPU path against float64 references (a separate claim from invariance).

Tolerances: tests/kernels/reference.py TOLERANCES, documented in docs/performance.md.
"""

from __future__ import annotations

import torch

from kernels import ops
from tests.kernels import reference
from tests.kernels.attention_cases import Step, make_request, run_steps
from tests.kernels.support import plan_dtype


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_linear_and_logits(plan):
    s, dtype = plan.shape, plan_dtype(plan)
    gen = _gen()
    x = torch.randn(37, s.hidden_size, generator=gen).to(dtype)
    for n, k in [((s.num_heads + 2 * s.num_kv_heads) * s.head_dim, s.hidden_size),
                 (s.hidden_size, s.intermediate_size)]:
        w = (torch.randn(n, k, generator=gen) / k ** 0.5).to(dtype)
        xk = torch.randn(37, k, generator=gen).to(dtype)
        reference.assert_close(ops.linear(xk, w), reference.linear(xk, w), dtype, what=f"linear {n}x{k}")
    w = (torch.randn(s.vocab_size, s.hidden_size, generator=gen) / 8).to(dtype)
    got = ops.logits(x, w)
    assert got.dtype == torch.float32
    # bf16 products are exact in fp32 and logits are not rounded to bf16: fp32 tolerance holds
    reference.assert_close(got, reference.linear(x, w), torch.float32, what="logits")


def test_rms_norm(plan):
    s, dtype = plan.shape, plan_dtype(plan)
    gen = _gen(1)
    x, res = (torch.randn(9, s.hidden_size, generator=gen) * 3).to(dtype), torch.randn(9, s.hidden_size, generator=gen).to(dtype)
    w = (torch.rand(s.hidden_size, generator=gen) + 0.5).to(dtype)
    out, res_out = ops.rms_norm(x, w, s.rms_norm_eps, res)
    ref_out, ref_res = reference.rms_norm(x, w, s.rms_norm_eps, res)
    reference.assert_close(out, ref_out, dtype, what="rms_norm out")
    reference.assert_close(res_out, ref_res, dtype, what="rms_norm residual_out")
    out, res_out = ops.rms_norm(x, w, s.rms_norm_eps)
    assert torch.equal(res_out, x)
    reference.assert_close(out, reference.rms_norm(x, w, s.rms_norm_eps)[0], dtype, what="rms_norm no residual")


def test_rope_store_kv_silu_embedding(plan):
    s, dtype = plan.shape, plan_dtype(plan)
    gen = _gen(2)
    table = reference.rope_table(512, s.head_dim, s.rope_theta)
    q = torch.randn(11, s.num_heads, s.head_dim, generator=gen).to(dtype)
    k = torch.randn(11, s.num_kv_heads, s.head_dim, generator=gen).to(dtype)
    positions = torch.randint(0, 512, (11,), generator=gen)
    v = torch.randn(11, s.num_kv_heads, s.head_dim, generator=gen).to(dtype)
    cache = [torch.zeros(1, s.page_size, s.num_kv_heads, s.head_dim, dtype=dtype) for _ in range(2)]
    slots = torch.randperm(s.page_size, generator=gen)[:11]
    q_out = ops.rope_store_kv(q, k, v, positions, table, *cache, slots)
    k_out, v_out = (c.view(-1, s.num_kv_heads, s.head_dim)[slots] for c in cache)
    assert torch.equal(v_out, v)
    reference.assert_close(q_out, reference.rope(q, positions, table), dtype, what="rope q")
    reference.assert_close(k_out, reference.rope(k, positions, table), dtype, what="rope k")
    gate_up = (torch.randn(13, 2 * s.intermediate_size, generator=gen) * 4).to(dtype)
    reference.assert_close(ops.silu_mul(gate_up), reference.silu_mul(gate_up), dtype, what="silu_mul")
    emb = torch.randn(s.vocab_size, s.hidden_size, generator=gen).to(dtype)
    ids = torch.randint(0, s.vocab_size, (7,), generator=gen)
    assert torch.equal(ops.embedding(ids, emb), emb[ids])


def test_paged_attention(plan):
    s, dtype = plan.shape, plan_dtype(plan)
    scale = s.head_dim ** -0.5
    for length in (1, 15, 16, 17, 50):
        request = make_request(length, s.num_heads, s.num_kv_heads, s.head_dim, dtype, _gen(length))
        got = run_steps([Step(request, 0, length)], page_size=s.page_size, scale=scale, gen=_gen(length))[0]
        reference.assert_close(got, reference.attention(request, scale), dtype, what=f"attention L={length}")



def test_gemma_ops(plan):
    """The (1 + w) norm, GeGLU with tanh-GELU, the final-logit softcap and the scaled embedding."""
    from dataclasses import replace

    from kernels.launch import use_plan
    from kernels.plan import plan_for
    from tests.kernels.rowwise_ops import gemma_variant

    s, dtype = gemma_variant(plan.shape), plan_dtype(plan)
    gen = _gen(7)
    x, res = (torch.randn(9, s.hidden_size, generator=gen) * 3).to(dtype), torch.randn(9, s.hidden_size, generator=gen).to(dtype)
    w = (0.3 * torch.randn(s.hidden_size, generator=gen)).to(dtype)
    gate_up = (torch.randn(7, 2 * s.intermediate_size, generator=gen) * 3).to(dtype)
    logits = torch.randn(5, s.vocab_size, generator=gen) * 3
    table = torch.randn(s.vocab_size, s.hidden_size, generator=gen).to(dtype)
    ids = torch.tensor([3, 0, s.vocab_size - 1])
    with use_plan(plan_for(replace(s, dtype=plan.shape.dtype))):
        out, _ = ops.rms_norm(x, w, s.rms_norm_eps, res, offset=True)
        reference.assert_close(out, reference.rms_norm(x, 1.0 + w.double(), s.rms_norm_eps, res)[0], dtype,
                               what="rms_norm (1 + w)")
        width = s.intermediate_size
        gelu = torch.nn.functional.gelu(gate_up.double()[:, :width], approximate="tanh") * gate_up.double()[:, width:]
        reference.assert_close(ops.gelu_tanh_mul(gate_up), gelu, dtype, what="gelu_tanh_mul")
        capped = torch.tanh(logits.double() / s.final_logit_softcap) * s.final_logit_softcap
        reference.assert_close(ops.logit_softcap(logits, s.final_logit_softcap), capped, torch.float32,
                               what="logit_softcap")
        scale = s.hidden_size ** 0.5 if dtype == torch.float32 else float(torch.tensor(s.hidden_size ** 0.5).to(dtype))
        reference.assert_close(ops.embedding(ids, table, scaled=True), table[ids].double() * scale, dtype,
                               what="scaled embedding")
