"""Negative controls: non-invariant variants must fail the same helpers the kernels pass.

Without these, a helper that compares the wrong rows (or nothing) would pass everything.
"""

from __future__ import annotations

import torch

from kernels import metadata
from kernels.cpu_math import exp, tree_sum
from tests.kernels.attention_cases import make_request, schedule_failures
from tests.kernels.invariance import fill_rows, row_invariance_failures, sweep


def _matmul_rows(fn, k: int, dtype: torch.dtype) -> list[str]:
    gen = torch.Generator().manual_seed(0)
    selected = (torch.randn(2, k, generator=gen).to(dtype),)
    return row_invariance_failures(fn, selected, lambda kind, n, g: (fill_rows(kind, (n, k), dtype, g),),
                                   sweep(2, fills=("random",)))


def m_keyed_split_k(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The CPU path's arithmetic, except BLOCK_K is chosen from M (as an autotuner might).

    Returns float32 like the logits op: a bf16 output rounding would hide most differences
    (which is also why bitwise tests compare float32 logit rows)."""
    block_k = 16 if x.shape[0] > 8 else 64
    acc = torch.zeros(x.shape[0], weight.shape[0])
    for k0 in range(0, x.shape[1], block_k):
        acc = acc + tree_sum(x.float()[:, None, k0:k0 + block_k] * weight.float()[None, :, k0:k0 + block_k])
    return acc


def test_torch_default_cpu_matmul_fails_the_row_helper():
    weight = torch.randn(128, 64, generator=torch.Generator().manual_seed(1))
    failures = _matmul_rows(lambda x: x @ weight.T, 64, torch.float32)
    assert failures, "torch's CPU matmul unexpectedly gave identical rows for every batch size"


def test_m_keyed_block_k_fails_the_row_helper():
    for dtype in (torch.float32, torch.bfloat16):
        weight = torch.randn(128, 64, generator=torch.Generator().manual_seed(1)).to(dtype)
        failures = _matmul_rows(lambda x: m_keyed_split_k(x, weight), 64, dtype)
        assert len(failures) >= 40, f"{dtype}: only {len(failures)} batch sizes detected"


def batch_keyed_attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, scale):
    """Online softmax whose KV tile is half a page once the batch holds more than 16 query rows."""
    num_tokens, num_heads, head_dim = q.shape
    page_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    tile = page_size // 2 if num_tokens > 16 else page_size
    seq_idx, positions = metadata.attention_token_metadata(query_start_loc, seq_lens, num_tokens)
    out = torch.empty_like(q)
    for t in range(num_tokens):
        pos = int(positions[t])
        pages = block_table[int(seq_idx[t])].long()[: pos // page_size + 1]
        keys = k_cache[pages].flatten(0, 1)[: pos + 1].float().repeat_interleave(num_heads // num_kv_heads, 1)
        values = v_cache[pages].flatten(0, 1)[: pos + 1].float().repeat_interleave(num_heads // num_kv_heads, 1)
        m = torch.full((num_heads,), float("-inf"))
        l, acc = torch.zeros(num_heads), torch.zeros(num_heads, head_dim)
        for j in range(0, pos + 1, tile):
            s = tree_sum(q[t].float()[None] * keys[j:j + tile]) * scale  # [tile, Hq]
            m_new = torch.maximum(m, s.amax(0))
            alpha, p = exp(m - m_new), exp(s - m_new)
            l = l * alpha + tree_sum(p, dim=0)
            acc = acc * alpha[:, None] + tree_sum(p[:, :, None] * values[j:j + tile], dim=0)
            m = m_new
        out[t] = (acc / l[:, None]).to(q.dtype)
    return out


def test_batch_keyed_attention_tiles_fail_the_schedule_helper():
    request = make_request(40, 4, 2, 16, torch.float32, torch.Generator().manual_seed(3))
    chunks = [(0, 24), (24, 25), (25, 40)]
    failures = schedule_failures(request, chunks, [[], [], []], [0, 0, 0], page_size=16, scale=0.25, seed=3,
                                 poison="zero", attention=batch_keyed_attention)
    assert len(failures) >= 2, failures
