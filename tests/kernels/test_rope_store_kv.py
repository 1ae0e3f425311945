"""RoPE with the KV write: q comes back rotated, each token's rotated K and its V land in its slot
with the bits of a rotation then a copy, wherever the page is, and nothing else in the cache changes."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels import ops
from tests.kernels import reference
from tests.kernels.invariance import FILLS, bits_equal, fill_rows
from tests.kernels.support import KERNEL_SETTINGS, plan_dtype


def _rotated(x: torch.Tensor, positions: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate-half in fp32 with one rounding to x's dtype: the arithmetic the kernel's docstring states."""
    half = x.shape[-1] // 2
    cos, sin = table[positions][:, None, :half], table[positions][:, None, half:]
    x1, x2 = x.float()[..., :half], x.float()[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


@KERNEL_SETTINGS
@given(num_tokens=st.integers(1, 64), num_pages=st.integers(4, 12), fill=st.sampled_from(FILLS),
       strided=st.booleans(), seed=st.integers(0, 2**16))
def test_rope_store_kv_writes_exactly_the_named_slots(plan, num_tokens, num_pages, fill, strided, seed):
    s, dtype = plan.shape, plan_dtype(plan)
    hq, hkv, d = s.num_heads, s.num_kv_heads, s.head_dim
    gen = torch.Generator().manual_seed(seed)
    num_slots = num_pages * s.page_size
    num_tokens = min(num_tokens, num_slots)
    shape = (num_pages, s.page_size, hkv, d)
    k_cache, v_cache = fill_rows(fill, shape, dtype, gen), fill_rows(fill, shape, dtype, gen)
    before_k, before_v = k_cache.clone(), v_cache.clone()
    slots = torch.randperm(num_slots, generator=gen)[:num_tokens]
    positions = torch.randint(0, 256, (num_tokens,), generator=gen)
    table = reference.rope_table(256, d, s.rope_theta)
    qkv = fill_rows("random", (num_tokens, hq + 2 * hkv, d), dtype, gen)
    q, k, v = qkv[:, :hq], qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]  # strided views, like slices of qkv
    if not strided:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    q_out = ops.rope_store_kv(q, k, v, positions, table, k_cache, v_cache, slots)
    assert q_out.shape == q.shape and q_out.is_contiguous()
    assert bits_equal(q_out, _rotated(q, positions, table))
    flat_k, flat_v = k_cache.view(num_slots, -1), v_cache.view(num_slots, -1)
    assert bits_equal(flat_k[slots], _rotated(k, positions, table).reshape(num_tokens, -1))
    assert bits_equal(flat_v[slots], v.reshape(num_tokens, -1))
    untouched = torch.ones(num_slots, dtype=torch.bool)
    untouched[slots] = False
    assert bits_equal(flat_k[untouched], before_k.view(num_slots, -1)[untouched])
    assert bits_equal(flat_v[untouched], before_v.view(num_slots, -1)[untouched])
    reference.assert_close(q_out, reference.rope(q, positions, table), dtype, what="rope q")
