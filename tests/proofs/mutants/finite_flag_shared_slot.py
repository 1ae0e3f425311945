"""Mutant: the KV store's finiteness flag written to a slot another row writes too.

The control (kernels/store_kv.py::store_kv_kernel) writes row t's flag at row t. Here rows 2r
and 2r + 1 both write row r's flag, so a token's flag can come from another row's K/V.
"""

import triton
import triton.language as tl


@triton.jit
def store_kv_kernel(k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_ptr, flag_ptr, stride_kt, stride_kh, stride_vt,
                    stride_vh, stride_page, stride_slot, stride_head, stride_ft, D: tl.constexpr,
                    PAGE_SIZE: tl.constexpr, CHECK: tl.constexpr):
    # k, v: [T, Hkv, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D] (same strides); slot: [T] int64
    # flag: [T, Hkv] float32 (unit stride on the head)
    row = tl.program_id(0)
    head = tl.program_id(1)
    offs = tl.arange(0, D)
    slot = tl.load(slot_ptr + row)
    page = slot // PAGE_SIZE
    offset = slot % PAGE_SIZE
    dst = page * stride_page + offset * stride_slot + head * stride_head + offs
    k = tl.load(k_ptr + row * stride_kt + head * stride_kh + offs)
    v = tl.load(v_ptr + row * stride_vt + head * stride_vh + offs)
    tl.store(k_cache_ptr + dst, k)
    tl.store(v_cache_ptr + dst, v)
    bad = 0.0
    if CHECK:  # |x| < inf is false exactly for inf and NaN
        bad = tl.maximum(tl.max(tl.where(tl.abs(k) < float("inf"), 0.0, 1.0), axis=0),
                         tl.max(tl.where(tl.abs(v) < float("inf"), 0.0, 1.0), axis=0))
    tl.store(flag_ptr + (row // 2) * stride_ft + head, bad)  # MUTATION: two rows share a flag

