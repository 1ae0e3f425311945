"""Mutant: the split-KV combine kernel merging every segment of the request's KV, not the token's.

The control (kernels/attention_combine.py::attention_combine_kernel) merges segments 0 .. pos // SEG
of the token at position pos. Here it merges up to the segment of the request's last KV position:
a prefill token early in a long chunk reads segments it does not see, whose partial state the
partial kernel never stored for its row (scratch left from anything before).
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["stride_mt", "stride_mh", "stride_at", "stride_ah"])
def attention_combine_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, query_start_ptr, seq_lens_ptr, seq_idx_ptr, stride_mt,
                             stride_mh, stride_at, stride_ah, stride_ot, stride_oh, D: tl.constexpr,
                             SEG: tl.constexpr, DTYPE: tl.constexpr):
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]
    # query_start: [B + 1] int32; seq_lens: [B] int32 (KV length incl. this step); seq_idx: [T] int32
    row = tl.program_id(0)
    head = tl.program_id(1)
    seq = tl.load(seq_idx_ptr + row)
    last = tl.load(seq_lens_ptr + seq) - 1  # the request's last position, not the token's
    offs_d = tl.arange(0, D)
    state = row * stride_mt + head * stride_mh
    partial = row * stride_at + head * stride_ah + offs_d
    # Segment 0 holds key 0, which every query sees: its state is finite (l >= 1) and starts the merge;
    # every later segment up to the query's own also holds a visible key, so no maximum is -inf.
    m_all = tl.load(m_ptr + state)
    l_all = tl.load(l_ptr + state)
    acc = tl.load(acc_ptr + partial)
    for s in range(1, last // SEG + 1):
        m_s = tl.load(m_ptr + state + s)
        m_new = tl.maximum(m_all, m_s)
        alpha = tl.exp(m_all - m_new)
        beta = tl.exp(m_s - m_new)
        l_all = l_all * alpha + tl.load(l_ptr + state + s) * beta
        acc = acc * alpha + tl.load(acc_ptr + partial + s * D) * beta
        m_all = m_new
    tl.store(out_ptr + row * stride_ot + head * stride_oh + offs_d, (acc / l_all).to(DTYPE))
