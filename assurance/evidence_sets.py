"""Evidence sets: items of one producer run that only together discharge an obligation (rule R12).

A comparison suite emits one record per unit, and the suite holds only when every unit of one run
is present and passes. Such records say so in their ``details``: ``run_key`` (the run),
``unit`` (this record's unit) and ``suite_units`` (every unit the run owes). Passing items of a
run that lacks a passing record for some owed unit do not count.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from evidence_db.views import EvidenceView

__all__ = ["incomplete_runs", "MAX_LISTED_UNITS", "RUN_KEY"]

MAX_LISTED_UNITS = 5
RUN_KEY = "run_key"  # the details key that makes an item part of an evidence set


def _run_fields(e: EvidenceView) -> tuple[str, str, list[str]] | None:
    d = e.details
    run, unit, owed = d.get(RUN_KEY), d.get("unit"), d.get("suite_units")
    if isinstance(run, str) and isinstance(unit, str) and isinstance(owed, list):
        return run, unit, [u for u in owed if isinstance(u, str)]
    return None


def incomplete_runs(passing: Iterable[EvidenceView]) -> tuple[set[str], list[str]]:
    """(ids of passing items whose run is incomplete, a reason per incomplete run).

    >>> def item(unit): return EvidenceView(f"u.{unit}", "test_result", "suite.x", "pass", "", "d", "", "", "", "",
    ...     details={"run_key": "r1", "unit": unit, "suite_units": ["a", "b"]})
    >>> incomplete_runs([item("a")])
    ({'u.a'}, ['run r1 is partial: 1 of 2 units pass (missing: b)'])
    >>> incomplete_runs([item("a"), item("b")])
    (set(), [])
    """
    runs: dict[str, list[EvidenceView]] = defaultdict(list)
    owed: dict[str, set[str]] = defaultdict(set)
    present: dict[str, set[str]] = defaultdict(set)
    for e in passing:
        fields = _run_fields(e) if e.details else None  # most items carry no (decoded) details
        if fields is None:
            continue
        run, unit, units = fields
        runs[run].append(e)
        owed[run].update(units)
        present[run].add(unit)
    dropped: set[str] = set()
    reasons = []
    for run in sorted(runs):
        missing = sorted(owed[run] - present[run])
        if missing:
            dropped.update(e.item_id for e in runs[run])
            shown = ", ".join(missing[:MAX_LISTED_UNITS]) + (" …" if len(missing) > MAX_LISTED_UNITS else "")
            reasons.append(f"run {run} is partial: {len(owed[run]) - len(missing)} of {len(owed[run])} units pass "
                           f"(missing: {shown})")
    return dropped, reasons
