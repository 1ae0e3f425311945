"""Prefix comparability of traces and the location of the first difference."""

import pytest
import torch

from engine.sampling_params import SamplerState
from engine.trace import Trace, TraceEntry, compare_traces, row_digest


def trace(rows, tokens, *, prompt=(1, 2), seed=0, keep=True):
    entries = [TraceEntry(i, t, SamplerState(seed, i + 1), row_digest(r), r if keep else None)
               for i, (r, t) in enumerate(zip(rows, tokens))]
    return Trace(tuple(prompt), SamplerState(seed, 0), entries)


ROWS = [torch.arange(8, dtype=torch.float32) * (i + 1) for i in range(4)]


def test_a_shorter_trace_that_is_a_prefix_agrees():
    verdict = compare_traces(trace(ROWS, [1, 2, 3, 4]), trace(ROWS[:2], [1, 2]))
    assert verdict.agree and verdict.num_compared == 2 and verdict.first_difference is None


def test_the_first_logit_difference_is_located():
    changed = [r.clone() for r in ROWS]
    changed[2][5] += 0.25
    changed[3][0] += 9.0
    diff = compare_traces(trace(ROWS, [1, 2, 3, 4]), trace(changed, [1, 2, 3, 4])).first_difference
    assert (diff.position, diff.what, diff.element_index, diff.max_abs_diff) == (2, "logits", 5, 0.25)


def test_negative_zero_is_a_bitwise_difference():
    a, b = torch.zeros(3), torch.tensor([0.0, -0.0, 0.0])
    diff = compare_traces(trace([a], [0]), trace([b], [0])).first_difference
    assert diff.element_index == 1 and diff.max_abs_diff == 0.0


def test_token_and_state_differences():
    assert compare_traces(trace(ROWS, [1, 2]), trace(ROWS, [1, 3])).first_difference.what == "token"
    other = trace(ROWS, [1, 2])
    other.entries[1] = TraceEntry(1, 2, SamplerState(0, 7), other.entries[1].logits_digest, ROWS[1])
    assert compare_traces(trace(ROWS, [1, 2]), other).first_difference.what == "sampler_state"


def test_digest_only_traces_locate_the_position():
    changed = [ROWS[0], ROWS[1] + 1]
    diff = compare_traces(trace(ROWS, [1, 2], keep=False), trace(changed, [1, 2])).first_difference
    assert diff.position == 1 and diff.element_index is None and "not kept" in diff.describe()


def test_traces_of_different_requests_are_not_comparable():
    with pytest.raises(ValueError, match="different requests"):
        compare_traces(trace(ROWS, [1]), trace(ROWS, [1], prompt=(1, 3)))
    with pytest.raises(ValueError, match="different requests"):
        compare_traces(trace(ROWS, [1]), trace(ROWS, [1], seed=4))
