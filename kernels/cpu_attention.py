"""The CPU path of paged attention: per query, the kernel's KV-tile loop, vectorised over queries.

Query t visits tiles of BLOCK_N key positions, j = 0 .. positions[t] // BLOCK_N, in ascending
order, each key read from page ``block_table[b, key // PAGE_SIZE]``, with the Triton kernel's
tiles, masks, online softmax and -inf clamp (the arithmetic inside a tile is the CPU's own, so
CPU and GPU agree within tolerance, not bitwise). The Triton kernel also runs, for a query that
is not the last of its query block, the block's later tiles, which are fully masked for it and
exact identity steps; here the loop over j runs to the batch's longest query, and a query takes
the update of tile j only while j is one of its own tiles; otherwise ``where`` keeps its state
untouched (a selection, not arithmetic), so extra iterations cannot change it. Keys past the
query's position are replaced by zeros before use (their block-table entries and slots are
never read), scored -inf and weighted +0, so poisoned slots (NaN, inf, stale data) never reach
the result. Dot products and sums are ``tree_sum`` over a fixed [BLOCK_N, D] tile and ``exp``
is the position-independent one.
"""

from __future__ import annotations

import torch

from kernels.attention import check_paged_attention
from kernels.cpu_math import exp, tree_sum
from kernels.plan import PlanEntry

__all__ = ["paged_attention"]


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                    query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor, out: torch.Tensor,
                    entry: PlanEntry) -> None:
    """Causal paged attention of every query token; writes ``out``."""
    check_paged_attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, entry)
    c = entry.constexpr_dict()
    group, head_dim, page_size, block_n, scale = c["GROUP"], c["D"], c["PAGE_SIZE"], c["BLOCK_N"], c["SCALE"]
    num_tokens, num_heads = q.shape[0], q.shape[1]
    if num_tokens == 0:
        return
    num_kv_heads = num_heads // group
    qf = q.float().reshape(num_tokens, num_kv_heads, group, head_dim)  # qf: [T, Hkv, G, D]
    seq, starts = seq_idx.long(), query_start_loc.long()
    contexts = seq_lens.long() - (starts[1:] - starts[:-1])  # [B]: KV cached before this step
    pos = contexts[seq] + torch.arange(num_tokens) - starts[seq]  # [T]: each query's position
    num_tiles = pos // block_n + 1  # [T]
    tables = block_table.long()
    key_offsets = torch.arange(block_n)
    k_slots, v_slots = k_cache.flatten(0, 1), v_cache.flatten(0, 1)  # [num_pages * page_size, Hkv, D]
    neg_inf = torch.tensor(float("-inf"))
    m = torch.full((num_tokens, num_kv_heads, group), float("-inf"))
    l = torch.zeros(num_tokens, num_kv_heads, group)
    acc = torch.zeros(num_tokens, num_kv_heads, group, head_dim)
    for j in range(int(num_tiles.max())):
        is_active = num_tiles > j  # [T]: tile j is one of this query's tiles
        keys = j * block_n + key_offsets[None, :]  # [1, N]
        is_valid = keys <= pos[:, None]  # [T, N]
        safe_keys = torch.where(is_valid, keys, 0)  # key 0 always exists; its value is masked below
        pages = tables[seq[:, None], safe_keys // page_size]  # [T, N]
        slots = pages * page_size + safe_keys % page_size
        valid_kv = is_valid[:, :, None, None]
        k = torch.where(valid_kv, k_slots[slots].float(), 0.0).permute(0, 2, 1, 3)  # [T, Hkv, N, D]
        v = torch.where(valid_kv, v_slots[slots].float(), 0.0).permute(0, 2, 1, 3)
        scores = tree_sum(qf[:, :, :, None, :] * k[:, :, None, :, :]) * scale  # [T, Hkv, G, N]
        scores = torch.where(is_valid[:, None, None, :], scores, neg_inf)
        m_new = torch.maximum(m, scores.amax(dim=-1))
        m_safe = torch.where(m_new > float("-inf"), m_new, 0.0)
        # one exp call for p and alpha: [..., :N] = scores - m_safe, [..., N] = m - m_safe
        weights = exp(torch.cat([scores - m_safe[..., None], (m - m_safe)[..., None]], dim=-1))
        p, alpha = weights[..., :block_n], weights[..., block_n]
        l_new = l * alpha + tree_sum(p)
        weighted = tree_sum(p[..., None] * v[:, :, None, :, :], dim=-2)  # [T, Hkv, G, D]
        acc_new = acc * alpha[..., None] + weighted
        keep = is_active[:, None, None]
        m = torch.where(keep, m_new, m)
        l = torch.where(keep, l_new, l)
        acc = torch.where(keep[..., None], acc_new, acc)
    out.copy_((acc / l[..., None]).reshape(num_tokens, num_heads, head_dim).to(out.dtype))
