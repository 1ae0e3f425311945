"""Mutant: RoPE with the KV write that loads its V rows before the grid-dependency wait.

The plan's kernel (kernels/rope_store_kv.py) reads only the token's position and slot and the
cos/sin table before the wait, which its contract marks immutable. V is the qkv projection the
launch just before writes: under programmatic dependent launch that launch may still be running,
so the copy written to the cache could be stale.
"""

import triton
import triton.language as tl


@triton.jit
def rope_store_kv_kernel(q_ptr, k_ptr, v_ptr, q_out_ptr, k_cache_ptr, v_cache_ptr, pos_ptr, cs_ptr, slot_ptr,
                         flag_ptr, q_heads, kv_heads, stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                         stride_ot, stride_oh, stride_cs, stride_page, stride_slot, stride_head, stride_ft,
                         HALF: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_KV: tl.constexpr, PAGE_SIZE: tl.constexpr,
                         CHECK: tl.constexpr, DTYPE: tl.constexpr, PDL: tl.constexpr = False):
    # q, q_out: [T, Hq, 2*HALF]; k, v: [T, Hkv, 2*HALF]; pos, slot: [T] int64; cs: [max_pos, 2*HALF] fp32
    # k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, 2*HALF] (same strides); flag: [T, Hkv] fp32, unit head stride
    # The token's position and slot (staged before the forward) and the cos/sin table (the model's) are
    # written by no launch of the forward (contract: immutable), so they are read before the PDL wait.
    row = tl.program_id(0)
    q_head = (tl.program_id(1) * BLOCK_Q + tl.arange(0, BLOCK_Q))[:, None, None]
    kv_index = tl.program_id(1) * BLOCK_KV + tl.arange(0, BLOCK_KV)
    kv_head = kv_index[:, None, None]
    part = tl.arange(0, 2)[None, :, None]  # 0: a head's first half, 1: its second
    offs = tl.arange(0, HALF)[None, None, :]
    col = part * HALF + offs  # [1, 2, HALF]: every column of a head, so each tensor takes one store
    partner = (1 - part) * HALF + offs  # the column rotate-half pairs it with
    is_first = part == 0
    pos = tl.load(pos_ptr + row)
    cos = tl.load(cs_ptr + pos * stride_cs + offs)
    sin = tl.load(cs_ptr + pos * stride_cs + HALF + offs)
    slot = tl.load(slot_ptr + row)
    v = tl.load(v_ptr + row * stride_vt + kv_head * stride_vh + col, mask=(kv_head < kv_heads) & (col < 2 * HALF),
                other=0.0)  # the mutation: v is the previous launch's output
    if PDL:  # launched early (programmatic dependent launch): nothing else before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    is_q = (q_head < q_heads) & (col < 2 * HALF)
    is_kv = (kv_head < kv_heads) & (col < 2 * HALF)

    # out[:HALF] = x1*cos - x2*sin and out[HALF:] = x2*cos - (-x1)*sin = x2*cos + x1*sin, exactly
    q_src = q_ptr + row * stride_qt + q_head * stride_qh
    q = tl.load(q_src + col, mask=is_q, other=0.0).to(tl.float32)
    q_pair = tl.load(q_src + partner, mask=is_q, other=0.0).to(tl.float32)
    q_rot = q * cos - tl.where(is_first, q_pair, -q_pair) * sin
    tl.store(q_out_ptr + row * stride_ot + q_head * stride_oh + col, q_rot.to(DTYPE), mask=is_q)

    k_src = k_ptr + row * stride_kt + kv_head * stride_kh
    k = tl.load(k_src + col, mask=is_kv, other=0.0).to(tl.float32)
    k_pair = tl.load(k_src + partner, mask=is_kv, other=0.0).to(tl.float32)
    k_rot = (k * cos - tl.where(is_first, k_pair, -k_pair) * sin).to(DTYPE)
    dst = (slot // PAGE_SIZE) * stride_page + (slot % PAGE_SIZE) * stride_slot + kv_head * stride_head + col
    tl.store(k_cache_ptr + dst, k_rot, mask=is_kv)
    tl.store(v_cache_ptr + dst, v, mask=is_kv)

    bad = tl.zeros((BLOCK_KV,), dtype=tl.float32)
    if CHECK:  # |x| < inf is false exactly for inf and NaN; masked-off lanes hold zeros
        bad = tl.maximum(tl.max(tl.max(tl.where(tl.abs(k_rot) < float("inf"), 0.0, 1.0), axis=2), axis=1),
                         tl.max(tl.max(tl.where(tl.abs(v) < float("inf"), 0.0, 1.0), axis=2), axis=1))
    tl.store(flag_ptr + row * stride_ft + kv_index, bad, mask=kv_index < kv_heads)

