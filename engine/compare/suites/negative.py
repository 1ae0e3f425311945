"""Negative control: the suites must detect a deliberately non-invariant engine.

One unit from each determinism suite is re-run with the perturbation ``batch-keyed-linear`` applied
to candidates and references alike (see ``engine/compare/perturb.py``): every linear layer reduces
in an order keyed by the number of rows in the launch, the classic batch-variant matmul. Each unit
passes only if it detects at least one mismatch, which shows the comparator, the references and
the unit's schedule have the power to catch that class of defect.
"""

from __future__ import annotations

from dataclasses import replace

from engine.compare.scales import ScaleSpec
from engine.compare.suites import batch, chunk, prefill_decode, prefix, schedule
from engine.compare.units import Unit

__all__ = ["plan", "source_unit", "PERTURBATION", "SOURCE_UNITS"]

PERTURBATION = "batch-keyed-linear"
# (suite module, unit id): the schedule each suite's control re-runs.
SOURCE_UNITS = ((batch, "batch.g8-shuffled"), (chunk, "chunk.b{smallest}"), (prefill_decode, "pd.d0"),
                (prefix, "prefix.partial"), (schedule, "schedule.staggered"))


def _rename(unit: Unit) -> Unit:
    comparisons = tuple(replace(c, comparison_id=f"negative.{c.comparison_id}") for c in unit.comparisons)
    return replace(unit, unit_id=f"negative.{unit.unit_id}", suite="negative-control", comparisons=comparisons,
                   plan=(unit.suite, unit.plan))


def plan(scale: ScaleSpec, vocab_size: int, seed: int) -> list[Unit]:
    """The control's units: the source units under new ids, remembering which suite runs them."""
    units = []
    for module, unit_id in SOURCE_UNITS:
        unit_id = unit_id.format(smallest=min(scale.chunk_budgets))
        source = next(u for u in module.plan(scale, vocab_size, seed) if u.unit_id == unit_id)
        units.append(_rename(source))
    return units


def source_unit(unit: Unit) -> Unit:
    """The unit as its own suite's runner expects it (original ids are restored by the caller)."""
    suite, inner_plan = unit.plan
    original = tuple(replace(c, comparison_id=c.comparison_id.removeprefix("negative."))
                     for c in unit.comparisons)
    return replace(unit, unit_id=unit.unit_id.removeprefix("negative."), suite=suite, plan=inner_plan,
                   comparisons=original)

