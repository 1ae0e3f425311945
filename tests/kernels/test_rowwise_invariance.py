"""CPU path: a row's output is bitwise independent of batch size, row position, other rows, strides.

The sweep test runs every batch size 1..64 with the selected rows at spread positions and the
other rows random / zero / huge / NaN; the hypothesis test draws contents, positions, fills and
layouts at random.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels.launch import use_plan
from kernels.plan import plan_for
from tests.kernels.invariance import bits_equal, cases, row_invariance_failures, sweep
from tests.kernels.rowwise_ops import ROWWISE_OPS, scenario
from tests.kernels.support import KERNEL_SETTINGS, plan_dtype


@pytest.mark.parametrize("op", ROWWISE_OPS)
def test_rows_are_invariant_over_batch_sizes_1_to_64(plan, op):
    s = scenario(op, plan.shape, plan_dtype(plan), seed=1, num_selected=2)
    with use_plan(plan_for(s.shape)):
        failures = row_invariance_failures(s.fn, s.selected, s.make_others, sweep(2))
    assert not failures, failures[:3]


@pytest.mark.parametrize("op", ROWWISE_OPS)
@KERNEL_SETTINGS
@given(seed=st.integers(0, 2**16), num_selected=st.integers(1, 4), strided=st.booleans(), data=st.data())
def test_rows_are_invariant_for_random_batches(plan, op, seed, num_selected, strided, data):
    s = scenario(op, plan.shape, plan_dtype(plan), seed, num_selected=num_selected, strided=strided)
    with use_plan(plan_for(s.shape)):
        failures = row_invariance_failures(s.fn, s.selected, s.make_others, data.draw(cases(num_selected)))
    assert not failures, failures[:3]


@pytest.mark.parametrize("op", ["linear", "rms_norm_residual", "silu_mul"])
def test_rows_do_not_depend_on_the_thread_count(plan, op):
    s = scenario(op, plan.shape, plan_dtype(plan), seed=2, num_selected=48)
    with use_plan(plan_for(s.shape)):
        one_thread = s.fn(*s.selected)
        torch.set_num_threads(2)
        two_threads = s.fn(*s.selected)
    one_thread = one_thread if isinstance(one_thread, tuple) else (one_thread,)
    two_threads = two_threads if isinstance(two_threads, tuple) else (two_threads,)
    assert all(bits_equal(a, b) for a, b in zip(one_thread, two_threads))
