"""Variants of the plan's paged attention that walk each query block's KV in one program,
measured by bench/config_sweep.py only.

Not part of any plan. The plan's attention (kernels/attention.py, kernels/attention_combine.py)
cuts the KV walk into segments of SEG keys and merges them; these walk all of a block's tiles
serially and normalise at the end. ``walk`` is that single walk, the plan kernel before the
split, kept as the baseline the split pair must beat at short contexts; ``gqa`` puts the GROUP query heads of a KV head into the tile rows
(BLOCK_Q tokens x BLOCK_G heads; grid over KV heads), which reads each KV tile once per head
group. Both have the same arguments (the plan's first half less the segment scratch, plus
``out_ptr``); ``gqa`` adds the BLOCK_G constexpr. ``gqa`` is proved invariant by
tests/proofs/test_controls.py against tests/proofs/kernels/attention_head_group.toml.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["num_tokens", "stride_bt"])
def walk_attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_table_ptr, query_start_ptr,
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

