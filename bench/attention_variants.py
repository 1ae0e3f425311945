"""Experimental variants of kernels/attention.py's kernel, measured by bench/config_sweep.py only.

Not part of any plan: ``ktrans`` loads K as [BLOCK_N, D] (like V) and transposes it in the dot;
``vlate`` loads V after the softmax (the order of an earlier revision); ``gqa`` puts the GROUP
query heads of a KV head into the tile rows (BLOCK_Q tokens x BLOCK_G heads; grid over KV heads),
which reads each KV tile once per head group. Each has the plan kernel's arguments; ``gqa`` adds
the BLOCK_G constexpr.

``split`` cuts the serial KV walk of long contexts into segments of SEG keys at fixed boundaries
(multiples of SEG, never sized from the batch): ``split_partial_kernel`` is the plan kernel's
program on the tiles of one segment, storing each row's unnormalised softmax state, and
``split_combine_kernel`` merges a token's segments 0 .. pos // SEG in ascending order. A query's
reduction order then depends only on its position, not on the chunking or the batch, in prefill,
chunked prefill and decode alike. ``gqa`` and the ``split`` pair are proved invariant by
tests/proofs/test_controls.py against contracts in tests/proofs/kernels/.
"""

import torch
import triton
import triton.language as tl

from kernels.attention import check_paged_attention
from kernels.plan import PlanEntry


@triton.jit(do_not_specialize=["num_tokens", "stride_bt"])
def ktrans_attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_table_ptr, query_start_ptr,
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
        k = tl.load(k_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0)
        v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee") * SCALE
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


@triton.jit(do_not_specialize=["num_tokens", "stride_bt"])
def vlate_attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_table_ptr, query_start_ptr,
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
        scores = tl.dot(q, k, input_precision="ieee") * SCALE
        scores = tl.where(keys[None, :] <= positions[:, None], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(scores - m_safe[:, None])
        v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(DTYPE), v, acc * alpha[:, None], input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + rows[:, None] * stride_ot + head * stride_oh + offs_d[None, :], out.to(DTYPE),
             mask=is_row[:, None])


@triton.jit(do_not_specialize=["num_tokens", "stride_bt"])
def gqa_attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_table_ptr, query_start_ptr,
                         seq_lens_ptr, seq_idx_ptr, num_tokens, stride_qt, stride_qh, stride_ot, stride_oh,
                         stride_bt, stride_page, stride_slot, stride_head, GROUP: tl.constexpr,
                         BLOCK_G: tl.constexpr, BLOCK_Q: tl.constexpr, D: tl.constexpr, PAGE_SIZE: tl.constexpr,
                         BLOCK_N: tl.constexpr,
                         SCALE: tl.constexpr, DTYPE: tl.constexpr):
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # query_start: [B + 1] int32; seq_lens: [B] int32 (KV length incl. this step); seq_idx: [T] int32
    program = tl.program_id(0)
    kv_head = tl.program_id(1)
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
    offs_r = tl.arange(0, BLOCK_Q * BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    rows = block_start + offs_r // BLOCK_G  # the block's packed tokens
    heads = kv_head * GROUP + offs_r % BLOCK_G
    is_row = (rows < block_end) & (offs_r % BLOCK_G < GROUP)
    positions = context + (rows - q_start)
    last = context + (block_end - 1 - q_start)  # the block's last position
    num_tiles = tl.where(block_end > block_start, last // BLOCK_N + 1, 0)
    q = tl.load(q_ptr + rows[:, None] * stride_qt + heads[:, None] * stride_qh + offs_d[None, :], mask=is_row[:, None],
                other=0.0)
    m_i = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q * BLOCK_G, D], dtype=tl.float32)
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
    tl.store(out_ptr + rows[:, None] * stride_ot + heads[:, None] * stride_oh + offs_d[None, :], out.to(DTYPE),
             mask=is_row[:, None])


@triton.jit(do_not_specialize=["num_tokens", "stride_mt", "stride_mh", "stride_at", "stride_ah", "stride_bt"])
def split_partial_kernel(q_ptr, k_cache_ptr, v_cache_ptr, m_ptr, l_ptr, acc_ptr, block_table_ptr, query_start_ptr,
                         seq_lens_ptr, seq_idx_ptr, num_tokens, stride_qt, stride_qh, stride_mt, stride_mh, stride_at,
                         stride_ah, stride_bt, stride_page, stride_slot, stride_head, GROUP: tl.constexpr,
                         BLOCK_Q: tl.constexpr, D: tl.constexpr, PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
                         SEG: tl.constexpr, SCALE: tl.constexpr, DTYPE: tl.constexpr):
    # q: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # query_start: [B + 1] int32; seq_lens: [B] int32 (KV length incl. this step); seq_idx: [T] int32
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32 (segment stride D, unit stride on D)
    program = tl.program_id(0)
    head = tl.program_id(1)
    segment = tl.program_id(2)  # keys [segment * SEG, (segment + 1) * SEG)
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
    # The segment's tiles, fixed by the segment alone; the block's last position only ends the walk
    # early (a segment past it visits none), so a row's tiles are the same in every launch.
    first_tile = segment * (SEG // BLOCK_N)
    end_tile = tl.minimum(num_tiles, first_tile + SEG // BLOCK_N)
    q = tl.load(q_ptr + rows[:, None] * stride_qt + head * stride_qh + offs_d[None, :], mask=is_row[:, None],
                other=0.0)
    m_i = tl.zeros([BLOCK_Q], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_Q], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q, D], dtype=tl.float32)
    for j in range(first_tile, end_tile):
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
    # Only rows that see a key of the segment store: the combine reads exactly those.
    sees = is_row & (segment * SEG <= positions)
    state = rows * stride_mt + head * stride_mh + segment
    tl.store(m_ptr + state, m_i, mask=sees)
    tl.store(l_ptr + state, l_i, mask=sees)
    tl.store(acc_ptr + rows[:, None] * stride_at + head * stride_ah + segment * D + offs_d[None, :], acc,
             mask=sees[:, None])


