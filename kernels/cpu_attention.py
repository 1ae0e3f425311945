"""The CPU path of paged attention: the kernels' two-level KV walk, vectorised over queries.

First half (:func:`attention_partial`, the CPU twin of kernels/attention.py): query t visits
the KV segments s = 0 .. positions[t] // SEG; within segment s it visits tiles of BLOCK_N key
positions, from the segment's first tile up to its own last one, in ascending order, starting
from an empty state, with the Triton kernel's tiles, masks, online softmax and -inf clamp (the
arithmetic inside a tile is the CPU's own, so CPU and GPU agree within tolerance, not bitwise).
The segment's unnormalised state (m, l, acc) goes to the scratch slot (t, head, s). The Triton
kernel also runs, for a query that is not the last of its query block, the block's later tiles,
which are fully masked for it and exact identity steps; here the loop over tiles runs to the
batch's longest query, and a query takes the update of tile j only while j is one of its own
tiles; otherwise ``where`` keeps its state untouched (a selection, not arithmetic), so extra
iterations cannot change it (nor can the leading tiles wholly before a query's window, which
the kernel may visit for an earlier row of the block). Keys past the query's position, and with a sliding window (WINDOW)
the keys at or before ``position - WINDOW``, are replaced by zeros before use (their block-table
entries and slots are never read), scored -inf and weighted +0, so poisoned slots (NaN, inf,
stale data) never reach the result. SOFTCAP applies the kernel's ``c * tanh(s / c)`` formula.

Second half (:func:`attention_combine`, the twin of kernels/attention_combine.py): the segment
states from the one holding the query's first visible key up to positions[t] // SEG, merged in
ascending order with the same rescaling formula; other segments are never selected. With the
plan's CHECK it flags, as the kernel does, a (token, head) whose merged segments' m, merged l or
output is inf or NaN (kernels/finiteness.py).

Dot products and sums are ``tree_sum`` over a fixed [BLOCK_N, D] tile and ``exp`` is the
position-independent one, so a query's bits depend on its own q row, KV and position only.

:func:`attention_prefill`, the twin of kernels/attention_prefill.py (the pair's segments and merge
in one kernel), runs the two halves above: the kernel's arithmetic is theirs.
"""

from __future__ import annotations

import torch

from kernels.attention import check_paged_attention, check_split_scratch, segment_count
from kernels.attention_combine import check_attention_combine
from kernels.attention_prefill import check_attention_prefill
from kernels.cpu_math import exp, tree_sum
from kernels.finiteness import any_nonfinite, row_flags
from kernels.plan import PlanEntry

__all__ = ["attention_partial", "attention_combine", "attention_prefill"]


def _positions(query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor) -> torch.Tensor:
    """[T] int64: each query's position in its request."""
    seq, starts = seq_idx.long(), query_start_loc.long()
    contexts = seq_lens.long() - (starts[1:] - starts[:-1])  # [B]: KV cached before this step
    return contexts[seq] + torch.arange(seq.shape[0]) - starts[seq]


def attention_partial(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                      query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor, m_out: torch.Tensor,
                      l_out: torch.Tensor, acc_out: torch.Tensor, entry: PlanEntry) -> None:
    """Each query's unnormalised softmax state per KV segment it sees; writes those slots of the scratch."""
    # q: [T, Hq, D]; k_cache, v_cache: [num_pages, page_size, Hkv, D]; block_table: [B, max_pages] int32
    # m_out, l_out: [T, Hq, NUM_SEG] fp32; acc_out: [T, Hq, NUM_SEG, D] fp32
    check_paged_attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, entry)
    check_split_scratch(q, block_table, m_out, l_out, acc_out, entry)
    _walk(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, m_out, l_out, acc_out,
          entry.constexpr_dict())


