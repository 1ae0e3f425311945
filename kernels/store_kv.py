"""KV-cache write: program (t, h) copies K and V of token t, KV head h, to slot ``slot_mapping[t]``.

A slot is ``page * PAGE_SIZE + offset``. Pure copies: the cache holds exactly the bits of k and
v, wherever the page sits. Only the slots named are written.

With ``CHECK`` (the run-time finiteness check, kernels/finiteness.py) the program also writes
``nonfinite[t, h]``: 1.0 when the K or V row it copied holds an inf or NaN, else 0.0 (0.0 always
without ``CHECK``). Every K/V row paged attention reads was copied here, in this step or in the
step that computed it, so the flags of those steps cover the attention contract's premise that
the K/V rows it reads are finite.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, dtype_name, launch_kwargs, max_offset

__all__ = ["store_kv_kernel", "check_store_kv", "launch_store_kv"]


@triton.jit
def store_kv_kernel(k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_ptr, flag_ptr, stride_kt, stride_kh, stride_vt,
                    stride_vh, stride_page, stride_slot, stride_head, stride_ft, D: tl.constexpr,
                    PAGE_SIZE: tl.constexpr, CHECK: tl.constexpr, PDL: tl.constexpr = False):
    # k, v: [T, Hkv, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D] (same strides); slot: [T] int64
    # flag: [T, Hkv] float32 (unit stride on the head)
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
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
    tl.store(flag_ptr + row * stride_ft + head, bad)


def check_store_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   slot_mapping: torch.Tensor, nonfinite: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of store_kv_kernel (shared with the CPU path).

    Premise not checked here: slots are distinct and in [0, num_pages * PAGE_SIZE)
    (kernels/metadata.py checks it when metadata checks are on).
    """
    # k, v: [T, Hkv, D]; k_cache, v_cache: [num_pages, page_size, Hkv, D]; slot_mapping: [T] int64
    # nonfinite: [T, Hkv] float32, unit stride on the head
    c, static = entry.constexpr_dict(), entry.static_dict()
    assert entry.kernel == "store_kv", f"entry {entry.key} is not a store_kv entry"
    num_kv_heads, head_dim = static["num_kv_heads"], c["D"]
    for name, t in (("k", k), ("v", v)):
        assert t.dim() == 3 and tuple(t.shape[1:]) == (num_kv_heads, head_dim), \
            f"{name} shape {tuple(t.shape)} is not [T, {num_kv_heads}, {head_dim}]"
        assert t.stride(2) == 1, f"{name} needs a unit stride on head_dim, got {t.stride()}"
        assert t.dtype == k_cache.dtype, f"{name} dtype {t.dtype} differs from the cache's {k_cache.dtype}"
    assert k.shape[0] == v.shape[0], "k and v have different token counts"
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        assert cache.dim() == 4 and tuple(cache.shape[1:]) == (c["PAGE_SIZE"], num_kv_heads, head_dim), \
            f"{name} shape {tuple(cache.shape)} is not [num_pages, {c['PAGE_SIZE']}, {num_kv_heads}, {head_dim}]"
        assert cache.is_contiguous(), f"{name} must be contiguous"
    assert k_cache.shape == v_cache.shape and k_cache.dtype == v_cache.dtype, "k_cache and v_cache differ"
    assert dtype_name(k_cache.dtype) == static["dtype"], f"cache dtype {k_cache.dtype} is not {static['dtype']}"
    assert tuple(slot_mapping.shape) == (k.shape[0],) and slot_mapping.dtype == torch.int64, \
        f"slot_mapping must be [{k.shape[0]}] int64, got {tuple(slot_mapping.shape)} {slot_mapping.dtype}"
    assert slot_mapping.is_contiguous(), "slot_mapping must be contiguous"
    assert tuple(nonfinite.shape) == (k.shape[0], num_kv_heads) and nonfinite.dtype == torch.float32, \
        f"nonfinite must be [{k.shape[0]}, {num_kv_heads}] float32, got {tuple(nonfinite.shape)} {nonfinite.dtype}"
    assert nonfinite.stride(1) == 1 and nonfinite.stride(0) >= num_kv_heads, \
        f"nonfinite needs a unit head stride and rows that do not overlap, got {nonfinite.stride()}"
    assert k.device == v.device == k_cache.device == v_cache.device == slot_mapping.device == nonfinite.device, \
        "all tensors must be on one device"
    assert max(max_offset(k), max_offset(v), max_offset(k_cache), max_offset(nonfinite)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def launch_store_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    slot_mapping: torch.Tensor, nonfinite: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch store_kv_kernel on grid (T, Hkv)."""
    check_store_kv(k, v, k_cache, v_cache, slot_mapping, nonfinite, entry)
    if k.shape[0] == 0:
        return
    store_kv_kernel[(k.shape[0], k.shape[1])](
        k, v, k_cache, v_cache, slot_mapping, nonfinite, k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), nonfinite.stride(0), **launch_kwargs(entry))
