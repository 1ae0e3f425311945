"""CPU path: a query's attention output is the same bits in prefill, any chunking and decode,
whatever else is in the batch, wherever its pages sit and whatever the unwritten slots hold."""

from __future__ import annotations

from dataclasses import replace

import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels.launch import use_plan
from kernels.plan import plan_for
from kernels.shapes import preset
from tests.kernels import reference
from tests.kernels.attention_cases import (POISONS, Request, Step, chunk_bounds, make_request, run_steps,
                                           schedule_failures)
from tests.kernels.invariance import FILLS
from tests.kernels.support import KERNEL_SETTINGS, plan_dtype


def _request(plan, length: int, seed: int, fill: str = "random") -> Request:
    s = plan.shape
    return make_request(length, s.num_heads, s.num_kv_heads, s.head_dim, plan_dtype(plan),
                        torch.Generator().manual_seed(seed), fill)


def _scale(plan) -> float:
    return plan.shape.head_dim ** -0.5


@st.composite
def companions(draw: st.DrawFn, plan) -> list[Step]:
    """Up to three other requests, each mid-way through its own prompt, any contents."""
    steps = []
    for _ in range(draw(st.integers(0, 3))):
        length = draw(st.integers(1, 40))
        start = draw(st.integers(0, length - 1))
        other = _request(plan, length, draw(st.integers(0, 2**16)), draw(st.sampled_from(FILLS)))
        steps.append(Step(other, start, draw(st.integers(start + 1, length))))
    return steps


@KERNEL_SETTINGS
@given(length=st.integers(1, 70), cuts=st.lists(st.integers(1, 69), max_size=5), seed=st.integers(0, 2**16),
       poison=st.sampled_from(POISONS), data=st.data())
def test_chunked_prefill_rows_equal_full_prefill(plan, length, cuts, seed, poison, data):
    request = _request(plan, length, seed)
    chunks = chunk_bounds(length, cuts)
    others = [data.draw(companions(plan)) for _ in chunks]
    where = [data.draw(st.integers(0, 3)) for _ in chunks]
    failures = schedule_failures(request, chunks, others, where, page_size=plan.shape.page_size,
                                 scale=_scale(plan), seed=seed, poison=poison)
    assert not failures, failures[:3]


@KERNEL_SETTINGS
@given(prompt=st.integers(1, 40), decode_steps=st.integers(1, 12), seed=st.integers(0, 2**16),
       poison=st.sampled_from(POISONS), data=st.data())
def test_decode_rows_equal_prefill_rows(plan, prompt, decode_steps, seed, poison, data):
    length = prompt + decode_steps
    request = _request(plan, length, seed)
    chunks = [(0, prompt)] + [(p, p + 1) for p in range(prompt, length)]
    others = [data.draw(companions(plan)) for _ in chunks]
    where = [data.draw(st.integers(0, 3)) for _ in chunks]
    failures = schedule_failures(request, chunks, others, where, page_size=plan.shape.page_size,
                                 scale=_scale(plan), seed=seed, poison=poison)
    assert not failures, failures[:3]


def test_page_boundaries_and_every_poison(plan):
    page = plan.shape.page_size
    for length in (page - 1, page, page + 1, 2 * page, 2 * page + 1):
        request = _request(plan, length, seed=length)
        chunks = chunk_bounds(length, [page // 2, page, page + 1])
        for poison in POISONS:
            failures = schedule_failures(request, chunks, [[] for _ in chunks], [0] * len(chunks), page_size=page,
                                         scale=_scale(plan), seed=length, poison=poison)
            assert not failures, failures[:3]


def test_segment_boundaries_chunked_and_decoded(plan_fp32):
    # A request over three KV segments: chunks that end inside a segment, span a boundary and start
    # at a segment's first key, then decode steps across the last boundary, beside other requests.
    # float32 only: its segments are one KV tile (bf16 plans have 8-tile segments, too long for CPU).
    plan = plan_fp32
    seg = plan.entry(next(k for k in plan.keys() if k.startswith("paged_attention."))).constexpr_dict()["SEG"]
    length = 2 * seg + 5
    request = _request(plan, length, seed=3)
    chunks = chunk_bounds(length, [seg - 3, seg, seg + 1, 2 * seg - 1, 2 * seg, 2 * seg + 1])
    others = [_request(plan, 40, seed=4, fill="nan"), _request(plan, seg + 2, seed=5)]
    companions_of = [[Step(o, 0, o.length) for o in others[: i % 3]] for i in range(len(chunks))]
    failures = schedule_failures(request, chunks, companions_of, [i % 3 for i in range(len(chunks))],
                                 page_size=plan.shape.page_size, scale=_scale(plan), seed=3, poison="nan")
    assert not failures, failures[:3]
    got = run_steps([Step(request, 0, length)], page_size=plan.shape.page_size, scale=_scale(plan),
                    gen=torch.Generator().manual_seed(3))[0]
    reference.assert_close(got, reference.attention(request, _scale(plan)), plan_dtype(plan), what="attention")


def test_a_nan_request_does_not_touch_its_neighbours(plan):
    request = _request(plan, 33, seed=5)
    poisoned = _request(plan, 33, seed=6, fill="nan")
    failures = schedule_failures(request, [(0, 33)], [[Step(poisoned, 0, 33), Step(poisoned, 0, 20)]], [1],
                                 page_size=plan.shape.page_size, scale=_scale(plan), seed=5, poison="nan")
    assert not failures, failures


@KERNEL_SETTINGS
@given(page_size=st.sampled_from([1, 4, 8, 32]), length=st.integers(1, 70),
       cuts=st.lists(st.integers(1, 69), max_size=4), seed=st.integers(0, 2**16), poison=st.sampled_from(POISONS),
       data=st.data())
def test_other_page_sizes_keep_rows_invariant_and_accurate(page_size, length, cuts, seed, poison, data):
    # Pages under 16 slots share one KV tile of 16 keys; larger pages are one tile each.
    plan = plan_for(replace(preset("tiny"), page_size=page_size))
    with use_plan(plan):
        request = _request(plan, length, seed)
        chunks = chunk_bounds(length, cuts)
        others = [data.draw(companions(plan)) for _ in chunks]
        failures = schedule_failures(request, chunks, others, [0] * len(chunks), page_size=page_size,
                                     scale=_scale(plan), seed=seed, poison=poison)
        assert not failures, failures[:3]
        got = run_steps([Step(request, 0, length)], page_size=page_size, scale=_scale(plan),
                        gen=torch.Generator().manual_seed(seed))[0]
    reference.assert_close(got, reference.attention(request, _scale(plan)), torch.float32, what="attention")