def _walk(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
          query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor, m_out: torch.Tensor,
          l_out: torch.Tensor, acc_out: torch.Tensor, c: dict) -> None:
    """:func:`attention_partial` after its checks, for the constexprs ``c``."""
    group, head_dim, page_size, block_n, scale = c["GROUP"], c["D"], c["PAGE_SIZE"], c["BLOCK_N"], c["SCALE"]
    window, softcap = c.get("WINDOW", 0), c.get("SOFTCAP", 0.0)
    tiles_per_segment = c["SEG"] // block_n
    num_tokens, num_heads = q.shape[0], q.shape[1]
    if num_tokens == 0:
        return
    num_kv_heads = num_heads // group
    qf = q.float().reshape(num_tokens, num_kv_heads, group, head_dim)  # qf: [T, Hkv, G, D]
    seq = seq_idx.long()
    pos = _positions(query_start_loc, seq_lens, seq_idx)  # [T]
    num_tiles = pos // block_n + 1  # [T]
    lowest = (pos - window + 1).clamp(min=0) if window else torch.zeros_like(pos)  # [T]: first visible key
    first_tile = lowest // block_n  # [T]
    tables = block_table.long()
    key_offsets = torch.arange(block_n)
    k_slots, v_slots = k_cache.flatten(0, 1), v_cache.flatten(0, 1)  # [num_pages * page_size, Hkv, D]
    neg_inf = torch.tensor(float("-inf"))
    m_view = m_out.view(num_tokens, num_kv_heads, group, -1)  # [T, Hkv, G, NUM_SEG]
    l_view = l_out.view(num_tokens, num_kv_heads, group, -1)
    acc_view = acc_out.view(num_tokens, num_kv_heads, group, -1, head_dim)  # [T, Hkv, G, NUM_SEG, D]
    last_tile = int(num_tiles.max()) - 1
    for j in range(last_tile + 1):
        segment = j // tiles_per_segment
        if j % tiles_per_segment == 0:  # a segment's walk starts from the empty state
            m = torch.full((num_tokens, num_kv_heads, group), float("-inf"))
            l = torch.zeros(num_tokens, num_kv_heads, group)
            acc = torch.zeros(num_tokens, num_kv_heads, group, head_dim)
        is_active = (num_tiles > j) & (first_tile <= j)  # [T]: tile j is one of this query's tiles
        if bool(is_active.any()):
            m, l, acc = _tile_step(qf, k_slots, v_slots, tables, seq, pos, lowest, j * block_n + key_offsets[None, :],
                                   is_active, m, l, acc, page_size=page_size, scale=scale, softcap=softcap)
        if j % tiles_per_segment == tiles_per_segment - 1 or j == last_tile:
            sees = segment * c["SEG"] <= pos  # [T]: only the queries that see a key of the segment store
            m_view[sees, :, :, segment] = m[sees]
            l_view[sees, :, :, segment] = l[sees]
            acc_view[sees, :, :, segment] = acc[sees]


def _softcap(scores: torch.Tensor, softcap: float) -> torch.Tensor:
    """``softcap * tanh(scores / softcap)`` as the kernel writes it: tanh(x) = 2 / (1 + exp(-2x)) - 1."""
    e = exp((-2.0 * (scores / softcap)).clamp(max=88.0))
    return softcap * (2.0 / (1.0 + e) - 1.0)


def _tile_step(qf: torch.Tensor, k_slots: torch.Tensor, v_slots: torch.Tensor, tables: torch.Tensor,
               seq: torch.Tensor, pos: torch.Tensor, lowest: torch.Tensor, keys: torch.Tensor,
               is_active: torch.Tensor, m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, *, page_size: int,
               scale: float, softcap: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One KV tile of the online softmax for every query; queries not ``is_active`` keep their state."""
    # qf: [T, Hkv, G, D]; keys: [1, N]; pos, lowest: [T]; m, l: [T, Hkv, G]; acc: [T, Hkv, G, D]
    block_n = keys.shape[1]
    is_valid = (keys <= pos[:, None]) & (keys >= lowest[:, None])  # [T, N]: the keys each query sees
    safe_keys = torch.where(is_valid, keys, lowest[:, None])  # the query's first visible key exists; masked below
    pages = tables[seq[:, None], safe_keys // page_size]  # [T, N]
    slots = pages * page_size + safe_keys % page_size
    valid_kv = is_valid[:, :, None, None]
    k = torch.where(valid_kv, k_slots[slots].float(), 0.0).permute(0, 2, 1, 3)  # [T, Hkv, N, D]
    v = torch.where(valid_kv, v_slots[slots].float(), 0.0).permute(0, 2, 1, 3)
    scores = tree_sum(qf[:, :, :, None, :] * k[:, :, None, :, :]) * scale  # [T, Hkv, G, N]
    if softcap:
        scores = _softcap(scores, softcap)
    scores = torch.where(is_valid[:, None, None, :], scores, float("-inf"))
    m_new = torch.maximum(m, scores.amax(dim=-1))
    m_safe = torch.where(m_new > float("-inf"), m_new, 0.0)
    # one exp call for p and alpha: [..., :N] = scores - m_safe, [..., N] = m - m_safe
    weights = exp(torch.cat([scores - m_safe[..., None], (m - m_safe)[..., None]], dim=-1))
    p, alpha = weights[..., :block_n], weights[..., block_n]
    l_new = l * alpha + tree_sum(p)
    weighted = tree_sum(p[..., None] * v[:, :, None, :, :], dim=-2)  # [T, Hkv, G, D]
    acc_new = acc * alpha[..., None] + weighted
    keep = is_active[:, None, None]
    return torch.where(keep, m_new, m), torch.where(keep, l_new, l), torch.where(keep[..., None], acc_new, acc)


def attention_combine(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, query_start_loc: torch.Tensor,
                      seq_lens: torch.Tensor, seq_idx: torch.Tensor, out: torch.Tensor, nonfinite: torch.Tensor,
                      entry: PlanEntry) -> None:
    """Merge each query's segment states 0 .. pos // SEG in ascending order; writes ``out`` and ``nonfinite``."""
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32; out: [T, Hq, D]; nonfinite: [T, Hq] fp32
    check_attention_combine(m, l, acc, query_start_loc, seq_lens, seq_idx, out, nonfinite, entry)
    _merge(m, l, acc, query_start_loc, seq_lens, seq_idx, out, nonfinite, entry.constexpr_dict())


def attention_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                      query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor, out: torch.Tensor,
                      nonfinite: torch.Tensor, entry: PlanEntry) -> None:
    """The twin of kernels/attention_prefill.py: the same segment states merged in the same order as
    :func:`attention_partial` then :func:`attention_combine` (the kernel's arithmetic is the pair's)."""
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, page_size, Hkv, D]; nonfinite: [T, Hq] fp32
    check_attention_prefill(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, nonfinite,
                            entry)
    c = entry.constexpr_dict()
    num_segs = segment_count(block_table, entry)
    m = torch.empty(q.shape[0], q.shape[1], num_segs, dtype=torch.float32)  # m, l: [T, Hq, NUM_SEG]
    l = torch.empty_like(m)
    acc = torch.empty(q.shape[0], q.shape[1], num_segs, c["D"], dtype=torch.float32)  # [T, Hq, NUM_SEG, D]
    _walk(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, m, l, acc, c)
    _merge(m, l, acc, query_start_loc, seq_lens, seq_idx, out, nonfinite, c)


