"""KV writes: each token's K/V lands bit-exactly in its slot, wherever the page is, and nothing
else in the cache changes."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels import ops
from tests.kernels.invariance import FILLS, bits_equal, fill_rows
from tests.kernels.support import KERNEL_SETTINGS, plan_dtype


@KERNEL_SETTINGS
@given(num_tokens=st.integers(1, 64), num_pages=st.integers(4, 12), fill=st.sampled_from(FILLS),
       strided=st.booleans(), seed=st.integers(0, 2**16))
def test_store_kv_writes_exactly_the_named_slots(plan, num_tokens, num_pages, fill, strided, seed):
    s, dtype = plan.shape, plan_dtype(plan)
    gen = torch.Generator().manual_seed(seed)
    num_slots = num_pages * s.page_size
    num_tokens = min(num_tokens, num_slots)
    shape = (num_pages, s.page_size, s.num_kv_heads, s.head_dim)
    k_cache, v_cache = fill_rows(fill, shape, dtype, gen), fill_rows(fill, shape, dtype, gen)
    before_k, before_v = k_cache.clone(), v_cache.clone()
    slots = torch.randperm(num_slots, generator=gen)[:num_tokens]
    rows = fill_rows("random", (num_tokens, 2 * s.num_kv_heads, s.head_dim), dtype, gen)
    k, v = rows[:, :s.num_kv_heads], rows[:, s.num_kv_heads:]  # strided views, like slices of qkv
    if not strided:
        k, v = k.contiguous(), v.contiguous()
    ops.store_kv(k, v, k_cache, v_cache, slots)
    flat_k, flat_v = k_cache.view(num_slots, -1), v_cache.view(num_slots, -1)
    assert bits_equal(flat_k[slots], k.reshape(num_tokens, -1))
    assert bits_equal(flat_v[slots], v.reshape(num_tokens, -1))
    untouched = torch.ones(num_slots, dtype=torch.bool)
    untouched[slots] = False
    assert bits_equal(flat_k[untouched], before_k.view(num_slots, -1)[untouched])
    assert bits_equal(flat_v[untouched], before_v.view(num_slots, -1)[untouched])
