"""Evidence emission: one ``test_result`` record per unit, plus one per finding.

Granularity (documented in docs/comparison-protocol.md):

* **Unit record** ``compare.<key>.<unit id>``: status pass/fail/error of the unit, its comparison
  count, every comparison id, the suite's full unit list and expected count (so a reader can tell a
  complete suite from a partial one), the engine configurations, the witnesses observed and the
  findings. A suite's obligation holds when every unit of the suite under one run key is present
  and passes; the sum of the units' counts is the suite's count.
* **Finding record** ``compare.<key>.<comparison id>``: one per failing or erroring comparison
  (``fail`` with request, first differing position, element index and largest difference; or
  ``error`` with the missing witness). Negative-control findings are not emitted: there a mismatch
  is the expected outcome, recorded in the unit record.

Ids depend on the run key and the unit or comparison, never on the shard, so a comparison ingested
twice (the same shard twice, or overlapping shardings) collides and ingest rejects it.
"""

from __future__ import annotations

from typing import Any, Sequence

from engine.compare.identity import RunIdentity
from engine.compare.outcomes import ComparisonOutcome, UnitOutcome
from engine.compare.protocol import DETERMINISM_SUITES, EXPECTED_COMPARISONS, OBLIGATIONS, PROTOCOL_VERSION
from evidence_db.bundle import EvidenceRecord

__all__ = ["unit_records", "record_id"]

_MAX_LISTED_FINDINGS = 50


def record_id(identity: RunIdentity | str, name: str) -> str:
    """``compare.<run key>.<unit or comparison id>`` (``identity``: the run's identity or its key)."""
    key = identity if isinstance(identity, str) else identity.key
    return f"compare.{key}.{name}"


def _summary(outcome: UnitOutcome) -> str:
    u = outcome.unit
    n = u.num_comparisons
    if outcome.expects_mismatch:
        verdict = {"pass": "detected the non-invariant engine", "fail": "did NOT detect the non-invariant engine",
                   "error": "could not run as planned"}[outcome.status]
        return f"{u.unit_id}: {outcome.num_failed}/{n} comparisons differ; the control {verdict}"
    if u.suite in DETERMINISM_SUITES:
        text = f"{u.unit_id}: {outcome.num_passed}/{n} comparisons bitwise equal"
        failed = "mismatched"
    else:  # fidelity: a tolerance claim against another implementation, never a bitwise one
        text = f"{u.unit_id}: {outcome.num_passed}/{n} comparisons within tolerance of the reference"
        failed = "outside tolerance"
    if outcome.num_failed:
        text += f", {outcome.num_failed} {failed}"
    if outcome.num_errors:
        text += f", {outcome.num_errors} without required witness or reference"
    if outcome.problems:
        text += f"; {'; '.join(outcome.problems)}"
    return text


def _finding_summary(c: ComparisonOutcome) -> str:
    if c.mismatch is None:
        prefix = "not counted: " if c.status == "error" else ""
        return f"{c.comparison_id}: {prefix}{'; '.join(c.problems)}"
    m = c.mismatch
    where = f"position {m.position}" + (f", element {m.element}" if m.element is not None else "")
    return (f"{c.comparison_id}: {'/'.join(m.what)} differ at {where}; largest difference "
            f"{m.largest_difference:.3g} (request {c.request})")


def _details(outcome: UnitOutcome, identity: RunIdentity, suite_units: Sequence[str]) -> dict[str, Any]:
    u = outcome.unit
    findings = [c.to_dict() for c in outcome.comparisons if c.status != "pass"]
    return {
        "protocol_version": PROTOCOL_VERSION, "run_key": identity.key, "seed": identity.seed,
        "scale": identity.scale, "shard": identity.shard, "suite": u.suite, "unit": u.unit_id,
        "suite_units": list(suite_units), "suite_expected_comparisons": EXPECTED_COMPARISONS[u.suite],
        "num_comparisons": u.num_comparisons, "num_passed": outcome.num_passed, "num_failed": outcome.num_failed,
        "num_errors": outcome.num_errors, "expects_mismatch": outcome.expects_mismatch,
        "comparison_ids": [c.comparison_id for c in u.comparisons],
        "witnesses": {c.comparison_id: c.witness for c in outcome.comparisons},
        "run_witnesses": outcome.run_witnesses, "problems": outcome.problems,
        "findings": findings[:_MAX_LISTED_FINDINGS], "num_findings": len(findings),
        "engine": outcome.engine_configs, "seconds": round(outcome.seconds, 3),
        "requests": {label: {"prompt_length": len(r.prompt), "params": r.params.to_dict()}
                     for label, r in sorted(u.requests.items())},
        "environment": identity.environment(),
    }


def unit_records(outcome: UnitOutcome, identity: RunIdentity, suite_units: Sequence[str]) -> list[EvidenceRecord]:
    """The unit's record followed by one record per finding (none for the negative control)."""
    obligation = OBLIGATIONS[outcome.unit.suite]
    common = {"category": "test_result", "obligation": obligation, "producer": identity.producer,
              "deployment": identity.deployment, "subjects": identity.subjects}
    records = [EvidenceRecord(id=record_id(identity, outcome.unit.unit_id), status=outcome.status,
                              summary=_summary(outcome), details=_details(outcome, identity, suite_units), **common)]
    if outcome.expects_mismatch:
        return records
    for c in outcome.comparisons:
        if c.status == "pass":
            continue
        records.append(EvidenceRecord(
            id=record_id(identity, c.comparison_id), status=c.status, summary=_finding_summary(c),
            details={"run_key": identity.key, "unit": outcome.unit.unit_id, "scale": identity.scale,
                     "shard": identity.shard, "protocol_version": PROTOCOL_VERSION, **c.to_dict()},
            **common))
    return records
