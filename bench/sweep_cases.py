"""Candidate launch configurations for bench/config_sweep.py and the calls that time and check them.

A candidate replaces the tile constexprs and launch options of one plan entry (the static shape
stays); it is launched directly through the kernel's launch wrapper, bypassing plan admission,
so configurations outside the sealed plan can be measured before one is chosen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import torch
import torch.nn.functional as F
import triton

from kernels import configs, metadata
from kernels.attention import check_paged_attention, launch_attention_partial, split_scratch
from kernels.attention_combine import launch_attention_combine
from kernels.matmul import launch_matmul
from kernels.plan import PlanEntry
from kernels.tensors import constexpr_kwargs, torch_dtype

__all__ = ["MATMUL_CANDIDATES", "ATTENTION_CANDIDATES", "matmul_candidates", "with_config", "matmul_inputs",
           "matmul_call", "torch_matmul_call", "matmul_invariance_failures", "attention_call", "variant_entry",
           "attention_inputs", "sdpa_call", "attention_invariance_failures"]

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): decode-leaning (narrow columns, deep K),
# balanced, and prefill-leaning (wide wgmma tiles) shapes.
MATMUL_CANDIDATES = [
    (64, 32, 128, 4, 4), (64, 64, 128, 4, 4), (64, 128, 64, 4, 4),  # the plan's choices, for reference
    (64, 32, 64, 4, 4), (64, 32, 128, 4, 3), (64, 32, 128, 8, 4), (64, 64, 64, 4, 4), (64, 64, 128, 4, 3),
    (128, 32, 64, 4, 4), (128, 32, 128, 8, 3), (128, 64, 64, 8, 3),
    # More weight bytes in flight per program: at decode a narrow weight's 64-128 column tiles each
    # stream their columns one K step after another, so a program waits on memory latency with
    # (stages - 1) weight tiles in flight (24 KB for the plan's (64, 32, 128, 4, 4)).
    (64, 32, 256, 4, 4), (64, 32, 256, 8, 4), (64, 16, 256, 4, 4), (64, 32, 128, 4, 6),
]
# Weights at least this wide have enough column tiles for decode at any candidate width; their
# narrow-tile candidates would only spend the sweep's time on very slow prefills.
WIDE_N, WIDE_MIN_TILE = 32768, 64


def matmul_candidates(n: int) -> list[tuple]:
    """The candidates worth timing for a weight of ``n`` rows."""
    return [c for c in MATMUL_CANDIDATES if n < WIDE_N or min(c[0], c[1]) >= WIDE_MIN_TILE]


# (variant, BLOCK_Q, BLOCK_N, num_warps, num_stages[, SEG]) of paged attention: "plan" is the plan's
# split pair (kernels/attention.py, a KV head's query heads in the tile rows, at the plan's SEG
# unless one is given, then kernels/attention_combine.py), the others are
# bench/attention_variants.py ("walk": the single KV walk the split replaced).
ATTENTION_CANDIDATES = [
    ("plan", 16, 128, 4, 2), ("plan", 4, 128, 4, 2), ("plan", 16, 64, 4, 2), ("plan", 16, 128, 4, 3), ("plan", 16, 128, 8, 2),
    ("plan", 32, 128, 8, 2), ("plan", 16, 256, 4, 2), ("plan", 16, 128, 4, 2, 512), ("plan", 16, 128, 4, 2, 2048),
    ("plan", 16, 128, 4, 2, 256), ("plan", 16, 64, 4, 2, 256), ("plan", 16, 64, 4, 2, 512), ("plan", 16, 64, 4, 3, 256),
    ("walk", 64, 128, 4, 2), ("walk", 16, 256, 4, 2),
    ("gqa", 16, 128, 4, 2), ("gqa", 16, 64, 4, 3), ("gqa", 16, 256, 4, 2), ("gqa", 32, 128, 8, 2),
]


def with_config(entry: PlanEntry, constexprs: dict, num_warps: int, num_stages: int) -> PlanEntry:
    """``entry`` with some constexprs and its launch options replaced."""
    merged = {**entry.constexpr_dict(), **constexprs}
    return replace(entry, constexprs=tuple(sorted(merged.items())), num_warps=num_warps, num_stages=num_stages)


def matmul_inputs(entry: PlanEntry, m: int, copies: int, device: str = "cuda") -> list[tuple]:
    """``copies`` independent (x [m, K], weight [N, K], out [m, N]) triples."""
    c, dtype = entry.constexpr_dict(), torch_dtype(entry.static_dict()["dtype"])
    out_dtype = torch_dtype(c["OUT_DTYPE"])
    n, k = c["N"], c["K"]
    return [((torch.randn(m, k, device=device)).to(dtype), (torch.randn(n, k, device=device) * k**-0.5).to(dtype),
             torch.empty(m, n, dtype=out_dtype, device=device)) for _ in range(copies)]


def matmul_call(entry: PlanEntry, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> Callable[[], None]:
    return lambda: launch_matmul(x, w, None, out, entry)


def torch_matmul_call(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> Callable[[], object]:
    return lambda: F.linear(x, w).to(out.dtype)


def matmul_invariance_failures(entry: PlanEntry, x: torch.Tensor, w: torch.Tensor) -> list[str]:
    """Rows of a 4096-row launch against the same rows launched in smaller batches, bitwise."""
    out_dtype = torch_dtype(entry.constexpr_dict()["OUT_DTYPE"])

    def run(rows: torch.Tensor) -> torch.Tensor:
        out = torch.empty(rows.shape[0], w.shape[0], dtype=out_dtype, device=rows.device)
        launch_matmul(rows, w, None, out, entry)
        return out
    bits = torch.int32 if out_dtype == torch.float32 else torch.int16
    full = run(x).view(bits)
    return [f"rows [{start}, {start + count}) differ from the {x.shape[0]}-row launch"
            for start, count in ((0, 1), (70, 1), (5, 37), (1000, 200), (x.shape[0] - 1, 1))
            if not torch.equal(run(x[start:start + count].contiguous()).view(bits), full[start:start + count])]


def attention_call(entry: PlanEntry, variant: str = "plan") -> Callable[..., torch.Tensor]:
    """A function with ops.paged_attention's signature that launches ``entry`` with ``variant``."""
    def attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, scale):
        seq_idx = metadata.token_requests(query_start_loc, q.shape[0])
        out = torch.empty_like(q)
        if variant == "plan":
            _launch_plan(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, entry)
        else:
            _launch_variant(variant, q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, entry)
        return out
    return attention