def _merge(m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, query_start_loc: torch.Tensor,
           seq_lens: torch.Tensor, seq_idx: torch.Tensor, out: torch.Tensor, nonfinite: torch.Tensor, c: dict) -> None:
    """:func:`attention_combine` after its checks, for the constexprs ``c``."""
    if out.shape[0] == 0:
        return
    pos = _positions(query_start_loc, seq_lens, seq_idx)  # [T]
    last_segment = pos // c["SEG"]  # [T]
    window = c.get("WINDOW", 0)
    # [T]: the segment of the first key each query sees (key 0, or its window start): a finite start
    first_segment = (pos - window + 1).clamp(min=0) // c["SEG"] if window else torch.zeros_like(pos)
    start = first_segment[:, None, None].expand(-1, m.shape[1], 1)  # [T, Hq, 1]
    m_all = m.gather(2, start).squeeze(2)  # [T, Hq]
    l_all = l.gather(2, start).squeeze(2)
    acc_all = acc.gather(2, start[..., None].expand(-1, -1, 1, acc.shape[3])).squeeze(2)  # [T, Hq, D]
    for s in range(int(first_segment.min()) + 1, int(last_segment.max()) + 1):
        m_s = m[:, :, s]
        m_new = torch.maximum(m_all, m_s)
        # one exp call for both scales: [..., 0] = m_all - m_new, [..., 1] = m_s - m_new
        scales = exp(torch.stack([m_all - m_new, m_s - m_new], dim=-1))
        alpha, beta = scales[..., 0], scales[..., 1]
        l_new = l_all * alpha + l[:, :, s] * beta
        acc_new = acc_all * alpha[..., None] + acc[:, :, s] * beta[..., None]
        keep = ((first_segment < s) & (s <= last_segment))[:, None]  # only the query's own segments are selected
        m_all = torch.where(keep, m_new, m_all)
        l_all = torch.where(keep, l_new, l_all)
        acc_all = torch.where(keep[..., None], acc_new, acc_all)
    quotient = acc_all / l_all[..., None]
    out.copy_(quotient.to(out.dtype))
    if c["CHECK"]:
        segments = torch.arange(m.shape[2])
        merged = (first_segment[:, None, None] <= segments) & (segments <= last_segment[:, None, None])  # read ones
        bad = [(merged & ~torch.isfinite(m)).any(-1), ~torch.isfinite(l_all), any_nonfinite(quotient, 1)]
        if out.dtype != torch.float32:  # float32: out holds the quotient's bits
            bad.append(any_nonfinite(out, 1))
        nonfinite.copy_(row_flags(*bad))
    else:
        nonfinite.zero_()
