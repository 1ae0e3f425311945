"""Benchmark cases for bench/kernels.py: each kernel at one M, with its torch equivalent.

A case's ``build(i)`` creates the i-th independent copy of the inputs and returns
``(ours, baseline)`` zero-argument calls on them (baseline None where torch has no
equivalent). ``num_bytes`` is the minimal memory traffic of one call, ``flops`` its useful
floating-point work (0 for bandwidth-bound ops).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from kernels import ops
from kernels.plan import SealedPlan

Call = Callable[[], torch.Tensor | None]


@dataclass
class BenchCase:
    kernel: str
    label: str  # the shape, human-readable
    m: int  # rows (tokens; requests for decode attention)
    num_bytes: int
    flops: int
    build: Callable[[int], tuple[Call, Call | None]]
    baseline_layout: Callable[[torch.Tensor], torch.Tensor] = lambda t: t  # to ours, for the diff


def _randn(*shape: int, dtype: torch.dtype, device: str, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, device=device) * scale).to(dtype)


def matmul_cases(plan: SealedPlan, m: int, device: str) -> list[BenchCase]:
    """Every planned matmul (each weight role) at M = m, against ``F.linear`` (cuBLAS on CUDA)."""
    cases = []
    for entry in (e for e in plan.entries if e.kernel == "matmul"):
        c, static = entry.constexpr_dict(), entry.static_dict()
        n, k, has_bias = c["N"], c["K"], c["HAS_BIAS"]
        dtype = torch.bfloat16 if static["dtype"] == "bfloat16" else torch.float32
        out_dtype = torch.float32 if c["OUT_DTYPE"] == "float32" else torch.bfloat16
        size = dtype.itemsize

        def build(i: int, n=n, k=k, has_bias=has_bias, dtype=dtype, out_dtype=out_dtype):
            x, w = _randn(m, k, dtype=dtype, device=device), _randn(n, k, dtype=dtype, device=device, scale=k**-0.5)
            b = _randn(n, dtype=dtype, device=device) if has_bias else None
            ours = lambda: ops.linear(x, w, b, out_dtype=out_dtype)  # noqa: E731
            baseline = lambda: F.linear(x, w, b).to(out_dtype)  # noqa: E731
            return ours, baseline
        cases.append(BenchCase("matmul", f"{'/'.join(entry.roles)} N={n} K={k}", m,
                               (m * k + n * k) * size + m * n * out_dtype.itemsize, 2 * m * n * k, build))
    return cases


def rowwise_cases(plan: SealedPlan, m: int, device: str) -> list[BenchCase]:
    """RMSNorm (+residual), SiLU-mul, RoPE with the KV store, and embedding at M = m."""
    s = plan.shape
    dtype = torch.bfloat16 if s.dtype == "bfloat16" else torch.float32
    e, h, i_size = dtype.itemsize, s.hidden_size, s.intermediate_size
    hq, hkv, d = s.num_heads, s.num_kv_heads, s.head_dim

    def norm(i: int):
        x, res = _randn(m, h, dtype=dtype, device=device), _randn(m, h, dtype=dtype, device=device)
        w = _randn(h, dtype=dtype, device=device)
        return (lambda: ops.rms_norm(x, w, s.rms_norm_eps, res),
                lambda: F.rms_norm(x + res, (h,), w, s.rms_norm_eps))

    def silu(i: int):
        gu = _randn(m, 2 * i_size, dtype=dtype, device=device)
        return lambda: ops.silu_mul(gu), lambda: F.silu(gu[:, :i_size]) * gu[:, i_size:]

    def rope_store(i: int):
        num_pages = max(4, -(-m // s.page_size) * 2)
        kc, vc = (torch.zeros(num_pages, s.page_size, hkv, d, dtype=dtype, device=device) for _ in range(2))
        q, k = _randn(m, hq, d, dtype=dtype, device=device), _randn(m, hkv, d, dtype=dtype, device=device)
        v = _randn(m, hkv, d, dtype=dtype, device=device)
        table = torch.randn(4096, d, device=device)
        pos = torch.randint(0, 4096, (m,), device=device)
        slots = torch.randperm(num_pages * s.page_size, device=device)[:m]

        def baseline():
            cs = table[pos]
            cos, sin = cs[:, None, : d // 2].repeat(1, 1, 2).to(dtype), cs[:, None, d // 2:].repeat(1, 1, 2).to(dtype)
            rot = lambda t: torch.cat([-t[..., d // 2:], t[..., : d // 2]], dim=-1)  # noqa: E731
            kc.view(-1, hkv, d).index_copy_(0, slots, k * cos + rot(k) * sin)
            vc.view(-1, hkv, d).index_copy_(0, slots, v)
            return q * cos + rot(q) * sin
        return lambda: ops.rope_store_kv(q, k, v, pos, table, kc, vc, slots), baseline

    def embed(i: int):
        table = _randn(s.vocab_size, h, dtype=dtype, device=device)
        ids = torch.randint(0, s.vocab_size, (m,), device=device)
        return lambda: ops.embedding(ids, table), lambda: F.embedding(ids, table)

    return [BenchCase("rms_norm", f"residual H={h}", m, 4 * m * h * e + h * e, 0, norm),
            BenchCase("silu_mul", f"I={i_size}", m, 3 * m * i_size * e, 0, silu),
            BenchCase("rope_store_kv", f"Hq={hq} Hkv={hkv} D={d}", m,
                      2 * m * (hq + 2 * hkv) * d * e + m * d * 4, 0, rope_store),
            BenchCase("embedding", f"V={s.vocab_size} H={h}", m, 2 * m * h * e, 0, embed)]


def attention_case(plan: SealedPlan, m: int, kv_len: int, device: str, *, prefill: bool) -> BenchCase:
    """Decode (m requests, one query each, KV kv_len) or prefill (one request of m tokens)."""
    s = plan.shape
    dtype = torch.bfloat16 if s.dtype == "bfloat16" else torch.float32
    hq, hkv, d, page = s.num_heads, s.num_kv_heads, s.head_dim, s.page_size
    num_seqs, q_len, length = (1, m, m) if prefill else (m, 1, kv_len)
    pages_per_seq = -(-length // page)
    scale = d ** -0.5

    def build(i: int):
        num_pages = num_seqs * pages_per_seq
        kc, vc = (_randn(num_pages, page, hkv, d, dtype=dtype, device=device) for _ in range(2))
        table = torch.randperm(num_pages, device=device).view(num_seqs, pages_per_seq).to(torch.int32)
        q = _randn(num_seqs * q_len, hq, d, dtype=dtype, device=device)
        qsl = (torch.arange(num_seqs + 1, device=device) * q_len).to(torch.int32)
        lens = torch.full((num_seqs,), length, dtype=torch.int32, device=device)
        # the baseline reads the same KV, gathered to a dense [B, Hkv, L, D] layout beforehand
        dense_k = kc[table.long()].flatten(1, 2)[:, :length].transpose(1, 2).contiguous()
        dense_v = vc[table.long()].flatten(1, 2)[:, :length].transpose(1, 2).contiguous()
        dense_q = q.view(num_seqs, q_len, hq, d).transpose(1, 2)

        def baseline():
            return F.scaled_dot_product_attention(dense_q, dense_k, dense_v, is_causal=prefill, scale=scale,
                                                  enable_gqa=True)
        return lambda: ops.paged_attention(q, kc, vc, table, qsl, lens, scale), baseline

    kv_bytes = 2 * num_seqs * length * hkv * d * dtype.itemsize
    flops = 2 * hq * d * length * length if prefill else 4 * num_seqs * hq * d * length
    label = f"prefill L={length}" if prefill else f"decode B={m} KV={kv_len}"
    return BenchCase("paged_attention", f"{label} Hq={hq} Hkv={hkv} D={d}", m,
                     kv_bytes + 2 * num_seqs * q_len * hq * d * dtype.itemsize, flops, build,
                     baseline_layout=lambda t: t.transpose(1, 2).reshape(-1, hq, d))


def all_cases(plan: SealedPlan, ms: list[int], kv_len: int, device: str, *, prefill_m: int) -> list[BenchCase]:
    """Every case of the run: matmuls, row-wise ops, attention (prefill at ``prefill_m``), forward."""
    cases: list[BenchCase] = []
    for m in ms:
        cases += matmul_cases(plan, m, device) + rowwise_cases(plan, m, device)
        cases.append(attention_case(plan, m, m if m == prefill_m else kv_len, device, prefill=m == prefill_m))
    return cases + [forward_case(plan, prefill_m, device)]


def forward_case(plan: SealedPlan, m: int, device: str) -> BenchCase:
    """A whole decoder forward of one m-token prompt through kernels.ops (random weights)."""
    s = plan.shape
    dtype = torch.bfloat16 if s.dtype == "bfloat16" else torch.float32
    h, hq, hkv, d, inter, page = s.hidden_size, s.num_heads, s.num_kv_heads, s.head_dim, s.intermediate_size, s.page_size
    qkv_width = (hq + 2 * hkv) * d
    params = s.vocab_size * h + s.num_layers * (qkv_width * h + h * hq * d + 3 * inter * h + 2 * h) + h

    def build(i: int):
        def w(*shape: int) -> torch.Tensor:
            return _randn(*shape, dtype=dtype, device=device, scale=shape[-1] ** -0.5)
        embed, norm = w(s.vocab_size, h), torch.ones(h, dtype=dtype, device=device)
        layers = [(w(qkv_width, h), w(h, hq * d), w(2 * inter, h), w(h, inter)) for _ in range(s.num_layers)]
        pages = -(-m // page)
        caches = [(torch.zeros(pages, page, hkv, d, dtype=dtype, device=device),
                   torch.zeros(pages, page, hkv, d, dtype=dtype, device=device)) for _ in range(s.num_layers)]
        ids = torch.randint(0, s.vocab_size, (m,), device=device)
        positions = torch.arange(m, device=device)
        table = torch.arange(pages, dtype=torch.int32, device=device)[None]
        qsl, lens = torch.tensor([0, m], dtype=torch.int32, device=device), torch.tensor([m], dtype=torch.int32,
                                                                                       device=device)
        cos_sin = torch.randn(m, d, device=device)

        def forward() -> torch.Tensor:
            hidden, residual = ops.embedding(ids, embed), None
            for (qkv_w, o_w, gate_up_w, down_w), (kc, vc) in zip(layers, caches):
                x, residual = ops.rms_norm(hidden, norm, s.rms_norm_eps, residual)
                qkv = ops.linear(x, qkv_w)
                q = ops.rope_store_kv(qkv[:, :hq * d].view(m, hq, d), qkv[:, hq * d:(hq + hkv) * d].view(m, hkv, d),
                                      qkv[:, (hq + hkv) * d:].view(m, hkv, d), positions, cos_sin, kc, vc, positions)
                attn = ops.paged_attention(q, kc, vc, table, qsl, lens, d ** -0.5)
                x, residual = ops.rms_norm(ops.linear(attn.view(m, hq * d), o_w), norm, s.rms_norm_eps, residual)
                hidden = ops.linear(ops.silu_mul(ops.linear(x, gate_up_w)), down_w)
            x, _ = ops.rms_norm(hidden[-1:], norm, s.rms_norm_eps, residual[-1:])
            return ops.logits(x, embed)
        return forward, None

    return BenchCase("forward", f"{s.num_layers} layers, one {m}-token prompt", m, params * dtype.itemsize,
                     2 * m * params, build)