@triton.jit(do_not_specialize=["stride_mt", "stride_mh", "stride_at", "stride_ah"])
def split_combine_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, query_start_ptr, seq_lens_ptr, seq_idx_ptr, stride_mt,
                         stride_mh, stride_at, stride_ah, stride_ot, stride_oh, D: tl.constexpr, SEG: tl.constexpr,
                         DTYPE: tl.constexpr):
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]
    # query_start: [B + 1] int32; seq_lens: [B] int32 (KV length incl. this step); seq_idx: [T] int32
    row = tl.program_id(0)
    head = tl.program_id(1)
    seq = tl.load(seq_idx_ptr + row)
    q_start = tl.load(query_start_ptr + seq)
    q_end = tl.load(query_start_ptr + seq + 1)
    position = tl.load(seq_lens_ptr + seq) - (q_end - q_start) + (row - q_start)
    offs_d = tl.arange(0, D)
    state = row * stride_mt + head * stride_mh
    partial = row * stride_at + head * stride_ah + offs_d
    # Segment 0 holds key 0, which every query sees: its state is finite (l >= 1) and starts the merge;
    # every later segment up to the query's own also holds a visible key, so no maximum is -inf.
    m_all = tl.load(m_ptr + state)
    l_all = tl.load(l_ptr + state)
    acc = tl.load(acc_ptr + partial)
    for s in range(1, position // SEG + 1):
        m_s = tl.load(m_ptr + state + s)
        m_new = tl.maximum(m_all, m_s)
        alpha = tl.exp(m_all - m_new)
        beta = tl.exp(m_s - m_new)
        l_all = l_all * alpha + tl.load(l_ptr + state + s) * beta
        acc = acc * alpha + tl.load(acc_ptr + partial + s * D) * beta
        m_all = m_new
    tl.store(out_ptr + row * stride_ot + head * stride_oh + offs_d, (acc / l_all).to(DTYPE))


def launch_split_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                           query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor,
                           out: torch.Tensor, entry: PlanEntry) -> None:
    """Check the plan kernel's contract, then launch the split pair: split_partial_kernel on grid
    (cdiv(T, BLOCK_Q) + B, Hq, NUM_SEG) and split_combine_kernel on grid (T, Hq).

    NUM_SEG = cdiv(max_pages * PAGE_SIZE, SEG) comes from the block table's width, so every step
    of a captured graph (one table width) runs one grid; programs of segments past a request's
    length visit no tile and store nothing.
    """
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    check_paged_attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, entry)
    c = entry.constexpr_dict()
    assert c["SEG"] % c["BLOCK_N"] == 0, f"SEG {c['SEG']} is not a multiple of BLOCK_N {c['BLOCK_N']}"
    num_tokens, num_heads, head_dim = q.shape
    if num_tokens == 0:
        return
    num_segs = triton.cdiv(block_table.shape[1] * c["PAGE_SIZE"], c["SEG"])
    m = torch.empty(num_tokens, num_heads, num_segs, dtype=torch.float32, device=q.device)  # [T, Hq, NUM_SEG]
    l = torch.empty_like(m)
    acc = torch.empty(num_tokens, num_heads, num_segs, head_dim, dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(num_tokens, c["BLOCK_Q"]) + block_table.shape[0], num_heads, num_segs)
    split_partial_kernel[grid](
        q, k_cache, v_cache, m, l, acc, block_table, query_start_loc, seq_lens, seq_idx, num_tokens, q.stride(0),
        q.stride(1), m.stride(0), m.stride(1), acc.stride(0), acc.stride(1), block_table.stride(0), k_cache.stride(0),
        k_cache.stride(1), k_cache.stride(2), GROUP=c["GROUP"], BLOCK_Q=c["BLOCK_Q"], D=c["D"],
        PAGE_SIZE=c["PAGE_SIZE"], BLOCK_N=c["BLOCK_N"], SEG=c["SEG"], SCALE=c["SCALE"],
        DTYPE=getattr(tl, c["DTYPE"]), num_warps=entry.num_warps, num_stages=entry.num_stages)
    # One warp: a program merges a few [D] rows.
    split_combine_kernel[(num_tokens, num_heads)](
        m, l, acc, out, query_start_loc, seq_lens, seq_idx, m.stride(0), m.stride(1), acc.stride(0), acc.stride(1),
        out.stride(0), out.stride(1), D=c["D"], SEG=c["SEG"], DTYPE=getattr(tl, c["DTYPE"]), num_warps=1)
