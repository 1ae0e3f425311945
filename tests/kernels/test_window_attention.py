"""CPU path: sliding-window attention and logit softcapping keep a query's bits independent of
the chunking, decode steps and companions, stay close to a float64 reference, and leave full
causal attention's plan keys and bits as they were."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels import configs, ops
from kernels.launch import PlanViolation, use_plan
from kernels.plan import plan_for, preset_plan
from kernels.shapes import ModelShape, preset
from tests.kernels import reference
from tests.kernels.attention_cases import (MISSING_PAGE, POISONS, Step, chunk_bounds, make_request, run_steps,
                                           schedule_failures)
from tests.kernels.support import KERNEL_SETTINGS, plan_dtype

# float32 plans: KV tiles and segments of 128 keys. Windows below a tile, just over one tile
# (and not a multiple of it), over a segment, and wider than the requests.
WINDOWS = (1, 5, 37, 130, 200, 1000)
SOFTCAP = 20.0


def _plan(dtype: str, softcap: float = 0.0):
    return plan_for(replace(preset("tiny"), dtype=dtype, attention_windows=(0,) + WINDOWS, attn_softcap=softcap))


def _request(plan, length: int, seed: int, fill: str = "random"):
    s = plan.shape
    return make_request(length, s.num_heads, s.num_kv_heads, s.head_dim, plan_dtype(plan),
                        torch.Generator().manual_seed(seed), fill)


def _attention(window: int, softcap: float = 0.0):
    return functools.partial(ops.paged_attention, window=window, softcap=softcap)


SCALE = preset("tiny").head_dim ** -0.5


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("softcap", [0.0, SOFTCAP])
@pytest.mark.parametrize("window", WINDOWS)
def test_windowed_attention_is_close_to_the_float64_reference(dtype, softcap, window):
    plan = _plan(dtype, softcap)
    with use_plan(plan):
        request = _request(plan, 300, seed=window)
        got = run_steps([Step(request, 0, 300)], page_size=16, scale=SCALE, gen=torch.Generator().manual_seed(1),
                        attention=_attention(window, softcap))[0]
    expected = reference.attention(request, SCALE, window=window, softcap=softcap)
    reference.assert_close(got, expected, plan_dtype(plan), what=f"attention, window {window}, softcap {softcap}")
    if window < 300:  # the window is in effect: full causal attention is far from it
        full = reference.attention(request, SCALE, softcap=softcap)
        assert (full - expected).abs().max() > 1e-2


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("softcap", [0.0, SOFTCAP])
@pytest.mark.parametrize("window", WINDOWS)
def test_prefill_chunked_prefill_and_decode_give_the_same_bits(window, softcap, dtype):
    # chunks shorter and longer than the window, ending inside a tile and on segment boundaries
    # (float32; bf16 segments are 8 tiles), then decode steps one token at a time across the next
    # tile boundary, beside other requests
    plan = _plan(dtype, softcap)
    with use_plan(plan):
        length = 290
        request = _request(plan, length, seed=window + 1)
        chunks = chunk_bounds(250, [3, 4, 40, 127, 128, 129, 200]) + [(p, p + 1) for p in range(250, length)]
        other = _request(plan, 140, seed=7)
        nan_other = _request(plan, 60, seed=8, fill="nan")
        companions = [[Step(other, 0, 140)], [], [Step(nan_other, 59, 60), Step(other, 130, 131)]]
        failures = schedule_failures(request, chunks, [companions[i % 3] for i in range(len(chunks))],
                                     [i % 2 for i in range(len(chunks))], page_size=16, scale=SCALE, seed=window,
                                     poison="nan", attention=_attention(window, softcap))
    assert not failures, failures[:3]


@KERNEL_SETTINGS
@given(window=st.sampled_from(WINDOWS), length=st.integers(1, 160), cuts=st.lists(st.integers(1, 159), max_size=5),
       seed=st.integers(0, 2**16), poison=st.sampled_from(POISONS), data=st.data())
def test_any_chunking_beside_any_companions_gives_the_same_bits(window, length, cuts, seed, poison, data):
    plan = _plan("float32")
    with use_plan(plan):
        request = _request(plan, length, seed)
        chunks = chunk_bounds(length, cuts)
        others = []
        for _ in chunks:
            steps = []
            for _ in range(data.draw(st.integers(0, 2))):
                other = _request(plan, data.draw(st.integers(1, 150)), data.draw(st.integers(0, 2**16)))
                start = data.draw(st.integers(0, other.length - 1))
                steps.append(Step(other, start, data.draw(st.integers(start + 1, other.length))))
            others.append(steps)
        where = [data.draw(st.integers(0, 2)) for _ in chunks]
        failures = schedule_failures(request, chunks, others, where, page_size=16, scale=SCALE, seed=seed,
                                     poison=poison, attention=_attention(window))
    assert not failures, failures[:3]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_window_wider_than_the_context_gives_full_causal_bits(dtype):
    plan = _plan(dtype, SOFTCAP)
    with use_plan(plan):
        request = _request(plan, 300, seed=4)
        outs = [run_steps([Step(request, 0, 300)], page_size=16, scale=SCALE, gen=torch.Generator().manual_seed(2),
                          attention=_attention(window, SOFTCAP))[0] for window in (0, 1000)]
    assert torch.equal(outs[0].view(torch.int16 if dtype == "bfloat16" else torch.int32),
                       outs[1].view(torch.int16 if dtype == "bfloat16" else torch.int32))


def test_pages_wholly_before_every_window_are_never_read():
    # decode at positions 300..303 with a 37-key window: pages 0..15 hold no key any query sees; their
    # block-table entries name no page and their slots are NaN, and the bits do not change (the host
    # metadata check, which asks every page up to the length to exist, is off for this launch)
    plan = _plan("float32")
    page_size, window, length = 16, 37, 304
    with use_plan(plan, check_metadata=False):
        request = _request(plan, length, seed=9)
        gen = torch.Generator().manual_seed(9)
        expected = run_steps([Step(request, 300, length)], page_size=page_size, scale=SCALE, gen=gen,
                             attention=_attention(window))[0]
        num_pages = length // page_size
        k_cache = torch.full((num_pages, page_size, 2, 16), float("nan"))
        v_cache = torch.full_like(k_cache, float("nan"))
        table = torch.full((1, num_pages), MISSING_PAGE, dtype=torch.int32)
        first_page = (300 - window + 1) // page_size
        for page in range(first_page, num_pages):
            table[0, page] = page
            k_cache[page] = request.k[page * page_size:(page + 1) * page_size]
            v_cache[page] = request.v[page * page_size:(page + 1) * page_size]
        got = ops.paged_attention(request.q[300:length], k_cache, v_cache, table,
                                  torch.tensor([0, 4], dtype=torch.int32), torch.tensor([length], dtype=torch.int32),
                                  SCALE, window=window)
    assert torch.equal(got.view(torch.int32), expected.view(torch.int32))


def test_full_causal_plan_entries_are_unchanged():
    # the keys and constexprs every existing preset had before windows existed
    tiny = preset_plan("tiny")
    assert tiny.entry("paged_attention.hq4_hkv2_d16_p16").constexpr_dict() == {
        "BLOCK_G": 2, "BLOCK_N": 128, "BLOCK_Q": 16, "D": 16, "DTYPE": "float32", "GROUP": 2, "PAGE_SIZE": 16,
        "SCALE": 0.25, "SEG": 128}
    # BLOCK_H (heads a merge program) came later, with the prefill bucket's merge entry (_h4)
    assert tiny.entry("attention_combine.hq4_d16_s128").constexpr_dict() == {
        "CHECK": 1, "D": 16, "DTYPE": "float32", "SEG": 128, "BLOCK_H": 1}
    llama = preset_plan("llama-1b")
    assert llama.entry("paged_attention.hq32_hkv8_d64_p16").constexpr_dict()["BLOCK_N"] == 128
    assert llama.entry("paged_attention.hq32_hkv8_d64_p16").constexpr_dict()["SEG"] == 1024
    for name in ("tiny", "llama-1b", "qwen3-0.6b", "mistral-7b"):
        # with the decode and prefill buckets, and the one-kernel form (its own decode bucket)
        keys = [k for k in preset_plan(name).keys() if "attention" in k]
        assert len(keys) == 6 and not any("_w" in k or "_cap" in k for k in keys), keys


def test_windowed_plans_hold_one_pair_per_window_and_wide_heads_take_64_key_tiles():
    shape = ModelShape(hidden_size=1152, num_layers=2, num_heads=4, num_kv_heads=1, head_dim=256,
                       intermediate_size=256, vocab_size=256, dtype="bfloat16", attention_windows=(0, 512),
                       attn_softcap=50.0)
    keys = [k for k in plan_for(shape).keys() if "attention" in k]
    assert keys == ["attention_combine.hq4_d256_s512", "attention_combine.hq4_d256_s512_h4",
                    "attention_combine.hq4_d256_s512_w512", "attention_combine.hq4_d256_s512_w512_h4",
                    "attention_prefill.hq4_hkv1_d256_p16_cap50", "attention_prefill.hq4_hkv1_d256_p16_cap50_q4",
                    "paged_attention.hq4_hkv1_d256_p16_cap50", "paged_attention.hq4_hkv1_d256_p16_cap50_q4",
                    "paged_attention.hq4_hkv1_d256_p16_w512_cap50", "paged_attention.hq4_hkv1_d256_p16_w512_cap50_q4"]
    entry = plan_for(shape).entry("paged_attention.hq4_hkv1_d256_p16_w512_cap50").constexpr_dict()
    assert (entry["BLOCK_N"], entry["SEG"], entry["WINDOW"], entry["SOFTCAP"]) == (64, 512, 512, 50.0)
    assert configs.paged_attention_config(num_heads=4, num_kv_heads=1, head_dim=16, page_size=16, scale=0.25,
                                          dtype="float32", softcap=30.5).key.endswith("_cap30p5")


@pytest.mark.parametrize("windows", [(32, 0), (0, 0), (-1,), (), (0, 2.5)])
def test_bad_windows_are_refused_with_the_field_named(windows):
    with pytest.raises(ValueError, match="attention_windows"):
        replace(preset("tiny"), attention_windows=windows)


@pytest.mark.parametrize("softcap", [-1.0, float("inf"), float("nan")])
def test_bad_softcaps_are_refused(softcap):
    with pytest.raises(ValueError, match="attn_softcap"):
        replace(preset("tiny"), attn_softcap=softcap)
    with pytest.raises(ValueError, match="softcap"):
        configs.paged_attention_config(num_heads=4, num_kv_heads=2, head_dim=16, page_size=16, scale=0.25,
                                       dtype="float32", softcap=softcap)


def test_a_window_the_plan_lacks_is_refused():
    with use_plan(_plan("float32")):
        request = _request(preset_plan("tiny"), 10, seed=1)
        with pytest.raises(PlanViolation, match="paged_attention"):
            run_steps([Step(request, 0, 10)], page_size=16, scale=SCALE, gen=torch.Generator().manual_seed(1),
                      attention=_attention(64))
