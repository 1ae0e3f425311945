"""Per-category evidence tables: kernel proofs, runtime checks, comparison suites, trusted items.

Producers put category-specific facts in an evidence item's ``details``; the keys read here
are listed in ``docs/report.md``. A missing key shows as an empty cell, never as an error.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from assurance.render.model import EvidenceModel, NodeModel
from assurance.render.safe import clean_text

__all__ = ["KernelProofRow", "CheckRow", "SuiteRow", "kernel_proof_rows", "runtime_check_rows", "suite_rows",
           "trusted_rows", "detail", "MAX_WITNESSES"]

MAX_WITNESSES = 5
_WITNESS_KEYS = ("witness", "first_mismatch", "first_diff_position", "first_differing_position",
                 "max_abs_diff", "largest_difference", "counterexample", "findings", "problems",
                 "cached_tokens", "num_chunks", "witnesses", "run_witnesses")
# Comparison counts a suite run reports in its details, summed over the suite's items.
_COMPARISON_KEYS = ("num_comparisons", "num_passed", "num_failed", "num_errors")


def detail(item: EvidenceModel, *keys: str) -> str:
    """The first of ``keys`` present in the item's details, as cleaned display text."""
    for key in keys:
        if key in item.details and item.details[key] not in (None, ""):
            return clean_text(item.details[key])
    return ""


@dataclass(frozen=True, slots=True)
class KernelProofRow:
    """The proofs of one kernel at one configuration: the latest one's facts, and counts."""

    item: EvidenceModel  # the latest proof (by production time, then id)
    kernel: str
    configuration: str
    verifier_version: str
    num_obligations: str
    time_s: str
    counts: dict[str, int]
    num_items: int

    @property
    def is_passing(self) -> bool:
        return self.item.status == "pass" and not self.item.is_stale


def _count(value: Any) -> str:
    if isinstance(value, (list, tuple, dict)):
        return str(len(value))
    return clean_text(value)


def _latest(items: list[EvidenceModel]) -> EvidenceModel:
    return max(items, key=lambda i: (i.produced_at, i.item_id))


def kernel_proof_rows(items: Iterable[EvidenceModel]) -> list[KernelProofRow]:
    """One row per (kernel, configuration), failing or stale ones first, then by kernel."""
    groups: dict[tuple[str, str], list[EvidenceModel]] = defaultdict(list)
    for item in items:
        if item.category == "kernel_proof":
            kernel = detail(item, "kernel", "kernel_name") or clean_text(item.obligation)
            groups[(kernel, detail(item, "configuration", "config", "launch_config"))].append(item)
    rows = []
    for (kernel, configuration), members in groups.items():
        latest = _latest(members)
        obligations = next((latest.details[k] for k in ("num_obligations", "obligations")
                            if k in latest.details), "")
        if "obligations_total" in latest.details:  # the verifier reports proved / total
            obligations = f"{clean_text(latest.details.get('obligations_proved', '?'))}/" \
                          f"{clean_text(latest.details['obligations_total'])}"
        rows.append(KernelProofRow(
            item=latest, kernel=kernel, configuration=configuration,
            verifier_version=detail(latest, "verifier_version") or clean_text(latest.producer_version),
            num_obligations=_count(obligations),
            time_s=detail(latest, "time_s", "seconds", "elapsed_s", "duration_s", "solver_time_s"),
            counts=dict(sorted(Counter(i.status for i in members).items())), num_items=len(members)))
    return sorted(rows, key=lambda r: (r.is_passing, r.kernel, r.configuration))


@dataclass(frozen=True, slots=True)
class CheckRow:
    """The runs of one runtime check (one obligation): the latest one, and counts."""

    item: EvidenceModel
    counts: dict[str, int]
    num_items: int

    @property
    def is_passing(self) -> bool:
        return self.item.status == "pass" and not self.item.is_stale


def runtime_check_rows(items: Iterable[EvidenceModel]) -> list[CheckRow]:
    """One row per runtime check obligation, failing or stale ones first."""
    groups: dict[str, list[EvidenceModel]] = defaultdict(list)
    for item in items:
        if item.category == "runtime_config_check":
            groups[item.obligation].append(item)
    rows = [CheckRow(_latest(m), dict(sorted(Counter(i.status for i in m).items())), len(m))
            for m in groups.values()]
    return sorted(rows, key=lambda r: (r.is_passing, r.item.obligation))


@dataclass(frozen=True, slots=True)
class SuiteRow:
    """A comparison suite (or another group of test results) with counts and witnesses.

    ``counts`` counts the suite's evidence items by status; ``comparisons`` sums the comparison
    counts the items report (``num_comparisons``, ``num_passed``, …), empty when none does.
    """

    suite: str
    counts: dict[str, int]
    num_items: int
    comparisons: dict[str, int]
    num_expected_comparisons: int | None
    witnesses: tuple[tuple[EvidenceModel, dict[str, str]], ...]
    num_witnesses_left_out: int

    @property
    def is_passing(self) -> bool:
        return self.counts.get("pass", 0) == self.num_items


def _witness_text(value: Any) -> str:
    """A witness value as text; of a mapping of many witnesses, the first and how many more."""
    if isinstance(value, dict) and len(value) > 1:
        first = next(iter(sorted(value, key=str)))
        return clean_text({first: value[first]}) + f" (and {len(value) - 1} more)"
    return clean_text(value)


def _witnesses(item: EvidenceModel) -> dict[str, str]:
    return {k: _witness_text(item.details[k]) for k in _WITNESS_KEYS
            if k in item.details and item.details[k] not in (None, "", [], {})}


def suite_rows(items: Iterable[EvidenceModel]) -> list[SuiteRow]:
    """Test results grouped by ``details.suite`` (else obligation), failing suites first.

    Witnesses are the failing items with their witness details (first differing position,
    largest difference, findings, …); for a passing suite, the first items that carry witness
    details (per-comparison witnesses, chunk counts, cached tokens) show that the suite
    exercised what it claims.
    """
    groups: dict[str, list[EvidenceModel]] = defaultdict(list)
    for item in items:
        if item.category == "test_result":
            groups[detail(item, "suite") or clean_text(item.obligation)].append(item)
    rows = []
    for suite, members in groups.items():
        members.sort(key=lambda i: i.item_id)
        counts = Counter(i.status for i in members)
        comparisons = {k: sum(i.details[k] for i in members if isinstance(i.details.get(k), int))
                       for k in _COMPARISON_KEYS if any(isinstance(i.details.get(k), int) for i in members)}
        expected = [i.details["suite_expected_comparisons"] for i in members
                    if isinstance(i.details.get("suite_expected_comparisons"), int)]
        failing = [i for i in members if i.status != "pass"]
        candidates = failing or [i for i in members if _witnesses(i)]
        witnesses = tuple((i, _witnesses(i)) for i in candidates[:MAX_WITNESSES])
        rows.append(SuiteRow(suite, dict(sorted(counts.items())), len(members), comparisons,
                             max(expected) if expected else None, witnesses,
                             max(0, len(candidates) - MAX_WITNESSES)))
    return sorted(rows, key=lambda r: (r.is_passing, r.suite))


def trusted_rows(nodes: Iterable[NodeModel]) -> list[NodeModel]:
    """Trusted case items, those whose review is flagged first."""
    trusted = [n for n in nodes if n.is_trusted]
    return sorted(trusted, key=lambda n: (not (n.review is None or n.review.is_flagged), n.node_id))
