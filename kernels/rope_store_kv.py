"""Rotary position embedding of q and k, and the KV-cache write of the rotated k and of v, in one launch.

Program (t, b) handles q heads [b*BLOCK_Q, +BLOCK_Q) and KV heads [b*BLOCK_KV, +BLOCK_KV) of token t
(heads past the last masked off; the plan sizes BLOCK_KV so the programs cover every KV head): a q
head is rotated into ``q_out``; a KV head's k is rotated and, with v's row of the same head, written
to the cache slot ``slot_mapping[t]`` (``page * PAGE_SIZE + offset``). Rotate-half, Hugging Face
Llama convention, in fp32 with one rounding to the activation dtype: ``out[:D/2] = x1*cos - x2*sin``,
``out[D/2:] = x2*cos + x1*sin``; the table row ``cos_sin[pos]`` holds cos in its first D/2 columns
and sin in its last D/2. v is copied bit for bit. So every row has the bits of a rotation then a
copy, and one launch replaces two (decode launches are short).

With ``CHECK`` (the run-time finiteness check, kernels/finiteness.py) the program also writes
``nonfinite[t, h]``: 1.0 when the rotated K row or the V row it wrote holds an inf or NaN, else 0.0
(0.0 always without ``CHECK``). Every K/V row paged attention reads was written here, in this step
or in the step that computed it, so the flags of those steps cover the attention contract's premise
that the K/V rows it reads are finite.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, dtype_name, launch_kwargs, max_offset

__all__ = ["rope_store_kv_kernel", "check_rope_store_kv", "launch_rope_store_kv"]


@triton.jit
def rope_store_kv_kernel(q_ptr, k_ptr, v_ptr, q_out_ptr, k_cache_ptr, v_cache_ptr, pos_ptr, cs_ptr, slot_ptr,
                         flag_ptr, q_heads, kv_heads, stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                         stride_ot, stride_oh, stride_cs, stride_page, stride_slot, stride_head, stride_ft,
                         HALF: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_KV: tl.constexpr, PAGE_SIZE: tl.constexpr,
                         CHECK: tl.constexpr, DTYPE: tl.constexpr, PDL: tl.constexpr = False):
    # q, q_out: [T, Hq, 2*HALF]; k, v: [T, Hkv, 2*HALF]; pos, slot: [T] int64; cs: [max_pos, 2*HALF] fp32
    # k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, 2*HALF] (same strides); flag: [T, Hkv] fp32, unit head stride
    # The token's position and slot (staged before the forward's layers) and the cos/sin table (the
    # model's) are written by none of the layers' launches (contract: immutable), so they are read
    # before the PDL wait.
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
    v = tl.load(v_ptr + row * stride_vt + kv_head * stride_vh + col, mask=is_kv, other=0.0)
    dst = (slot // PAGE_SIZE) * stride_page + (slot % PAGE_SIZE) * stride_slot + kv_head * stride_head + col
    tl.store(k_cache_ptr + dst, k_rot, mask=is_kv)
    tl.store(v_cache_ptr + dst, v, mask=is_kv)

    bad = tl.zeros((BLOCK_KV,), dtype=tl.float32)
    if CHECK:  # |x| < inf is false exactly for inf and NaN; masked-off lanes hold zeros
        bad = tl.maximum(tl.max(tl.max(tl.where(tl.abs(k_rot) < float("inf"), 0.0, 1.0), axis=2), axis=1),
                         tl.max(tl.max(tl.where(tl.abs(v) < float("inf"), 0.0, 1.0), axis=2), axis=1))
    tl.store(flag_ptr + row * stride_ft + kv_index, bad, mask=kv_index < kv_heads)


def check_rope_store_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                        cos_sin: torch.Tensor, q_out: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                        slot_mapping: torch.Tensor, nonfinite: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of rope_store_kv_kernel (shared with the CPU path).

    Premises not checked here: every position is in [0, max_pos), and slots are distinct and in
    [0, num_pages * PAGE_SIZE) (kernels/metadata.py checks both when metadata checks are on).
    """
    # q, q_out: [T, Hq, D]; k, v: [T, Hkv, D]; positions, slot_mapping: [T] int64; cos_sin: [max_pos, D] float32
    # k_cache, v_cache: [num_pages, page_size, Hkv, D]; nonfinite: [T, Hkv] float32, unit stride on the head
    c, static = entry.constexpr_dict(), entry.static_dict()
    assert entry.kernel == "rope_store_kv", f"entry {entry.key} is not a rope_store_kv entry"
    num_heads, num_kv_heads, head_dim = static["num_heads"], static["num_kv_heads"], 2 * c["HALF"]
    num_tokens = q.shape[0]
    assert triton.cdiv(num_heads, c["BLOCK_Q"]) * c["BLOCK_KV"] >= num_kv_heads, \
        f"BLOCK_KV={c['BLOCK_KV']} leaves KV heads of {num_kv_heads} unwritten by {num_heads} q heads in blocks of " \
        f"{c['BLOCK_Q']}"
    for name, t, heads in (("q", q, num_heads), ("k", k, num_kv_heads), ("v", v, num_kv_heads)):
        assert t.dim() == 3 and tuple(t.shape) == (num_tokens, heads, head_dim), \
            f"{name} shape {tuple(t.shape)} is not [{num_tokens}, {heads}, {head_dim}]"
        # strides of size-1 dimensions too: the contract's offsets are row * stride_t + head * stride_h
        assert t.stride(2) == 1, f"{name} needs a unit stride on head_dim, got strides {t.stride()}"
        assert t.stride(1) >= head_dim, f"{name} heads overlap: strides {t.stride()}"
        assert t.stride(0) >= heads * head_dim, f"{name} tokens overlap: strides {t.stride()}"
        assert dtype_name(t.dtype) == c["DTYPE"], f"{name} dtype {t.dtype} is not {c['DTYPE']}"
    assert tuple(q_out.shape) == tuple(q.shape) and q_out.dtype == q.dtype and q_out.is_contiguous(), \
        "q_out must be contiguous and shaped like q"
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        assert cache.dim() == 4 and tuple(cache.shape[1:]) == (c["PAGE_SIZE"], num_kv_heads, head_dim), \
            f"{name} shape {tuple(cache.shape)} is not [num_pages, {c['PAGE_SIZE']}, {num_kv_heads}, {head_dim}]"
        assert cache.is_contiguous(), f"{name} must be contiguous"
    assert k_cache.shape == v_cache.shape and k_cache.dtype == v_cache.dtype == q.dtype, \
        f"k_cache and v_cache must have one shape and q's dtype {q.dtype}"
    for name, t in (("positions", positions), ("slot_mapping", slot_mapping)):
        assert tuple(t.shape) == (num_tokens,) and t.dtype == torch.int64 and t.is_contiguous(), \
            f"{name} must be a contiguous [{num_tokens}] int64 tensor, got {tuple(t.shape)} {t.dtype}"
    assert cos_sin.dim() == 2 and cos_sin.shape[1] == head_dim and cos_sin.dtype == torch.float32, \
        f"cos_sin must be [max_pos, {head_dim}] float32, got {tuple(cos_sin.shape)} {cos_sin.dtype}"
    assert cos_sin.is_contiguous(), "cos_sin must be contiguous"
    assert tuple(nonfinite.shape) == (num_tokens, num_kv_heads) and nonfinite.dtype == torch.float32, \
        f"nonfinite must be [{num_tokens}, {num_kv_heads}] float32, got {tuple(nonfinite.shape)} {nonfinite.dtype}"
    assert nonfinite.stride(1) == 1 and nonfinite.stride(0) >= num_kv_heads, \
        f"nonfinite needs a unit head stride and rows that do not overlap, got {nonfinite.stride()}"
    tensors = (q, k, v, positions, cos_sin, q_out, k_cache, v_cache, slot_mapping, nonfinite)
    assert len({t.device for t in tensors}) == 1, "all tensors must be on one device"
    assert max(max_offset(t) for t in tensors) <= MAX_INDEX, "a tensor is too large for 32-bit offsets"


def launch_rope_store_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                         cos_sin: torch.Tensor, q_out: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         slot_mapping: torch.Tensor, nonfinite: torch.Tensor, entry: PlanEntry) -> None:
    """Check the contract, then launch rope_store_kv_kernel on grid (T, cdiv(Hq, BLOCK_Q))."""
    check_rope_store_kv(q, k, v, positions, cos_sin, q_out, k_cache, v_cache, slot_mapping, nonfinite, entry)
    if q.shape[0] == 0:
        return
    grid = (q.shape[0], triton.cdiv(q.shape[1], entry.constexpr_dict()["BLOCK_Q"]))
    rope_store_kv_kernel[grid](
        q, k, v, q_out, k_cache, v_cache, positions, cos_sin, slot_mapping, nonfinite, q.shape[1], k.shape[1],
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), q_out.stride(0),
        q_out.stride(1), cos_sin.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        nonfinite.stride(0), **launch_kwargs(entry))
