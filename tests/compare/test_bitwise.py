"""Bitwise trace comparison: what counts as equal, and what a mismatch reports."""

import pytest
import torch

from engine.compare.bitwise import ObservedTrace, TraceProblem, compare_traces


def trace(n=4, vocab=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, vocab, generator=g)
    return ObservedTrace(tuple(range(n)), tuple((9, i + 1) for i in range(n)), logits)


def with_logits(t, logits):
    return ObservedTrace(t.tokens, t.sampler_states, logits)


def test_identical_traces_agree():
    assert compare_traces(trace(), trace()) is None


def test_one_element_reports_position_element_and_largest_difference():
    a = trace()
    logits = a.logits.clone()
    logits[2, 11] += 0.25
    logits[3, 4] += 1.0
    m = compare_traces(with_logits(a, logits), a)
    assert (m.position, m.element, m.what) == (2, 11, ("logits",))
    assert m.largest_difference == pytest.approx(0.25, rel=1e-6)
    assert m.num_differing_elements == 1 and m.num_differing_positions == 2


def test_last_bit_and_signed_zero_are_differences():
    a = trace()
    logits = a.logits.clone()
    logits[0, 0] = torch.nextafter(logits[0, 0], torch.tensor(float("inf")))
    m = compare_traces(with_logits(a, logits), a)
    assert m.position == 0 and m.element == 0 and 0 < m.largest_difference < 1e-6
    zeros, negzeros = a.logits.clone(), a.logits.clone()
    zeros[1, 3], negzeros[1, 3] = 0.0, -0.0
    assert torch.equal(zeros, negzeros)  # torch.equal calls these equal; the bit comparison does not
    assert compare_traces(with_logits(a, zeros), with_logits(a, negzeros)).element == 3


def test_token_and_sampler_state_differences():
    a = trace()
    b = ObservedTrace(a.tokens[:2] + (99,) + a.tokens[3:], a.sampler_states, a.logits)
    m = compare_traces(b, a)
    assert (m.position, m.what, m.element, m.candidate_token) == (2, ("token",), None, 99)
    c = ObservedTrace(a.tokens, a.sampler_states[:1] + ((9, 7),) + a.sampler_states[2:], a.logits)
    assert compare_traces(c, a).what == ("sampler_state",)


def test_lengths_full_and_prefix_modes():
    a = trace(4)
    short = a.head(2)
    assert compare_traces(short, a, mode="prefix") is None
    m = compare_traces(short, a)
    assert m.what == ("length",) and (m.candidate_length, m.reference_length) == (2, 4)
    assert compare_traces(a, short, mode="prefix").what == ("length",)


@pytest.mark.parametrize("bad", ["float64", "nan", "shape"])
def test_invalid_traces_are_problems_not_mismatches(bad):
    a = trace()
    if bad == "float64":
        b = with_logits(a, a.logits.double())
    elif bad == "nan":
        logits = a.logits.clone()
        logits[1, 2] = float("nan")
        b = with_logits(a, logits)
    else:
        b = with_logits(a, a.logits[:3])
    with pytest.raises(TraceProblem):
        compare_traces(b, a)


def _engine_trace(t):
    from engine.sampling_params import SamplerState
    from engine.trace import Trace, TraceEntry, row_digest

    entries = [TraceEntry(i, tok, SamplerState(*state), row_digest(row), row)
               for i, (tok, state, row) in enumerate(zip(t.tokens, t.sampler_states, t.logits))]
    return Trace((1, 2, 3), SamplerState(9, 0), entries)


@pytest.mark.parametrize("position,element", [(0, 0), (2, 7), (3, 15)])
def test_agrees_with_the_engines_prefix_comparability(position, element):
    from engine.trace import compare_traces as engine_compare

    a = trace()
    logits = a.logits.clone()
    logits[position, element] += 2.0 ** -20
    b = with_logits(a, logits)
    ours, theirs = compare_traces(b, a), engine_compare(_engine_trace(b), _engine_trace(a))
    assert not theirs.agree and theirs.first_difference.position == ours.position == position
    assert theirs.first_difference.element_index == ours.element == element
    assert theirs.first_difference.max_abs_diff == ours.largest_difference
    assert engine_compare(_engine_trace(a), _engine_trace(a)).agree and compare_traces(a, a) is None
