"""A prototype of the one-kernel prefill attention that masks only the tiles a causal mask can cut.

kernels/attention_prefill.py applies the causal mask (``tl.where(keys <= positions, ...)``) and the
stored-key masks of its K/V loads to every KV tile it walks. A tile whose keys all lie at or below
the query block's first position is visible to every row of the block: there the masks select
everything, so they are identities. This form walks each segment's tiles in the same order with
the same arithmetic, but in two loops: the tiles wholly below the block's first position without
the masks, then the rest with them. Same float operations in the same order, so the plan kernel's
bits are expected; bench/attention_fused.py times it beside the plan's forms and compares the bits
on the GPU, tests/kernels/test_attention_diagonal.py under Triton's interpreter. On an H100 it took
0.92-0.98 of the plan kernel's time (docs/performance.md). Not a plan kernel: one row's tile falls
in the unmasked loop in one batch and in the masked loop in another, and the verifier pairs
iterations of one loop only.
"""

from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from kernels import metadata
from kernels.attention_prefill import check_attention_prefill
from kernels.plan import PlanEntry
from kernels.tensors import launch_kwargs

__all__ = ["diagonal_attention", "diagonal_attention_kernel", "launch_diagonal_attention"]


@triton.jit
def _tile(q, k_cache_ptr, v_cache_ptr, block_table_ptr, seq, j, last, positions, m_i, l_acc, acc, ones, offs_n,
          offs_d, kv_head, stride_bt, stride_page, stride_slot, stride_head, PAGE_SIZE: tl.constexpr,
          BLOCK_N: tl.constexpr, SCALE: tl.constexpr, DTYPE: tl.constexpr, SOFTCAP: tl.constexpr,
          MASKED: tl.constexpr):
    # one KV tile of the plan kernel's segment loop; MASKED = False only where every key is visible to every row
    keys = j * BLOCK_N + offs_n
    if MASKED:
        is_stored = keys <= last
        pages = tl.load(block_table_ptr + seq * stride_bt + keys // PAGE_SIZE, mask=is_stored, other=0)
        slots = pages * stride_page + (keys % PAGE_SIZE) * stride_slot + kv_head * stride_head
        k = tl.trans(tl.load(k_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0))
        v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0)
    else:
        pages = tl.load(block_table_ptr + seq * stride_bt + keys // PAGE_SIZE)
        slots = pages * stride_page + (keys % PAGE_SIZE) * stride_slot + kv_head * stride_head
        k = tl.trans(tl.load(k_cache_ptr + slots[:, None] + offs_d[None, :]))
        v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :])
    scores = tl.dot(q, k, input_precision="ieee") * SCALE
    if SOFTCAP > 0:
        e = tl.exp(tl.minimum(-2.0 * (scores / SOFTCAP), 88.0))
        scores = SOFTCAP * (2.0 / (1.0 + e) - 1.0)
    if MASKED:
        scores = tl.where(keys[None, :] <= positions[:, None], scores, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(scores, axis=1))
    m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
    alpha = tl.exp(m_i - m_safe)
    p = tl.exp(scores - m_safe[:, None])
    l_acc = tl.dot(p.to(DTYPE), ones, l_acc * alpha[:, None], input_precision="ieee")
    acc = tl.dot(p.to(DTYPE), v, acc * alpha[:, None], input_precision="ieee")
    return m_new, l_acc, acc


