"""Mutant: the plan's split-KV partial kernel with its softmax denominator summed over the tile's rows.

The control (kernels/attention.py::attention_partial_kernel) computes each row's l as the dot of
its own weights P[r, :] with a tile of ones (ones on the right: a sum over the row's keys). Here
the ones tile stands on the left, ``tl.dot(ones, P)``: element (r, j) adds column j of P over
every row of the tile, so a query's l takes the weights of the other tokens and heads of its
query block, which change with the batch and the chunking.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["num_tokens", "stride_mt", "stride_mh", "stride_at", "stride_ah", "stride_bt"])
def attention_partial_kernel(q_ptr, k_cache_ptr, v_cache_ptr, m_ptr, l_ptr, acc_ptr, block_table_ptr,
                             query_start_ptr, seq_lens_ptr, seq_idx_ptr, num_tokens, stride_qt, stride_qh, stride_mt,
                             stride_mh, stride_at, stride_ah, stride_bt, stride_page, stride_slot, stride_head,
                             GROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_Q: tl.constexpr, D: tl.constexpr,
                             PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, SEG: tl.constexpr, SCALE: tl.constexpr,
                             DTYPE: tl.constexpr, WINDOW: tl.constexpr = 0, SOFTCAP: tl.constexpr = 0.0,
                             PDL: tl.constexpr = False):
    # q: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # query_start: [B + 1] int32; seq_lens: [B] int32 (KV length incl. this step); seq_idx: [T] int32
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32 (segment stride D, unit stride on D)
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    program = tl.program_id(0)
    kv_head = tl.program_id(1)
    segment = tl.program_id(2)  # keys [segment * SEG, (segment + 1) * SEG)
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
    # Tile row r is token r // BLOCK_G of the block and query head kv_head * GROUP + r % BLOCK_G
    # (rows with r % BLOCK_G >= GROUP pad the head group to a power of two and are never stored).
    offs_r = tl.arange(0, BLOCK_Q * BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    rows = block_start + offs_r // BLOCK_G  # the block's packed tokens
    heads = kv_head * GROUP + offs_r % BLOCK_G
    is_row = (rows < block_end) & (offs_r % BLOCK_G < GROUP)
    positions = context + (rows - q_start)
    last = context + (block_end - 1 - q_start)  # the block's last position
    num_tiles = tl.where(block_end > block_start, last // BLOCK_N + 1, 0)
    # The segment's tiles, fixed by the segment alone; the block's last position only ends the walk
    # early (a segment past it visits none), so a row's tiles are the same in every launch.
    first_tile = segment * (SEG // BLOCK_N)
    end_tile = tl.minimum(num_tiles, first_tile + SEG // BLOCK_N)
    if WINDOW > 0:  # the block's first row has the earliest window start: no row sees a key before it
        lowest = tl.maximum(context + (block_start - q_start) - WINDOW + 1, 0)
        first_tile = tl.maximum(first_tile, lowest // BLOCK_N)  # tiles wholly before it are skipped
    q = tl.load(q_ptr + rows[:, None] * stride_qt + heads[:, None] * stride_qh + offs_d[None, :], mask=is_row[:, None],
                other=0.0)
    m_i = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32) - float("inf")
    # the mutation: the ones tile on the left, so each "row sum" adds a column of P over the rows
    ones = tl.full([BLOCK_Q * BLOCK_G, BLOCK_Q * BLOCK_G], 1.0, tl.float32).to(DTYPE)
    l_acc = tl.zeros([BLOCK_Q * BLOCK_G, BLOCK_N], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q * BLOCK_G, D], dtype=tl.float32)
    for j in range(first_tile, end_tile):
        keys = j * BLOCK_N + offs_n
        is_stored = keys <= last
        if WINDOW > 0:  # keys before every row's window: neither block-table entry nor slot is read
            is_stored = is_stored & (keys >= lowest)
        pages = tl.load(block_table_ptr + seq * stride_bt + keys // PAGE_SIZE, mask=is_stored, other=0)
        slots = pages * stride_page + (keys % PAGE_SIZE) * stride_slot + kv_head * stride_head
        # K loaded one key per row, as stored, then transposed for the dot
        k = tl.trans(tl.load(k_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0))
        v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0)
        scores = tl.dot(q, k, input_precision="ieee") * SCALE
        if SOFTCAP > 0:  # SOFTCAP * tanh(scores / SOFTCAP), tanh(x) = 2 / (1 + exp(-2x)) - 1
            # exp's argument clamped to 88 so it stays finite (tanh(x) rounds to -1 from x < -9 on)
            e = tl.exp(tl.minimum(-2.0 * (scores / SOFTCAP), 88.0))
            scores = SOFTCAP * (2.0 / (1.0 + e) - 1.0)
        visible = keys[None, :] <= positions[:, None]
        if WINDOW > 0:  # each row's own window start, from its own position
            visible = visible & (keys[None, :] > positions[:, None] - WINDOW)
        scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(scores - m_safe[:, None])
        l_acc = tl.dot(ones, p.to(DTYPE), l_acc * alpha[:, None], input_precision="ieee")
        acc = tl.dot(p.to(DTYPE), v, acc * alpha[:, None], input_precision="ieee")
        m_i = m_new
    l_i = tl.max(l_acc, axis=1)
    # Only rows that see a key of the segment (segment * SEG <= position) store: the combine reads
    # exactly those. Written relative to the context, since a padding row's position may pass 2**31.
    sees = is_row & (segment * SEG - context <= rows - q_start)
    state = rows * stride_mt + heads * stride_mh + segment
    tl.store(m_ptr + state, m_i, mask=sees)
    tl.store(l_ptr + state, l_i, mask=sees)
    tl.store(acc_ptr + rows[:, None] * stride_at + heads[:, None] * stride_ah + segment * D + offs_d[None, :], acc,
             mask=sees[:, None])
