"""Mutant: attention in one kernel whose segment merge rescales by the query block's maximum.

The control (kernels/attention_prefill.py::attention_prefill_kernel) merges a row's segment state
with the row's own maxima, m' = max(m, m_s), as the pair's combine does. Here the new maximum is
taken over the segment maxima of every row of the block: a row's rescaling then depends on the
other tokens (and heads) its query block holds, that is, on the batch and the chunking.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["num_tokens", "stride_ot", "stride_oh", "stride_ft", "stride_bt"])
def attention_prefill_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, flag_ptr, block_table_ptr, query_start_ptr,
                             seq_lens_ptr, seq_idx_ptr, num_tokens, stride_qt, stride_qh, stride_ot, stride_oh,
                             stride_ft, stride_bt, stride_page, stride_slot, stride_head,
                             GROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_Q: tl.constexpr, D: tl.constexpr,
                             PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, SEG: tl.constexpr, SCALE: tl.constexpr,
                             DTYPE: tl.constexpr, CHECK: tl.constexpr, SOFTCAP: tl.constexpr = 0.0,
                             PDL: tl.constexpr = False):
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # flag: [T, Hq] float32 (unit stride on the head); query_start: [B + 1] int32; seq_lens: [B] int32
    # (KV length incl. this step); seq_idx: [T] int32
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    program = tl.program_id(0)
    kv_head = tl.program_id(1)
    # The query block of the pair's program (program, kv_head, *): kernels/attention.py says why
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
    ones = tl.full([BLOCK_N, 16], 1.0, tl.float32).to(DTYPE)  # l as a dot, as in the pair
    m_all = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32) - float("inf")
    l_all = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32)
    acc_all = tl.zeros([BLOCK_Q * BLOCK_G, D], dtype=tl.float32)
    bad = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32)
    for segment in range(0, tl.cdiv(num_tiles, SEG // BLOCK_N)):
        # program (block, kv_head, segment) of the pair
        first_tile = segment * (SEG // BLOCK_N)
        end_tile = tl.minimum(num_tiles, first_tile + SEG // BLOCK_N)
        m_i = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32) - float("inf")
        l_acc = tl.zeros([BLOCK_Q * BLOCK_G, 16], dtype=tl.float32)
        acc = tl.zeros([BLOCK_Q * BLOCK_G, D], dtype=tl.float32)
        for j in range(first_tile, end_tile):
            keys = j * BLOCK_N + offs_n
            is_stored = keys <= last
            pages = tl.load(block_table_ptr + seq * stride_bt + keys // PAGE_SIZE, mask=is_stored, other=0)
            slots = pages * stride_page + (keys % PAGE_SIZE) * stride_slot + kv_head * stride_head
            k = tl.trans(tl.load(k_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0))
            v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0)
            scores = tl.dot(q, k, input_precision="ieee") * SCALE
            if SOFTCAP > 0:
                e = tl.exp(tl.minimum(-2.0 * (scores / SOFTCAP), 88.0))
                scores = SOFTCAP * (2.0 / (1.0 + e) - 1.0)
            scores = tl.where(keys[None, :] <= positions[:, None], scores, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(scores, axis=1))
            m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
            alpha = tl.exp(m_i - m_safe)
            p = tl.exp(scores - m_safe[:, None])
            l_acc = tl.dot(p.to(DTYPE), ones, l_acc * alpha[:, None], input_precision="ieee")
            acc = tl.dot(p.to(DTYPE), v, acc * alpha[:, None], input_precision="ieee")
            m_i = m_new
        l_i = tl.max(l_acc, axis=1)
        # the combine's merge, for the rows it would merge this segment into (written relative to
        # the context, as the pair's store mask, since a padding row's position may pass 2**31)
        is_merged = segment * SEG - context <= rows - q_start
        is_first = segment == 0
        if CHECK:  # a segment of m = -inf (no finite score) would otherwise merge with weight 0
            bad = tl.where(is_merged, tl.maximum(bad, tl.where(tl.abs(m_i) < float("inf"), 0.0, 1.0)), bad)
        m_new = tl.maximum(m_all, tl.max(m_i, axis=0))  # the block's largest segment max, not the row's
        alpha = tl.exp(m_all - m_new)
        beta = tl.exp(m_i - m_new)
        l_merged = l_all * alpha + l_i * beta
        acc_merged = acc_all * alpha[:, None] + acc * beta[:, None]
        m_all = tl.where(is_merged, tl.where(is_first, m_i, m_new), m_all)
        l_all = tl.where(is_merged, tl.where(is_first, l_i, l_merged), l_all)
        acc_all = tl.where(is_merged[:, None], tl.where(is_first[:, None], acc, acc_merged), acc_all)
    quotient = acc_all / l_all[:, None]
    out = quotient.to(DTYPE)
    tl.store(out_ptr + rows[:, None] * stride_ot + heads[:, None] * stride_oh + offs_d[None, :], out,
             mask=is_row[:, None])
    if CHECK:  # a non-finite l or acc of any merged segment stays non-finite through the merge
        bad = tl.maximum(bad, tl.where(tl.abs(l_all) < float("inf"), 0.0, 1.0))
        bad = tl.maximum(bad, tl.max(tl.where(tl.abs(quotient) < float("inf"), 0.0, 1.0), axis=1))
        bad = tl.maximum(bad, tl.max(tl.where(tl.abs(out) < float("inf"), 0.0, 1.0), axis=1))
    tl.store(flag_ptr + rows * stride_ft + heads, bad, mask=is_row)
