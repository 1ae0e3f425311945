"""Paged causal attention: one kernel for prefill, chunked prefill and decode.

Program (t, h) computes query token t, query head h. It reads the token's request ``b`` and
position ``pos`` (host metadata), then visits KV tiles j = 0, 1, ..., pos // PAGE_SIZE in
ascending order; tile j is page ``block_table[b, j]``. Keys past ``pos`` in the last tile are
masked on load (never read, so poisoned future slots cannot leak), scored -inf and weighted
+0. Online softmax with the -inf clamp (``m_safe``), fp32 throughout, GQA by ``h // GROUP``.

The tile sequence, masks and arithmetic of a query depend only on its position and its own
request's pages, so the same query gives the same bits in prefill, under any chunking and in
decode, whatever else is in the batch and wherever its pages sit. Scores and the weighted sum
are ``tl.sum`` reductions over one fixed [PAGE_SIZE, D] tile (no ``tl.dot``): one query row per
program, so no MMA row position is involved.
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
                           stride_head, GROUP: tl.constexpr, D: tl.constexpr, PAGE_SIZE: tl.constexpr,
                           SCALE: tl.constexpr, DTYPE: tl.constexpr):
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # seq_idx, pos: [T] int32 (request of each token, its absolute position)
    row = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // GROUP
    seq = tl.load(seq_idx_ptr + row)
    pos = tl.load(pos_ptr + row)
    offs_d = tl.arange(0, D)
    offs_p = tl.arange(0, PAGE_SIZE)
    q = tl.load(q_ptr + row * stride_qt + head * stride_qh + offs_d).to(tl.float32)
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for j in range(0, pos // PAGE_SIZE + 1):
        page = tl.load(block_table_ptr + seq * stride_bt + j)
        is_valid = j * PAGE_SIZE + offs_p <= pos
        kv = page * stride_page + offs_p[:, None] * stride_slot + kv_head * stride_head + offs_d[None, :]
        k = tl.load(k_cache_ptr + kv, mask=is_valid[:, None], other=0.0).to(tl.float32)
        scores = tl.sum(q[None, :] * k, axis=1) * SCALE
        scores = tl.where(is_valid, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=0))
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(scores - m_safe)
        v = tl.load(v_cache_ptr + kv, mask=is_valid[:, None], other=0.0).to(tl.float32)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m_i = m_new
    tl.store(out_ptr + row * stride_ot + head * stride_oh + offs_d, (acc / l_i).to(DTYPE))


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
    assert num_heads == num_kv_heads * c["GROUP"], "plan entry heads are inconsistent"
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
    """Check the contract, then launch paged_attention_kernel on grid (T, Hq)."""
    check_paged_attention(q, k_cache, v_cache, block_table, seq_idx, positions, out, entry)
    if q.shape[0] == 0:
        return
    paged_attention_kernel[(q.shape[0], q.shape[1])](
        q, k_cache, v_cache, out, block_table, seq_idx, positions, q.stride(0), q.stride(1), out.stride(0),
        out.stride(1), block_table.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        **constexpr_kwargs(entry), num_warps=entry.num_warps, num_stages=entry.num_stages)