def variant_entry(entry: PlanEntry, variant: str, block_q: int, block_n: int, num_warps: int,
                  num_stages: int, seg: int | None = None) -> PlanEntry:
    """The attention entry of one candidate (``gqa`` adds BLOCK_G, the head group padded to 2^k;
    ``seg`` replaces the plan's segment length)."""
    constexprs = {"BLOCK_Q": block_q, "BLOCK_N": block_n} | ({"SEG": seg} if seg else {})
    if variant in ("gqa", "plan"):
        constexprs["BLOCK_G"] = triton.next_power_of_2(entry.constexpr_dict()["GROUP"])
    return with_config(entry, constexprs, num_warps, num_stages)


def _launch_plan(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, entry):
    """ops.paged_attention's two launches, for a candidate entry outside the sealed plan."""
    s, c = entry.static_dict(), entry.constexpr_dict()
    combine = configs.attention_combine_config(num_heads=s["num_heads"], head_dim=s["head_dim"], seg=c["SEG"],
                                               dtype=s["dtype"], window=c.get("WINDOW", 0))
    m, l, acc = split_scratch(q, block_table, entry)
    launch_attention_partial(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, m, l, acc, entry)
    flags = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)  # the finiteness flags
    launch_attention_combine(m, l, acc, query_start_loc, seq_lens, seq_idx, out, flags, combine)


def _launch_variant(variant, q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, entry):
    from bench import attention_variants

    check_paged_attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, entry)
    kernel = getattr(attention_variants, f"{variant}_attention_kernel")
    heads = k_cache.shape[2] if variant == "gqa" else q.shape[1]
    grid = (triton.cdiv(q.shape[0], entry.constexpr_dict()["BLOCK_Q"]) + block_table.shape[0], heads)
    # the variants walk unsplit; only gqa groups heads into the tile rows
    unused = {"SEG"} | ({"BLOCK_G"} if variant != "gqa" else set())
    constexprs = {k: v for k, v in constexpr_kwargs(entry).items() if k not in unused}
    kernel[grid](q, k_cache, v_cache, out, block_table, query_start_loc, seq_lens, seq_idx, q.shape[0], q.stride(0),
                 q.stride(1), out.stride(0), out.stride(1), block_table.stride(0), k_cache.stride(0), k_cache.stride(1),
                 k_cache.stride(2), **constexprs, num_warps=entry.num_warps, num_stages=entry.num_stages)


