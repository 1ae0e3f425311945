"""The CPU path of paged attention: per query, the kernel's KV-tile loop, vectorised over queries.

Query t visits tiles j = 0 .. positions[t] // PAGE_SIZE in ascending order, like the Triton
kernel's program for t (same tiles, masks, online softmax and -inf clamp; the arithmetic inside
a tile is the CPU's own, so CPU and GPU agree within tolerance, not bitwise). The loop over j runs to the batch's longest query, but a
query takes the update of tile j only while j is one of its own tiles; otherwise ``where``
keeps its state untouched (a selection, not arithmetic), so extra iterations cannot change it.
Future keys of the last tile are replaced by zeros before use, scored -inf and weighted +0, so
poisoned slots (NaN, inf, stale data) never reach the result. Dot products and sums are
``tree_sum`` over a fixed [PAGE_SIZE, D] tile and ``exp`` is the position-independent one.
"""

from __future__ import annotations

import torch

from kernels.attention import check_paged_attention
from kernels.cpu_math import exp, tree_sum
from kernels.plan import PlanEntry

__all__ = ["paged_attention"]


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                    seq_idx: torch.Tensor, positions: torch.Tensor, out: torch.Tensor, entry: PlanEntry) -> None:
    """Causal paged attention of every query token; writes ``out``."""
    check_paged_attention(q, k_cache, v_cache, block_table, seq_idx, positions, out, entry)
    c = entry.constexpr_dict()
    group, head_dim, page_size, scale = c["GROUP"], c["D"], c["PAGE_SIZE"], c["SCALE"]
    num_tokens, num_heads = q.shape[0], q.shape[1]
    if num_tokens == 0:
        return
    num_kv_heads = num_heads // group
    qf = q.float().reshape(num_tokens, num_kv_heads, group, head_dim)  # qf: [T, Hkv, G, D]
    pos, seq = positions.long(), seq_idx.long()
    num_tiles = pos // page_size + 1  # [T]
    tables = block_table.long()
    key_offsets = torch.arange(page_size)
    neg_inf = torch.tensor(float("-inf"))
    m = torch.full((num_tokens, num_kv_heads, group), float("-inf"))
    l = torch.zeros(num_tokens, num_kv_heads, group)
    acc = torch.zeros(num_tokens, num_kv_heads, group, head_dim)
    for j in range(int(num_tiles.max())):
        is_active = num_tiles > j  # [T]: tile j is one of this query's tiles
        pages = tables[seq, torch.where(is_active, j, 0)]  # [T]
        is_valid = j * page_size + key_offsets[None, :] <= pos[:, None]  # [T, P]
        valid_kv = is_valid[:, :, None, None]
        k = torch.where(valid_kv, k_cache.index_select(0, pages).float(), 0.0)  # [T, P, Hkv, D]
        v = torch.where(valid_kv, v_cache.index_select(0, pages).float(), 0.0)
        k, v = k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)  # [T, Hkv, P, D]
        scores = tree_sum(qf[:, :, :, None, :] * k[:, :, None, :, :]) * scale  # [T, Hkv, G, P]
        scores = torch.where(is_valid[:, None, None, :], scores, neg_inf)
        m_new = torch.maximum(m, scores.amax(dim=-1))
        m_safe = torch.where(m_new > float("-inf"), m_new, 0.0)
        # one exp call for p and alpha: [..., :P] = scores - m_safe, [..., P] = m - m_safe
        weights = exp(torch.cat([scores - m_safe[..., None], (m - m_safe)[..., None]], dim=-1))
        p, alpha = weights[..., :page_size], weights[..., page_size]
        l_new = l * alpha + tree_sum(p)
        weighted = tree_sum(p[..., None] * v[:, :, None, :, :], dim=-2)  # [T, Hkv, G, D]
        acc_new = acc * alpha[..., None] + weighted
        keep = is_active[:, None, None]
        m = torch.where(keep, m_new, m)
        l = torch.where(keep, l_new, l)
        acc = torch.where(keep[..., None], acc_new, acc)
    out.copy_((acc / l[..., None]).reshape(num_tokens, num_heads, head_dim).to(out.dtype))
