"""Resolve each comparison's candidate and reference runs and judge them."""

from __future__ import annotations

from typing import Mapping

from engine.compare.context import SuiteContext
from engine.compare.outcomes import ComparisonOutcome, judge, unavailable
from engine.compare.references import ReferenceError
from engine.compare.runs import RequestRun
from engine.compare.units import ReferenceJob, RequestSpec, Unit

__all__ = ["judge_unit"]


def _resolve(name: str, unit: Unit, ctx: SuiteContext, runs: Mapping[str, RequestRun],
             jobs: Mapping[str, ReferenceJob]) -> tuple[RequestSpec, RequestRun]:
    if name.startswith("job:"):
        job = jobs[name]
        return job.request, ctx.references.get(job)
    if name not in runs:
        raise LookupError(f"request {name} produced no trace")
    return unit.requests[name], runs[name]


def judge_unit(unit: Unit, ctx: SuiteContext, runs: Mapping[str, RequestRun]) -> list[ComparisonOutcome]:
    """Judge every comparison of ``unit`` given the candidate runs it produced (by request label).

    A reference that cannot be computed, or a candidate that produced no trace, makes that
    comparison an ``error``; the other comparisons are still judged.
    """
    outcomes = []
    jobs = {job.ref: job for job in unit.references}
    for spec in unit.comparisons:
        label = spec.candidate
        try:
            request, candidate = _resolve(spec.candidate, unit, ctx, runs, jobs)
            label = request.label
            _, reference = _resolve(spec.reference, unit, ctx, runs, jobs)
        except (ReferenceError, LookupError) as exc:
            outcomes.append(unavailable(spec, label, str(exc)))
            continue
        outcomes.append(judge(spec, request, candidate, reference))
    return outcomes
