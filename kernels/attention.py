"""Paged causal attention: one kernel for prefill, chunked prefill and decode.

Program (i, h) computes one *query block* for query head h (KV head h // GROUP): up to BLOCK_Q
consecutive query tokens of one request, the rows of a [BLOCK_Q, D] ``tl.dot`` tile (rows past
the block are padding, never stored). Blocks come from the packed token order, without any
host-side block list: packed block i < cdiv(T, BLOCK_Q) (program cdiv(T, BLOCK_Q) - 1 - i, so the
longest causal blocks start first) owns the tokens of [i*BLOCK_Q, (i+1)*BLOCK_Q) that belong to
the request of token i*BLOCK_Q; program cdiv(T, BLOCK_Q) + b owns the tokens of
request b from its first token up to the next multiple of BLOCK_Q, when that first token is not
itself a multiple (so every token has exactly one program, and decode batches of one token per
request run one program per request and head). A token's request comes from ``seq_idx``; its
position is ``seq_lens[b] - q_len_b + (t - query_start_loc[b])``.

The block visits KV tiles of BLOCK_N consecutive key positions, j = 0, 1, ..., last // BLOCK_N,
in ascending order, where ``last`` is the position of the block's last token. Each key's page is
``block_table[b, key // PAGE_SIZE]``; keys past ``last`` are masked on load (neither their
block-table entry nor their slot is read, so poisoned future slots cannot leak). A row scores
keys past its own position -inf and weights them +0. Online softmax in fp32 with the -inf clamp
(``m_safe``); scores and the weighted sum are ``tl.dot`` on tensor cores in bf16 (P rounded to
bf16, fp32 accumulation into the running output) and IEEE fp32 dots in fp32.

Why a query's bits do not depend on the batch or the chunking: its row sees the same key tiles
0 .. pos // BLOCK_N with the same values in any launch (its q row, its request's KV up to pos);
tiles of its block past its own last tile are fully masked for it and are exact identity steps
(max(m, -inf) = m, alpha = exp(+0) = 1, p = exp(-inf) = +0, l * 1 + (+0) = l with l > 0, and
``tl.dot`` with an all-+0 left operand returns its accumulator); keys of its last tile past pos
get p = +0, whose terms do not change the dot when the V rows there are finite. Those rows are
the request's own KV at positions up to the block's last token, written before this launch;
that they are finite (no inf/NaN activations) is a premise of the contract
(kernels/contracts/paged_attention.toml), unlike the unwritten slots, which may hold anything.
A row's position inside the tile changes with the chunking; ``tl.dot`` is trusted to give a
row the same bits wherever it sits (tests/gpu checks it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, constexpr_kwargs, dtype_name, max_offset

__all__ = ["paged_attention_kernel", "check_paged_attention", "launch_paged_attention"]


@triton.jit(do_not_specialize=["num_tokens", "stride_bt"])
def paged_attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_table_ptr, query_start_ptr,
                           seq_lens_ptr, seq_idx_ptr, num_tokens, stride_qt, stride_qh, stride_ot, stride_oh,
                           stride_bt, stride_page, stride_slot, stride_head, GROUP: tl.constexpr,
                           BLOCK_Q: tl.constexpr, D: tl.constexpr, PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
                           SCALE: tl.constexpr, DTYPE: tl.constexpr):
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # query_start: [B + 1] int32; seq_lens: [B] int32 (KV length incl. this step); seq_idx: [T] int32
    program = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // GROUP
    num_packed = tl.cdiv(num_tokens, BLOCK_Q)
    is_packed = program < num_packed  # else: the program of request (program - num_packed)'s first block
    packed_start = tl.where(is_packed, num_packed - 1 - program, 0) * BLOCK_Q  # the longest causal blocks first
    seq = tl.where(is_packed, tl.load(seq_idx_ptr + packed_start, mask=is_packed, other=0), program - num_packed)
    q_start = tl.load(query_start_ptr + seq)
    q_end = tl.load(query_start_ptr + seq + 1)
    context = tl.load(seq_lens_ptr + seq) - (q_end - q_start)  # KV positions cached before this step
    first_end = tl.where(q_start % BLOCK_Q == 0, q_start, tl.minimum(q_end, (q_start // BLOCK_Q + 1) * BLOCK_Q))
    block_start = tl.where(is_packed, packed_start, q_start)
    block_end = tl.where(is_packed, tl.minimum(q_end, packed_start + BLOCK_Q), first_end)
    offs_q = tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    rows = block_start + offs_q  # the block's packed tokens
    is_row = rows < block_end
    positions = context + (rows - q_start)
    last = context + (block_end - 1 - q_start)  # the block's last position
    num_tiles = tl.where(block_end > block_start, last // BLOCK_N + 1, 0)
    q = tl.load(q_ptr + rows[:, None] * stride_qt + head * stride_qh + offs_d[None, :], mask=is_row[:, None],
                other=0.0)
    m_i = tl.zeros([BLOCK_Q], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_Q], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q, D], dtype=tl.float32)
    for j in range(0, num_tiles):
        keys = j * BLOCK_N + offs_n
        is_stored = keys <= last
        pages = tl.load(block_table_ptr + seq * stride_bt + keys // PAGE_SIZE, mask=is_stored, other=0)
        slots = pages * stride_page + (keys % PAGE_SIZE) * stride_slot + kv_head * stride_head
        k = tl.load(k_cache_ptr + slots[None, :] + offs_d[:, None], mask=is_stored[None, :], other=0.0)
        v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0)
        scores = tl.dot(q, k, input_precision="ieee") * SCALE
        scores = tl.where(keys[None, :] <= positions[:, None], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(scores - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(DTYPE), v, acc * alpha[:, None], input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + rows[:, None] * stride_ot + head * stride_oh + offs_d[None, :], out.to(DTYPE),
             mask=is_row[:, None])


def check_paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                          query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor,
                          out: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of paged_attention_kernel (shared with the CPU path).

    Premises not checked here (kernels/metadata.py checks them when metadata checks are on):
    query_start_loc starts at 0, never decreases and ends at T; seq_lens[b] >= q_len_b; seq_idx
    names each token's request; every page a request visits,
    ``block_table[b, 0 .. (seq_lens[b] - 1) // PAGE_SIZE]``, is in [0, num_pages).
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
    num_seqs = block_table.shape[0]
    for name, t, length in (("query_start_loc", query_start_loc, num_seqs + 1), ("seq_lens", seq_lens, num_seqs),
                            ("seq_idx", seq_idx, q.shape[0])):
        assert tuple(t.shape) == (length,) and t.dtype == torch.int32 and t.is_contiguous(), \
            f"{name} must be a contiguous [{length}] int32 tensor, got {tuple(t.shape)} {t.dtype}"
    devices = {t.device for t in (q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out)}
    assert len(devices) == 1, f"all tensors must be on one device, got {devices}"
    assert max(max_offset(q), max_offset(out), max_offset(k_cache), max_offset(block_table)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def launch_paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                           query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor,
                           out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch paged_attention_kernel on grid (cdiv(T, BLOCK_Q) + B, Hq)."""
    check_paged_attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, entry)
    if q.shape[0] == 0:
        return
    grid = (triton.cdiv(q.shape[0], entry.constexpr_dict()["BLOCK_Q"]) + block_table.shape[0], q.shape[1])
    paged_attention_kernel[grid](
        q, k_cache, v_cache, out, block_table, query_start_loc, seq_lens, seq_idx, q.shape[0], q.stride(0), q.stride(1),
        out.stride(0), out.stride(1), block_table.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        **constexpr_kwargs(entry), num_warps=entry.num_warps, num_stages=entry.num_stages)
