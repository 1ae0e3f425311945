"""A unit record's one-line summary names the claim its suite makes: bitwise equality, or tolerance."""

from engine.compare.outcomes import ComparisonOutcome, UnitOutcome
from engine.compare.records import _summary
from engine.compare.units import ComparisonSpec, Unit


def _outcome(suite: str, statuses: list[str]) -> UnitOutcome:
    specs = tuple(ComparisonSpec(f"{suite}.c{i}", f"p{i}", "independent-reference") for i in range(len(statuses)))
    unit = Unit(f"{suite}.u0", suite, specs)
    return UnitOutcome(unit, [ComparisonOutcome(s.comparison_id, s.candidate, st) for s, st in zip(specs, statuses)])


def test_a_fidelity_unit_claims_tolerance_not_bitwise_equality():
    text = _summary(_outcome("fidelity", ["pass", "pass", "fail"]))
    assert text == "fidelity.u0: 2/3 comparisons within tolerance of the reference, 1 outside tolerance"
    assert "bitwise" not in text


def test_a_determinism_unit_claims_bitwise_equality():
    text = _summary(_outcome("batch", ["pass", "fail", "error"]))
    assert text.startswith("batch.u0: 1/3 comparisons bitwise equal, 1 mismatched, 1 without required witness")
