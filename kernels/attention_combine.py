"""Paged causal attention, second half: merge a token's KV segment states in ascending order.

Program (t, j) takes heads h = j * BLOCK_H .. (j + 1) * BLOCK_H - 1 of token t (BLOCK_H is 1 for
decode steps, a few heads for launches with more tokens than requests: a long prefill had one
one-warp program per token and head). For each head it reads the unnormalised online-softmax
states (m, l, acc) that the first half (kernels/attention.py) stored for token t, head h and each
segment first .. pos // SEG, merges them in ascending segment order with the online-softmax rescaling

    m' = max(m, m_s), l' = l * exp(m - m') + l_s * exp(m_s - m'), acc' = acc * exp(m - m') + acc_s * exp(m_s - m'),

and stores ``acc / l`` as the token's output. ``first`` is 0, or with a sliding window
(WINDOW = W > 0) the segment of the token's window start max(pos - W + 1, 0): the segments
before it hold no key the token sees (their states are the empty (-inf, +0, +0)) and are not
read. The segments and their order are a function of the token's position alone (SEG and W are
static constants), so the merge is the same in any batch, chunking or decode step (every
operation is elementwise per head, so BLOCK_H changes no value either); segments
past the token's own are never read (the first half stores nothing there for it, so they may
hold anything). The first merged segment holds the first key the query sees (key 0 or its
window start), so the merge starts from a finite state, and every merged segment holds a
visible key, so no maximum is -inf and no clamp is needed.

With ``CHECK`` (the run-time finiteness check, kernels/finiteness.py) the program also writes
``nonfinite[t, h]``: 1.0 when the m of a segment it merges, the merged l, or the output it
stores (the fp32 quotient or its DTYPE rounding) is inf or NaN, else 0.0 (0.0 always without
``CHECK``). The flag is a function of the states it merges, so it is row-local like the output.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["attention_combine_kernel", "check_attention_combine", "launch_attention_combine"]


@triton.jit(do_not_specialize=["stride_mt", "stride_mh", "stride_at", "stride_ah"])
def attention_combine_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, flag_ptr, query_start_ptr, seq_lens_ptr, seq_idx_ptr,
                             stride_mt, stride_mh, stride_at, stride_ah, stride_ot, stride_oh, stride_ft,
                             D: tl.constexpr, SEG: tl.constexpr, DTYPE: tl.constexpr, CHECK: tl.constexpr,
                             WINDOW: tl.constexpr = 0, PDL: tl.constexpr = False, BLOCK_H: tl.constexpr = 1):
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]
    # flag: [T, Hq] float32 (unit stride on the head); BLOCK_H divides Hq
    # query_start: [B + 1] int32; seq_lens: [B] int32 (KV length incl. this step); seq_idx: [T] int32
    # The step's metadata is staged (seq_idx: computed once) before the forward's layers and written by
    # none of their launches (contract: immutable), so it is read before the PDL wait, as the previous
    # launch drains.
    row = tl.program_id(0)
    seq = tl.load(seq_idx_ptr + row)
    q_start = tl.load(query_start_ptr + seq)
    q_end = tl.load(query_start_ptr + seq + 1)
    position = tl.load(seq_lens_ptr + seq) - (q_end - q_start) + (row - q_start)
    if PDL:  # launched early (programmatic dependent launch): nothing else before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
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
            acc = acc * alpha[:, None] + tl.load(acc_ptr + partial + s * D) * beta[:, None]
            m_all = m_new
        quotient = acc / l_all[:, None]
        out = quotient.to(DTYPE)
        tl.store(out_ptr + row * stride_ot + heads[:, None] * stride_oh + offs_d[None, :], out)
        if CHECK:
            bad = tl.maximum(bad, tl.where(tl.abs(l_all) < float("inf"), 0.0, 1.0))
            bad = tl.maximum(bad, tl.max(tl.where(tl.abs(quotient) < float("inf"), 0.0, 1.0), axis=1))
            bad = tl.maximum(bad, tl.max(tl.where(tl.abs(out) < float("inf"), 0.0, 1.0), axis=1))
        tl.store(flag_ptr + row * stride_ft + heads, bad)


def check_attention_combine(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, query_start_loc: torch.Tensor,
                            seq_lens: torch.Tensor, seq_idx: torch.Tensor, out: torch.Tensor, nonfinite: torch.Tensor,
                            entry: PlanEntry) -> None:
    """The launch contract of attention_combine_kernel (shared with the CPU path).

    Premises not checked here: the metadata premises of kernels/attention.py's
    check_paged_attention, ``seq_lens[b] <= NUM_SEG * SEG`` (the segments cover every position,
    which holds when the scratch comes from the same block table), and the first half having
    stored each (token, head, segment) state the token sees.
    """
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]; nonfinite: [T, Hq] fp32
    c, static = entry.constexpr_dict(), entry.static_dict()
    assert entry.kernel == "attention_combine", f"entry {entry.key} is not an attention_combine entry"
    num_heads, head_dim = static["num_heads"], c["D"]
    assert c["BLOCK_H"] >= 1 and num_heads % c["BLOCK_H"] == 0, \
        f"BLOCK_H {c['BLOCK_H']} must divide the {num_heads} query heads (a program merges BLOCK_H heads)"
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
    assert tuple(nonfinite.shape) == (out.shape[0], num_heads) and nonfinite.dtype == torch.float32, \
        f"nonfinite must be [{out.shape[0]}, {num_heads}] float32, got {tuple(nonfinite.shape)} {nonfinite.dtype}"
    assert nonfinite.stride(1) == 1 and nonfinite.stride(0) >= num_heads, \
        f"nonfinite needs a unit head stride and rows that do not overlap, got {nonfinite.stride()}"
    devices = {t.device for t in (m, l, acc, query_start_loc, seq_lens, seq_idx, out, nonfinite)}
    assert len(devices) == 1, f"all tensors must be on one device, got {devices}"
    assert max(max_offset(acc), max_offset(out), max_offset(nonfinite)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def launch_attention_combine(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, query_start_loc: torch.Tensor,
                             seq_lens: torch.Tensor, seq_idx: torch.Tensor, out: torch.Tensor, nonfinite: torch.Tensor,
                             entry: PlanEntry) -> None:
    """Check the contract, then launch attention_combine_kernel on grid (T, Hq / BLOCK_H)."""
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]; nonfinite: [T, Hq] fp32
    check_attention_combine(m, l, acc, query_start_loc, seq_lens, seq_idx, out, nonfinite, entry)
    if out.shape[0] == 0:
        return
    attention_combine_kernel[(out.shape[0], out.shape[1] // entry.constexpr_dict()["BLOCK_H"])](
        m, l, acc, out, nonfinite, query_start_loc, seq_lens, seq_idx,
        m.stride(0), m.stride(1), acc.stride(0), acc.stride(1), out.stride(0), out.stride(1), nonfinite.stride(0),
        **launch_kwargs(entry))
