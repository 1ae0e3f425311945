"""Paged causal attention, second half: merge a token's KV segment states in ascending order.

Program (t, h) reads the unnormalised online-softmax states (m, l, acc) that the first half
(kernels/attention.py) stored for token t, head h and each segment 0 .. pos // SEG the token
sees, merges them in ascending segment order with the online-softmax rescaling

    m' = max(m, m_s), l' = l * exp(m - m') + l_s * exp(m_s - m'), acc' = acc * exp(m - m') + acc_s * exp(m_s - m'),

and stores ``acc / l`` as the token's output. The segments and their order are a function of
the token's position alone (SEG is a static constant), so the merge is the same in any batch,
chunking or decode step; segments past the token's own are never read (the first half stores
nothing there for it, so they may hold anything). Segment 0 holds key 0, which every query
sees, so the merge starts from a finite state, and every merged segment holds a visible key, so
no maximum is -inf and no clamp is needed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, constexpr_kwargs, dtype_name, max_offset

__all__ = ["attention_combine_kernel", "check_attention_combine", "launch_attention_combine"]


@triton.jit(do_not_specialize=["stride_mt", "stride_mh", "stride_at", "stride_ah"])
def attention_combine_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, query_start_ptr, seq_lens_ptr, seq_idx_ptr, stride_mt,
                             stride_mh, stride_at, stride_ah, stride_ot, stride_oh, D: tl.constexpr,
                             SEG: tl.constexpr, DTYPE: tl.constexpr):
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]
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
    for s in range(1, position // SEG + 1):
        m_s = tl.load(m_ptr + state + s)
        m_new = tl.maximum(m_all, m_s)
        alpha = tl.exp(m_all - m_new)
        beta = tl.exp(m_s - m_new)
        l_all = l_all * alpha + tl.load(l_ptr + state + s) * beta
        acc = acc * alpha + tl.load(acc_ptr + partial + s * D) * beta
        m_all = m_new
    tl.store(out_ptr + row * stride_ot + head * stride_oh + offs_d, (acc / l_all).to(DTYPE))


def check_attention_combine(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, query_start_loc: torch.Tensor,
                            seq_lens: torch.Tensor, seq_idx: torch.Tensor, out: torch.Tensor,
                            entry: PlanEntry) -> None:
    """The launch contract of attention_combine_kernel (shared with the CPU path).

    Premises not checked here: the metadata premises of kernels/attention.py's
    check_paged_attention, ``seq_lens[b] <= NUM_SEG * SEG`` (the segments cover every position,
    which holds when the scratch comes from the same block table), and the first half having
    stored each (token, head, segment) state the token sees.
    """
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]
    c, static = entry.constexpr_dict(), entry.static_dict()
    assert entry.kernel == "attention_combine", f"entry {entry.key} is not an attention_combine entry"
    num_heads, head_dim = static["num_heads"], c["D"]
    assert out.dim() == 3 and tuple(out.shape[1:]) == (num_heads, head_dim) and out.is_contiguous(), \
        f"out must be a contiguous [T, {num_heads}, {head_dim}] tensor, got {tuple(out.shape)}"
    assert dtype_name(out.dtype) == c["DTYPE"], f"out must be {c['DTYPE']}"
    assert m.dim() == 3 and tuple(m.shape[:2]) == tuple(out.shape[:2]), \
        f"m shape {tuple(m.shape)} is not [T, {num_heads}, NUM_SEG]"
    assert tuple(l.shape) == tuple(m.shape), f"l shape {tuple(l.shape)} differs from m's {tuple(m.shape)}"
    assert tuple(acc.shape) == (m.shape[0], m.shape[1], m.shape[2], head_dim), \
        f"acc shape {tuple(acc.shape)} is not [T, {num_heads}, NUM_SEG, {head_dim}]"
    for name, t in (("m", m), ("l", l), ("acc", acc)):
        assert t.dtype == torch.float32 and t.is_contiguous(), f"{name} must be contiguous float32"
    for name, t, length in (("seq_lens", seq_lens, query_start_loc.shape[0] - 1), ("seq_idx", seq_idx, out.shape[0])):
        assert tuple(t.shape) == (length,) and t.dtype == torch.int32 and t.is_contiguous(), \
            f"{name} must be a contiguous [{length}] int32 tensor, got {tuple(t.shape)} {t.dtype}"
    assert query_start_loc.dtype == torch.int32 and query_start_loc.is_contiguous(), \
        "query_start_loc must be contiguous int32"
    devices = {t.device for t in (m, l, acc, query_start_loc, seq_lens, seq_idx, out)}
    assert len(devices) == 1, f"all tensors must be on one device, got {devices}"
    assert max(max_offset(acc), max_offset(out)) <= MAX_INDEX, "a tensor is too large for 32-bit offsets"


def launch_attention_combine(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, query_start_loc: torch.Tensor,
                             seq_lens: torch.Tensor, seq_idx: torch.Tensor, out: torch.Tensor,
                             entry: PlanEntry) -> None:
    """Check the contract, then launch attention_combine_kernel on grid (T, Hq)."""
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]
    check_attention_combine(m, l, acc, query_start_loc, seq_lens, seq_idx, out, entry)
    if out.shape[0] == 0:
        return
    attention_combine_kernel[(out.shape[0], out.shape[1])](
        m, l, acc, out, query_start_loc, seq_lens, seq_idx, m.stride(0), m.stride(1), acc.stride(0), acc.stride(1),
        out.stride(0), out.stride(1), **constexpr_kwargs(entry), num_warps=entry.num_warps,
        num_stages=entry.num_stages)
