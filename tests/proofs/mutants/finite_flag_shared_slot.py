"""Mutant: the KV store's finiteness flag written to a slot another row writes too.

The control (kernels/rope_store_kv.py::rope_store_kv_kernel) writes row t's flags at row t. Here
rows 2r and 2r + 1 both write row r's flags, so a token's flag can come from another row's K/V.
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
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
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
    v = tl.load(v_ptr + row * stride_vt + kv_head * stride_vh + col, mask=is_kv, other=0.0)
    slot = tl.load(slot_ptr + row)
    dst = (slot // PAGE_SIZE) * stride_page + (slot % PAGE_SIZE) * stride_slot + kv_head * stride_head + col
    tl.store(k_cache_ptr + dst, k_rot, mask=is_kv)
    tl.store(v_cache_ptr + dst, v, mask=is_kv)

    bad = tl.zeros((BLOCK_KV,), dtype=tl.float32)
    if CHECK:  # |x| < inf is false exactly for inf and NaN; masked-off lanes hold zeros
        bad = tl.maximum(tl.max(tl.max(tl.where(tl.abs(k_rot) < float("inf"), 0.0, 1.0), axis=2), axis=1),
                         tl.max(tl.max(tl.where(tl.abs(v) < float("inf"), 0.0, 1.0), axis=2), axis=1))
    tl.store(flag_ptr + (row // 2) * stride_ft + kv_index, bad, mask=kv_index < kv_heads)  # MUTATION: two rows share a flag
