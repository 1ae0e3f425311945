"""Honest UNKNOWN: the causal tile attention with an unfused `acc * alpha + tl.dot(p, v)` update.

An extra (fully masked) key tile adds tl.dot(+0, V), whose zero may be +0 or -0, to an accumulator
that may be -0: not provably an exact identity, so the verifier must answer UNKNOWN, not VERIFIED.
"""

import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, block_table_ptr, query_start_ptr, context_len_ptr,
                     sm_scale, stride_qt, stride_kt, stride_bt, stride_ot,
                     NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                     PAGE_SIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    req = tl.program_id(0)
    tile = tl.program_id(1)
    head = tl.program_id(2)
    kv_head = head // GROUP
    q_start = tl.load(query_start_ptr + req)
    q_len = tl.load(query_start_ptr + req + 1) - q_start
    cached = tl.load(context_len_ptr + req)
    offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_mask = offs_m < q_len
    q_pos = cached + offs_m
    q = tl.load(q_ptr + (q_start + offs_m)[:, None] * stride_qt + head * HEAD_DIM + offs_d[None, :],
                mask=row_mask[:, None], other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    kv_end = cached + tl.minimum((tile + 1) * BLOCK_M, q_len)
    for start in range(0, kv_end, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        n_mask = offs_n < kv_end
        page = tl.load(block_table_ptr + req * stride_bt + offs_n // PAGE_SIZE, mask=n_mask, other=0)
        slot = page * PAGE_SIZE + offs_n % PAGE_SIZE
        k = tl.load(k_cache_ptr + slot[None, :] * stride_kt + kv_head * HEAD_DIM + offs_d[:, None],
                    mask=n_mask[None, :], other=0.0)
        s = tl.dot(q, k, input_precision="ieee") * sm_scale
        s = tl.where(offs_n[None, :] <= q_pos[:, None], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_cache_ptr + slot[:, None] * stride_kt + kv_head * HEAD_DIM + offs_d[None, :],
                    mask=n_mask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + (q_start + offs_m)[:, None] * stride_ot + head * HEAD_DIM + offs_d[None, :], out,
             mask=row_mask[:, None])
