"""A per-obligation summary of compare and check-config records (for terminal and JSON output). Torch-free."""

from __future__ import annotations

from typing import Any, Iterable

from evidence_db.bundle import EvidenceRecord

__all__ = ["summarize", "is_clean"]

_RANK = {"pass": 0, "inconclusive": 1, "error": 2, "fail": 3}


def summarize(records: Iterable[EvidenceRecord]) -> dict[str, dict[str, Any]]:
    """obligation -> {status, units, comparisons, passed, failed, errors, findings}, worst status wins."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        s = out.setdefault(r.obligation, {"category": r.category, "status": "pass", "units": 0, "comparisons": 0,
                                          "passed": 0, "failed": 0, "errors": 0, "findings": 0})
        if _RANK[r.status] > _RANK[s["status"]]:
            s["status"] = r.status
        d = r.details
        if "num_comparisons" in d:
            s["units"] += 1
            for key, field in (("comparisons", "num_comparisons"), ("passed", "num_passed"),
                               ("failed", "num_failed"), ("errors", "num_errors")):
                s[key] += d[field]
        elif r.category == "test_result":
            s["findings"] += 1
    return out


def is_clean(records: Iterable[EvidenceRecord]) -> bool:
    """Whether every record passed (the CLI's exit code 0)."""
    return all(r.status == "pass" for r in records)
