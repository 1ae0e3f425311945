"""Mutant: the merge with several heads a program reading another token's segment values.

The control (kernels/attention_combine.py::attention_combine_kernel, the branch of BLOCK_H > 1
that prefill launches take) merges the states of its own token. Here the segments after the first
are read at the request's first token, so a token's output mixes in another row's values: which
row that is depends on how the request was chunked and packed.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["stride_mt", "stride_mh", "stride_at", "stride_ah"])
def attention_combine_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, flag_ptr, query_start_ptr, seq_lens_ptr, seq_idx_ptr,
                             stride_mt, stride_mh, stride_at, stride_ah, stride_ot, stride_oh, stride_ft,
                             D: tl.constexpr, SEG: tl.constexpr, DTYPE: tl.constexpr, CHECK: tl.constexpr,
                             WINDOW: tl.constexpr = 0, PDL: tl.constexpr = False, BLOCK_H: tl.constexpr = 1):
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]
    # flag: [T, Hq] float32 (unit stride on the head); BLOCK_H divides Hq
    # query_start: [B + 1] int32; seq_lens: [B] int32 (KV length incl. this step); seq_idx: [T] int32
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0)
    seq = tl.load(seq_idx_ptr + row)
    q_start = tl.load(query_start_ptr + seq)
    q_end = tl.load(query_start_ptr + seq + 1)
    position = tl.load(seq_lens_ptr + seq) - (q_end - q_start) + (row - q_start)
    offs_d = tl.arange(0, D)
    # The first merged segment holds the first key the query sees (key 0, or with a window its
    # window start): its state is finite (l >= 1) and starts the merge; every later segment up to
    # the query's own also holds a visible key (the visible keys are contiguous), so no maximum is -inf.
    first = 0
    if WINDOW > 0:
        first = tl.maximum(position - WINDOW + 1, 0) // SEG
    if BLOCK_H == 1:
        # One head (decode steps): scalar states. The same per-element operations as the branch
        # below, written for one head because the [1, D] form of that branch made decode steps
        # slower (about 3% at 16K keys on an H100).
        head = tl.program_id(1)
        state = row * stride_mt + head * stride_mh
        partial = row * stride_at + head * stride_ah + offs_d
        m_all = tl.load(m_ptr + state + first)
        l_all = tl.load(l_ptr + state + first)
        acc = tl.load(acc_ptr + partial + first * D)
        bad = 0.0
        if CHECK:  # |x| < inf is false exactly for inf and NaN
            bad = tl.where(tl.abs(m_all) < float("inf"), 0.0, 1.0)
        for s in range(first + 1, position // SEG + 1):
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
    else:
        heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)  # [BLOCK_H]: this program's heads
        state = row * stride_mt + heads * stride_mh  # [BLOCK_H]
        partial = row * stride_at + heads[:, None] * stride_ah + offs_d[None, :]  # [BLOCK_H, D]
        m_all = tl.load(m_ptr + state + first)
        l_all = tl.load(l_ptr + state + first)
        acc = tl.load(acc_ptr + partial + first * D)
        bad = tl.zeros([BLOCK_H], dtype=tl.float32)
        if CHECK:
            bad = tl.where(tl.abs(m_all) < float("inf"), 0.0, 1.0)
        for s in range(first + 1, position // SEG + 1):
            m_s = tl.load(m_ptr + state + s)
            if CHECK:
                bad = tl.maximum(bad, tl.where(tl.abs(m_s) < float("inf"), 0.0, 1.0))
            m_new = tl.maximum(m_all, m_s)
            alpha = tl.exp(m_all - m_new)
            beta = tl.exp(m_s - m_new)
            l_all = l_all * alpha + tl.load(l_ptr + state + s) * beta
            # the mutation: later segments' values read at the request's first token, not at `row`
            acc = acc * alpha[:, None] + tl.load(acc_ptr + q_start * stride_at + heads[:, None] * stride_ah
                                                 + offs_d[None, :] + s * D) * beta[:, None]
            m_all = m_new
        quotient = acc / l_all[:, None]
        out = quotient.to(DTYPE)
        tl.store(out_ptr + row * stride_ot + heads[:, None] * stride_oh + offs_d[None, :], out)
        if CHECK:
            bad = tl.maximum(bad, tl.where(tl.abs(l_all) < float("inf"), 0.0, 1.0))
            bad = tl.maximum(bad, tl.max(tl.where(tl.abs(quotient) < float("inf"), 0.0, 1.0), axis=1))
            bad = tl.maximum(bad, tl.max(tl.where(tl.abs(out) < float("inf"), 0.0, 1.0), axis=1))
        tl.store(flag_ptr + row * stride_ft + heads, bad)