@triton.jit(do_not_specialize=["num_tokens", "stride_ot", "stride_oh", "stride_ft", "stride_bt"])
def diagonal_attention_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, flag_ptr, block_table_ptr, query_start_ptr,
                              seq_lens_ptr, seq_idx_ptr, num_tokens, stride_qt, stride_qh, stride_ot, stride_oh,
                              stride_ft, stride_bt, stride_page, stride_slot, stride_head,
                              GROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_Q: tl.constexpr, D: tl.constexpr,
                              PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, SEG: tl.constexpr, SCALE: tl.constexpr,
                              DTYPE: tl.constexpr, CHECK: tl.constexpr, SOFTCAP: tl.constexpr = 0.0,
                              PDL: tl.constexpr = False, EXTRA_OPEN: tl.constexpr = 0):
    # the plan kernel's interface (kernels/attention_prefill.py), which says what each argument holds;
    # EXTRA_OPEN > 0 leaves that many more tiles unmasked: a wrong form, the control of the bits test
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    program = tl.program_id(0)
    kv_head = tl.program_id(1)
    num_packed = tl.cdiv(num_tokens, BLOCK_Q)
    is_packed = program < num_packed
    packed_start = tl.where(is_packed, num_packed - 1 - program, 0) * BLOCK_Q
    seq = tl.where(is_packed, tl.load(seq_idx_ptr + packed_start, mask=is_packed, other=0), program - num_packed)
    q_start = tl.load(query_start_ptr + seq)
    q_end = tl.load(query_start_ptr + seq + 1)
    context = tl.load(seq_lens_ptr + seq) - (q_end - q_start)
    first_end = tl.where(q_start % BLOCK_Q == 0, q_start, tl.minimum(q_end, (q_start // BLOCK_Q + 1) * BLOCK_Q))
    block_start = tl.where(is_packed, packed_start, q_start)
    block_end = tl.where(is_packed, tl.minimum(q_end, packed_start + BLOCK_Q), first_end)
    offs_r = tl.arange(0, BLOCK_Q * BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    rows = block_start + offs_r // BLOCK_G
    heads = kv_head * GROUP + offs_r % BLOCK_G
    is_row = (rows < block_end) & (offs_r % BLOCK_G < GROUP)
    positions = context + (rows - q_start)
    last = context + (block_end - 1 - q_start)
    num_tiles = tl.where(block_end > block_start, last // BLOCK_N + 1, 0)
    # tiles below this one hold only keys at or below the block's first position: no row masks any of them
    # (an empty block walks no segment, so needs no guard here)
    num_open_tiles = (context + (block_start - q_start) + 1) // BLOCK_N + EXTRA_OPEN
    q = tl.load(q_ptr + rows[:, None] * stride_qt + heads[:, None] * stride_qh + offs_d[None, :], mask=is_row[:, None],
                other=0.0)
    ones = tl.full([BLOCK_N, 16], 1.0, tl.float32).to(DTYPE)
    m_all = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32) - float("inf")
    l_all = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32)
    acc_all = tl.zeros([BLOCK_Q * BLOCK_G, D], dtype=tl.float32)
    bad = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32)
    for segment in range(0, tl.cdiv(num_tiles, SEG // BLOCK_N)):
        first_tile = segment * (SEG // BLOCK_N)
        end_tile = tl.minimum(num_tiles, first_tile + SEG // BLOCK_N)
        open_end = tl.maximum(first_tile, tl.minimum(end_tile, num_open_tiles))
        m_i = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32) - float("inf")
        l_acc = tl.zeros([BLOCK_Q * BLOCK_G, 16], dtype=tl.float32)
        acc = tl.zeros([BLOCK_Q * BLOCK_G, D], dtype=tl.float32)
        for j in range(first_tile, open_end):
            m_i, l_acc, acc = _tile(q, k_cache_ptr, v_cache_ptr, block_table_ptr, seq, j, last, positions, m_i, l_acc,
                                    acc, ones, offs_n, offs_d, kv_head, stride_bt, stride_page, stride_slot,
                                    stride_head, PAGE_SIZE, BLOCK_N, SCALE, DTYPE, SOFTCAP, False)
        for j in range(open_end, end_tile):
            m_i, l_acc, acc = _tile(q, k_cache_ptr, v_cache_ptr, block_table_ptr, seq, j, last, positions, m_i, l_acc,
                                    acc, ones, offs_n, offs_d, kv_head, stride_bt, stride_page, stride_slot,
                                    stride_head, PAGE_SIZE, BLOCK_N, SCALE, DTYPE, SOFTCAP, True)
        l_i = tl.max(l_acc, axis=1)
        is_merged = segment * SEG - context <= rows - q_start
        is_first = segment == 0
        if CHECK:
            bad = tl.where(is_merged, tl.maximum(bad, tl.where(tl.abs(m_i) < float("inf"), 0.0, 1.0)), bad)
        m_new = tl.maximum(m_all, m_i)
        alpha = tl.exp(m_all - m_new)
        beta = tl.exp(m_i - m_new)
        l_merged = l_all * alpha + l_i * beta
        acc_merged = acc_all * alpha[:, None] + acc * beta[:, None]
        m_all = tl.where(is_merged, tl.where(is_first, m_i, m_new), m_all)
        l_all = tl.where(is_merged, tl.where(is_first, l_i, l_merged), l_all)
        acc_all = tl.where(is_merged[:, None], tl.where(is_first[:, None], acc, acc_merged), acc_all)
    quotient = acc_all / l_all[:, None]
    out = quotient.to(DTYPE)
    tl.store(out_ptr + rows[:, None] * stride_ot + heads[:, None] * stride_oh + offs_d[None, :], out,
             mask=is_row[:, None])
    if CHECK:
        bad = tl.maximum(bad, tl.where(tl.abs(l_all) < float("inf"), 0.0, 1.0))
        bad = tl.maximum(bad, tl.max(tl.where(tl.abs(out) < float("inf"), 0.0, 1.0), axis=1))
    tl.store(flag_ptr + rows * stride_ft + heads, bad, mask=is_row)


def launch_diagonal_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                              query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor,
                              out: torch.Tensor, nonfinite: torch.Tensor, entry: PlanEntry,
                              extra_open: int = 0) -> None:
    """The plan kernel's contract and grid (kernels/attention_prefill.py), this kernel launched;
    ``extra_open``: the control's wrong form (see the kernel)."""
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; nonfinite: [T, Hq] fp32
    check_attention_prefill(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, nonfinite,
                            entry)
    if q.shape[0] == 0:
        return
    grid = (triton.cdiv(q.shape[0], entry.constexpr_dict()["BLOCK_Q"]) + block_table.shape[0], k_cache.shape[2])
    diagonal_attention_kernel[grid](
        q, k_cache, v_cache, out, nonfinite, block_table, query_start_loc, seq_lens, seq_idx, q.shape[0], q.stride(0),
        q.stride(1), out.stride(0), out.stride(1), nonfinite.stride(0), block_table.stride(0), k_cache.stride(0),
        k_cache.stride(1), k_cache.stride(2), EXTRA_OPEN=extra_open, **launch_kwargs(entry))


def diagonal_attention(entry: PlanEntry) -> Callable[..., torch.Tensor]:
    """An attention function with ops.paged_attention's leading arguments that launches this kernel
    at ``entry`` (as tests/kernels/attention_cases.py ``one_kernel_attention`` launches the plan's)."""
    def attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, scale):
        out = torch.empty_like(q)
        flags = torch.full((q.shape[0], q.shape[1]), -1.0, device=q.device)
        launch_diagonal_attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens,
                                  metadata.token_requests(query_start_loc, q.shape[0]), out, flags, entry)
        return out
    return attention
