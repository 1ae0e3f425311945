"""A per-obligation summary of compare and check-config records (for terminal and JSON output). Torch-free."""

from __future__ import annotations

from typing import Any, Iterable

from evidence_db.bundle import EvidenceRecord

__all__ = ["summarize", "is_clean"]

_RANK = {"pass": 0, "inconclusive": 1, "error": 2, "fail": 3}


def summarize(records: Iterable[EvidenceRecord]) -> dict[str, dict[str, Any]]:
    """obligation -> {status, units, comparisons, passed, failed, detected, errors, findings}.

    The worst record status wins. A negative-control unit's mismatches count as ``detected``,
    never as ``passed`` or ``failed``.
    """
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        s = out.setdefault(r.obligation, {"category": r.category, "status": "pass", "units": 0, "comparisons": 0,
                                          "passed": 0, "failed": 0, "detected": 0, "errors": 0, "findings": 0})
        if _RANK[r.status] > _RANK[s["status"]]:
            s["status"] = r.status
        d = r.details
        if "num_comparisons" in d:
            s["units"] += 1
            s["comparisons"] += d["num_comparisons"]
            s["errors"] += d["num_errors"]
            if d.get("expects_mismatch"):
                s["detected"] += d["num_failed"]
            else:
                s["passed"] += d["num_passed"]
                s["failed"] += d["num_failed"]
        elif r.category == "test_result":
            s["findings"] += 1
    return out


def is_clean(records: Iterable[EvidenceRecord]) -> bool:
    """Whether every record passed (the CLI's exit code 0)."""
    return all(r.status == "pass" for r in records)
