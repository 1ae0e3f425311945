"""Paged causal attention: one kernel for prefill, chunked prefill and decode.

Program (t, g) computes query token t for the GROUP query heads that share KV head g (GQA),
as rows of a [BLOCK_G, D] tile (rows past GROUP are padding, never stored). It reads the
token's request ``b`` and position ``pos`` (host metadata), then visits KV tiles of BLOCK_N
consecutive key positions, j = 0, 1, ..., pos // BLOCK_N, in ascending order. BLOCK_N is the
page size (at least 16, what ``tl.dot`` needs; smaller pages are grouped), and each key's page
is ``block_table[b, key // PAGE_SIZE]``. Keys past ``pos`` are masked on load (neither their
block-table entry nor their slot is read, so poisoned future slots cannot leak), scored -inf
and weighted +0. Online softmax in fp32 with the -inf clamp (``m_safe``); scores and the
weighted sum are ``tl.dot`` on tensor cores in bf16 (P rounded to bf16, fp32 accumulation)
and IEEE fp32 dots in fp32.

Every value the program reads is a function of the token, its position and its own request's
KV up to that position, and a query head always sits in row ``h % GROUP`` of its tile; the
trip count is ``pos // BLOCK_N + 1``. So a query gives the same bits in prefill, under any
chunking and in decode, whatever else is in the batch and wherever its pages sit: there are no
extra (masked) iterations and no batch-dependent row positions.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, constexpr_kwargs, dtype_name, max_offset

__all__ = ["paged_attention_kernel", "check_paged_attention", "launch_paged_attention"]


@triton.jit(do_not_specialize=["stride_bt"])
def paged_attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_table_ptr, seq_idx_ptr, pos_ptr,
                           stride_qt, stride_qh, stride_ot, stride_oh, stride_bt, stride_page, stride_slot,
                           stride_head, GROUP: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr,
                           PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, SCALE: tl.constexpr,
                           DTYPE: tl.constexpr):
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # seq_idx, pos: [T] int32 (request of each token, its absolute position)
    row = tl.program_id(0)
    kv_head = tl.program_id(1)
    seq = tl.load(seq_idx_ptr + row)
    pos = tl.load(pos_ptr + row)
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    is_head = offs_g < GROUP
    heads = kv_head * GROUP + offs_g
    q = tl.load(q_ptr + row * stride_qt + heads[:, None] * stride_qh + offs_d[None, :], mask=is_head[:, None],
                other=0.0)
    m_i = tl.zeros([BLOCK_G], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, D], dtype=tl.float32)
    for j in range(0, pos // BLOCK_N + 1):
        keys = j * BLOCK_N + offs_n
        is_valid = keys <= pos
        pages = tl.load(block_table_ptr + seq * stride_bt + keys // PAGE_SIZE, mask=is_valid, other=0)
        slots = pages * stride_page + (keys % PAGE_SIZE) * stride_slot + kv_head * stride_head
        k = tl.load(k_cache_ptr + slots[None, :] + offs_d[:, None], mask=is_valid[None, :], other=0.0)
        scores = tl.dot(q, k, input_precision="ieee") * SCALE
        scores = tl.where(is_valid[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(scores - m_safe[:, None])
        v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_valid[:, None], other=0.0)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(DTYPE), v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + row * stride_ot + heads[:, None] * stride_oh + offs_d[None, :], out.to(DTYPE),
             mask=is_head[:, None])


def check_paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                          seq_idx: torch.Tensor, positions: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of paged_attention_kernel (shared with the CPU path).

    Premises not checked here (kernels/metadata.py checks them when metadata checks are on):
    seq_idx/positions derive from query_start_loc and seq_lens; every page a token visits,
    ``block_table[seq, 0..pos // PAGE_SIZE]``, is in [0, num_pages).
    """
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, page_size, Hkv, D]; block_table: [B, max_pages] int32
    c, static = entry.constexpr_dict(), entry.static_dict()
    assert entry.kernel == "paged_attention", f"entry {entry.key} is not a paged_attention entry"
    num_heads, num_kv_heads, head_dim = static["num_heads"], static["num_kv_heads"], c["D"]
    assert num_heads == num_kv_heads * c["GROUP"] and c["BLOCK_G"] >= c["GROUP"], "plan entry heads are inconsistent"
    assert q.dim() == 3 and tuple(q.shape[1:]) == (num_heads, head_dim), \
        f"q shape {tuple(q.shape)} is not [T, {num_heads}, {head_dim}]"
    assert q.stride(2) == 1, f"q needs a unit stride on head_dim, got {q.stride()}"
    assert dtype_name(q.dtype) == c["DTYPE"] and out.dtype == q.dtype, f"q and out must be {c['DTYPE']}"
    assert tuple(out.shape) == tuple(q.shape) and out.is_contiguous(), "out must be contiguous and shaped like q"
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        assert cache.dim() == 4 and tuple(cache.shape[1:]) == (c["PAGE_SIZE"], num_kv_heads, head_dim), \
            f"{name} shape {tuple(cache.shape)} is not [num_pages, {c['PAGE_SIZE']}, {num_kv_heads}, {head_dim}]"
        assert cache.is_contiguous() and cache.dtype == q.dtype, f"{name} must be contiguous {q.dtype}"
    assert k_cache.shape == v_cache.shape, "k_cache and v_cache differ in shape"
    assert block_table.dim() == 2 and block_table.dtype == torch.int32 and block_table.stride(1) == 1, \
        f"block_table must be [B, max_pages] int32 with unit column stride, got {tuple(block_table.shape)}"
    for name, t in (("seq_idx", seq_idx), ("positions", positions)):
        assert tuple(t.shape) == (q.shape[0],) and t.dtype == torch.int32 and t.is_contiguous(), \
            f"{name} must be a contiguous [{q.shape[0]}] int32 tensor, got {tuple(t.shape)} {t.dtype}"
    devices = {t.device for t in (q, k_cache, v_cache, block_table, seq_idx, positions, out)}
    assert len(devices) == 1, f"all tensors must be on one device, got {devices}"
    assert max(max_offset(q), max_offset(out), max_offset(k_cache), max_offset(block_table)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def launch_paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                           seq_idx: torch.Tensor, positions: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch paged_attention_kernel on grid (T, Hkv)."""
    check_paged_attention(q, k_cache, v_cache, block_table, seq_idx, positions, out, entry)
    if q.shape[0] == 0:
        return
    paged_attention_kernel[(q.shape[0], k_cache.shape[2])](
        q, k_cache, v_cache, out, block_table, seq_idx, positions, q.stride(0), q.stride(1), out.stride(0),
        out.stride(1), block_table.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        **constexpr_kwargs(entry), num_warps=entry.num_warps, num_stages=entry.num_stages)