def attention_inputs(entry: PlanEntry, num_seqs: int, q_len: int, kv_len: int, device: str = "cuda") -> tuple:
    """(q, k_cache, v_cache, block_table, query_start_loc, seq_lens) of num_seqs requests whose last
    q_len of kv_len positions are queries, pages at random physical ids."""
    s, c = entry.static_dict(), entry.constexpr_dict()
    dtype, page = torch_dtype(s["dtype"]), c["PAGE_SIZE"]
    hq, hkv, d = s["num_heads"], s["num_kv_heads"], s["head_dim"]
    pages_per_seq = -(-kv_len // page)
    num_pages = num_seqs * pages_per_seq
    k_cache, v_cache = (torch.randn(num_pages, page, hkv, d, device=device).to(dtype) for _ in range(2))
    table = torch.randperm(num_pages, device=device).view(num_seqs, pages_per_seq).to(torch.int32)
    q = torch.randn(num_seqs * q_len, hq, d, device=device).to(dtype)
    qsl = (torch.arange(num_seqs + 1, device=device) * q_len).to(torch.int32)
    lens = torch.full((num_seqs,), kv_len, dtype=torch.int32, device=device)
    return q, k_cache, v_cache, table, qsl, lens


def sdpa_call(q, k_cache, v_cache, table, qsl, lens, scale: float) -> Callable[[], torch.Tensor]:
    """torch's SDPA on the same KV gathered to a dense layout beforehand (the bench's baseline)."""
    num_seqs, length, hq, d = table.shape[0], int(lens[0]), q.shape[1], q.shape[2]
    q_len = q.shape[0] // num_seqs
    dense_k = k_cache[table.long()].flatten(1, 2)[:, :length].transpose(1, 2).contiguous()
    dense_v = v_cache[table.long()].flatten(1, 2)[:, :length].transpose(1, 2).contiguous()
    dense_q = q.view(num_seqs, q_len, hq, d).transpose(1, 2)
    return lambda: F.scaled_dot_product_attention(dense_q, dense_k, dense_v, is_causal=q_len > 1, scale=scale,
                                                  enable_gqa=True)


def attention_invariance_failures(entry: PlanEntry, device: str = "cuda", variant: str = "plan") -> list[str]:
    """A 300 + SEG-token request (its last chunk and decode steps cross a segment boundary of the
    plan's split) as a full prefill, as chunks beside other requests, and decoded: bitwise."""
    from tests.kernels.attention_cases import Step, chunk_bounds, make_request, schedule_failures

    s = entry.static_dict()
    dtype, scale = torch_dtype(s["dtype"]), s["head_dim"] ** -0.5
    length = 300 + entry.constexpr_dict()["SEG"]
    gen = torch.Generator().manual_seed(7)
    make = lambda n, fill="random": make_request(n, s["num_heads"], s["num_kv_heads"], s["head_dim"],  # noqa: E731
                                                 dtype, gen, fill)
    request, others = make(length), [make(129), make(33, "huge"), make(17, "nan")]
    chunks = chunk_bounds(length, [5, 128, 200, 257, 271])
    companions = [[Step(o, 0, o.length) for o in others[: i % 4]] for i in range(len(chunks))]
    call = attention_call(entry, variant)
    failures = schedule_failures(request, chunks, companions, [i % 3 for i in range(len(chunks))],
                                 page_size=s["page_size"], scale=scale, seed=7, poison="nan", device=device,
                                 attention=call)
    failures += schedule_failures(request, [(p, p + 1) for p in range(length - 10, length)], [[] for _ in range(10)],
                                  [0] * 10, page_size=s["page_size"], scale=scale, seed=8, poison="inf",
                                  device=device, attention=call)
    return failures
