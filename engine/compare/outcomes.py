"""Verdicts: a comparison's outcome and a unit's, with the rules that decide pass, fail and error.

A bitwise mismatch is ``fail`` (a counterexample, even if a witness is also missing). Otherwise a
missing witness, an invalid trace or a reference that could not be computed is ``error``: the
comparison did not show what it claims, so it can never count as a pass. A negative-control unit
inverts the numerical part: it passes only when at least one mismatch was detected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.compare.bitwise import Mismatch, TraceProblem, compare_traces
from engine.compare.runs import RequestRun
from engine.compare.units import ComparisonSpec, RequestSpec, Unit
from engine.compare.witnesses import missing_request_witnesses

__all__ = ["ComparisonOutcome", "UnitOutcome", "judge", "unavailable"]


@dataclass(frozen=True, slots=True)
class ComparisonOutcome:
    """The verdict on one counted comparison."""

    comparison_id: str
    request: str
    status: str  # pass | fail | error
    mismatch: Mismatch | None = None
    problems: tuple[str, ...] = ()
    witness: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form for evidence details."""
        d: dict[str, Any] = {"id": self.comparison_id, "request": self.request, "status": self.status,
                             "witness": self.witness}
        if self.mismatch is not None:
            d["mismatch"] = self.mismatch.to_dict()
        if self.problems:
            d["problems"] = list(self.problems)
        return d


def judge(spec: ComparisonSpec, request: RequestSpec, candidate: RequestRun, reference: RequestRun) -> ComparisonOutcome:
    """Compare ``candidate`` with ``reference`` bitwise and check the comparison's witnesses."""
    problems = missing_request_witnesses(spec.witnesses, candidate, reference, request)
    mismatch = None
    try:
        mismatch = compare_traces(candidate.trace, reference.trace, mode=spec.mode)
    except TraceProblem as exc:
        problems.append(f"invalid trace: {exc}")
    status = "fail" if mismatch is not None else ("error" if problems else "pass")
    witness = candidate.witness_dict()
    witness["reference_cached_tokens"] = reference.cached_tokens
    witness["reference_chunk_boundaries"] = list(reference.chunk_boundaries)
    return ComparisonOutcome(spec.comparison_id, request.label, status, mismatch, tuple(problems), witness)


def unavailable(spec: ComparisonSpec, request_label: str, reason: str) -> ComparisonOutcome:
    """An ``error`` outcome for a comparison whose candidate or reference could not be produced."""
    return ComparisonOutcome(spec.comparison_id, request_label, "error", problems=(reason,))


@dataclass(slots=True)
class UnitOutcome:
    """All comparisons of one unit, engine-wide problems, and how the engine was configured."""

    unit: Unit
    comparisons: list[ComparisonOutcome]
    problems: list[str] = field(default_factory=list)
    engine_configs: dict[str, Any] = field(default_factory=dict)
    run_witnesses: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    expects_mismatch: bool = False  # a negative-control unit

    @property
    def num_failed(self) -> int:
        return sum(c.status == "fail" for c in self.comparisons)

    @property
    def num_errors(self) -> int:
        return sum(c.status == "error" for c in self.comparisons)

    @property
    def num_passed(self) -> int:
        return sum(c.status == "pass" for c in self.comparisons)

    @property
    def status(self) -> str:
        """pass, fail or error under the rules in this module's docstring."""
        if self.expects_mismatch:
            if self.problems or self.num_errors:
                return "error"
            return "pass" if self.num_failed else "fail"
        if self.num_failed:
            return "fail"
        if self.problems or self.num_errors:
            return "error"
        return "pass"
