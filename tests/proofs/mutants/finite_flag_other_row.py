"""Mutant: the combine kernel's finiteness flag read from another token's state.

The control (kernels/attention_combine.py::attention_combine_kernel) flags a (token, head) from
the states it merges itself. Here the flag starts from segment 0's m of the even row of its pair, so
the flag of a token depends on another row of the batch.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["stride_mt", "stride_mh", "stride_at", "stride_ah"])
def attention_combine_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, flag_ptr, query_start_ptr, seq_lens_ptr, seq_idx_ptr,
                             stride_mt, stride_mh, stride_at, stride_ah, stride_ot, stride_oh, stride_ft,
                             D: tl.constexpr, SEG: tl.constexpr, DTYPE: tl.constexpr, CHECK: tl.constexpr):
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]
    # flag: [T, Hq] float32 (unit stride on the head)
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
    bad = 0.0
    if CHECK:  # MUTATION: segment 0's m of the even row of the pair, not the token's own
        bad = tl.where(tl.abs(tl.load(m_ptr + (row // 2 * 2) * stride_mt + head * stride_mh)) < float("inf"), 0.0, 1.0)
    for s in range(1, position // SEG + 1):
        m_s = tl.load(m_ptr + state + s)
        if CHECK:  # a segment of m = -inf (no finite score) would otherwise merge with weight 0
            bad = tl.maximum(bad, tl.where(tl.abs(m_s) < float("inf"), 0.0, 1.0))
        m_new = tl.maximum(m_all, m_s)
        alpha = tl.exp(m_all - m_new)
        beta = tl.exp(m_s - m_new)
        l_all = l_all * alpha + tl.load(l_ptr + state + s) * beta
        acc = acc * alpha + tl.load(acc_ptr + partial + s * D) * beta
        m_all = m_new
    quotient = acc / l_all
    out = quotient.to(DTYPE)
    tl.store(out_ptr + row * stride_ot + head * stride_oh + offs_d, out)
    if CHECK:  # a non-finite l or acc of any merged segment stays non-finite through the merge
        bad = tl.maximum(bad, tl.where(tl.abs(l_all) < float("inf"), 0.0, 1.0))
        bad = tl.maximum(bad, tl.max(tl.where(tl.abs(quotient) < float("inf"), 0.0, 1.0), axis=0))
        bad = tl.maximum(bad, tl.max(tl.where(tl.abs(out) < float("inf"), 0.0, 1.0), axis=0))
    tl.store(flag_ptr + row * stride_ft + head, bad)

