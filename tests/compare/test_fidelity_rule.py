"""The fidelity suite's tolerance rule: fixed, or widened by an independent bfloat16 implementation's own distance."""

import torch

from engine.compare.suites.fidelity import TOLERANCE, YARDSTICK_FACTOR, _judge, tolerance
from engine.compare.units import ComparisonSpec

SPEC = ComparisonSpec("fidelity.f0", "f0", "independent-reference")


def _rows(seed: int = 0) -> torch.Tensor:
    # [4, 64] float64, largest |logit| about 8 so the fixed bf16 tolerance is about 0.4
    return 2 * torch.randn(4, 64, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_without_a_yardstick_the_tolerance_is_the_fixed_one():
    expected = _rows()
    limit, rule = tolerance(TOLERANCE["bfloat16"], expected)
    assert limit == TOLERANCE["bfloat16"] * float(expected.abs().max())
    assert rule == {"fixed_tolerance": limit, "rule": "fixed"}


def test_a_yardstick_closer_than_the_fixed_tolerance_changes_nothing():
    expected = _rows()
    fixed, _ = tolerance(TOLERANCE["bfloat16"], expected)
    limit, rule = tolerance(TOLERANCE["bfloat16"], expected, expected + fixed / 10)
    assert limit == fixed and rule["rule"] == "fixed"
    assert abs(rule["yardstick_max_abs_difference"] - fixed / 10) < 1e-12


def test_a_farther_yardstick_widens_the_tolerance_by_the_factor():
    expected = _rows()
    fixed, _ = tolerance(TOLERANCE["bfloat16"], expected)
    yardstick = expected.clone()
    yardstick[2, 7] += 2 * fixed
    limit, rule = tolerance(TOLERANCE["bfloat16"], expected, yardstick)
    assert rule["rule"] == "yardstick"
    assert abs(limit - YARDSTICK_FACTOR * 2 * fixed) < 1e-9


def test_an_engine_as_far_as_the_yardstick_passes_and_twice_as_far_fails():
    expected = _rows()
    fixed, _ = tolerance(TOLERANCE["bfloat16"], expected)
    yardstick = expected + 2 * fixed  # every logit moved: argmax unchanged
    tokens = expected.argmax(-1).tolist()
    near = _judge(SPEC, "f0", expected + 2 * fixed, tokens, expected, TOLERANCE["bfloat16"], yardstick)
    assert near.status == "pass", near.problems
    assert near.witness["fidelity"]["rule"] == "yardstick"
    far = _judge(SPEC, "f0", expected + 4 * fixed, tokens, expected, TOLERANCE["bfloat16"], yardstick)
    assert far.status == "fail"
    assert "yardstick rule" in far.problems[0]
    assert _judge(SPEC, "f0", expected + 2 * fixed, tokens, expected, TOLERANCE["bfloat16"]).status == "fail"


def test_the_widened_tolerance_also_widens_which_greedy_positions_are_decided():
    expected = torch.zeros(1, 8, dtype=torch.float64)
    expected[0, 3], expected[0, 5] = 8.0, 7.0  # fixed tolerance 0.4: a gap of 1 > 2 x 0.4 is decided
    wrong = [5]
    assert _judge(SPEC, "f0", expected, wrong, expected, TOLERANCE["bfloat16"]).status == "fail"
    yardstick = expected + 0.5  # tolerance 0.75: the gap of 1 is within 2 x 0.75, not decided
    outcome = _judge(SPEC, "f0", expected, wrong, expected, TOLERANCE["bfloat16"], yardstick)
    assert outcome.status == "pass", outcome.problems
