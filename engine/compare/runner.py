"""Plan the selected suites, pick the shard's units, run each unit and collect outcomes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from engine.compare.context import SuiteContext, base_overrides
from engine.compare.outcomes import UnitOutcome, unavailable
from engine.compare.progress import ProgressCallback, ProgressEvent
from engine.compare.references import ReferencePool
from engine.compare.runs import EngineFactory
from engine.compare.scales import ScaleSpec
from engine.compare.suites import batch, chunk, fidelity, negative, prefill_decode, prefix, schedule
from engine.compare.units import Unit

__all__ = ["PLANNERS", "RunInterrupted", "plan_units", "run_units"]

PLANNERS = {"batch": batch, "chunk": chunk, "prefill-decode": prefill_decode, "prefix": prefix,
            "schedule": schedule, "negative-control": negative, "fidelity": fidelity}


class RunInterrupted(KeyboardInterrupt):
    """The run was interrupted (KeyboardInterrupt): ``outcomes`` are the units that finished before it.

    Still a KeyboardInterrupt, so a caller that does not keep partial runs stops as before."""

    def __init__(self, outcomes: list[UnitOutcome]) -> None:
        super().__init__(f"interrupted after {len(outcomes)} finished units")
        self.outcomes = outcomes


def plan_units(suites: Sequence[str], scale: ScaleSpec, vocab_size: int, seed: int) -> list[Unit]:
    """Every unit of ``suites`` in protocol order (identical on every machine)."""
    return [u for name in suites for u in PLANNERS[name].plan(scale, vocab_size, seed)]


def _crashed(unit: Unit, exc: BaseException) -> UnitOutcome:
    reason = f"the unit could not run: {type(exc).__name__}: {exc}"
    return UnitOutcome(unit, [unavailable(c, c.candidate, reason) for c in unit.comparisons], problems=[reason],
                       expects_mismatch=unit.suite == "negative-control")


def _run_one(unit: Unit, ctx: SuiteContext, control_ctx: Callable[[], SuiteContext]) -> UnitOutcome:
    if unit.suite != "negative-control":
        return PLANNERS[unit.suite].run(unit, ctx)
    source = negative.source_unit(unit)
    inner = PLANNERS[source.suite].run(source, control_ctx())
    comparisons = [replace(c, comparison_id=f"negative.{c.comparison_id}") for c in inner.comparisons]
    return replace(inner, unit=unit, comparisons=comparisons, expects_mismatch=True)


def run_units(units: Sequence[Unit], *, model_dir: Path, scale: ScaleSpec, vocab_size: int, seed: int,
              device: str, factory: EngineFactory, factory_spec: str, expected_core: str | None = None,
              progress: ProgressCallback | None = None, worker_timeout: float | None = None) -> list[UnitOutcome]:
    """Run ``units`` in order; a unit that raises becomes an ``error`` outcome, the run goes on.

    Cold references come from fresh worker processes started on first use; the negative control
    gets its own perturbed engine and its own perturbed reference workers. ``worker_timeout``
    bounds a worker's silence (``worker_client.resolve_timeout``). A KeyboardInterrupt drops the
    unit in progress, stops the workers and raises :class:`RunInterrupted` with the finished units.
    """
    base = base_overrides(scale, device)
    pools: list[ReferencePool] = []
    contexts: dict[str | None, SuiteContext] = {}

    def context(perturbation: str | None) -> SuiteContext:
        if perturbation not in contexts:
            pool = ReferencePool(model_dir, base, factory=factory_spec, perturbation=perturbation,
                                 expected_core=expected_core, timeout=worker_timeout)
            pools.append(pool)
            contexts[perturbation] = SuiteContext(model_dir, scale, vocab_size, seed, device, factory, pool,
                                                  perturbation=perturbation, progress=progress,
                                                  expected_core=expected_core)
        return contexts[perturbation]

    outcomes: list[UnitOutcome] = []
    interrupted = False
    if progress is not None:
        progress(ProgressEvent("start", f"{len(units)} units", total=len(units)))
    try:
        for unit in units:  # workers start computing every known reference while candidates run
            control = unit.suite == "negative-control"
            context(negative.PERTURBATION if control else None).references.prefetch(unit.references)
        for unit in units:
            try:
                outcome = _run_one(unit, context(None), lambda: context(negative.PERTURBATION))
            except Exception as exc:  # an engine failure is evidence (error), not a crash of the run
                outcome = _crashed(unit, exc)
            outcomes.append(outcome)
            if progress is not None:
                progress(ProgressEvent("unit", f"{unit.unit_id}: {outcome.status}", done=len(outcomes),
                                       total=len(units), unit_id=unit.unit_id, status=outcome.status))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for pool in pools:
            pool.close()
    if interrupted:
        raise RunInterrupted(outcomes)
    return outcomes
