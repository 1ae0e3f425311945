"""Status rules for one solution: which evidence counts, and what it makes of the solution.

Pure functions over :class:`~evidence_db.views.EvidenceView` values; every rule here is
listed, with its id, in ``docs/status-rules.md``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping

from assurance.case_model import Node
from assurance.evaluation import Counterexample, ObligationResult
from assurance.evidence_sets import RUN_KEY, incomplete_runs
from assurance.freshness import Freshness
from assurance.reviews import ReviewState
from assurance.subjects import SubjectMatcher
from assurance.validate import TRUSTED_CATEGORY
from evidence_db.junit_revisions import SUPERSEDES_KEY
from evidence_db.views import DetailsFilter, EvidenceView

__all__ = ["EvidenceIndex", "SolutionVerdict", "solution_verdict", "supersession_key", "CATEGORY_LABEL", "FAILING",
           "LOGICAL_KEY", "RULE_DETAILS", "superseded_ids"]

# What passing evidence of each category makes of an obligation, strongest first (R4).
CATEGORY_LABEL = {"kernel_proof": "verified", "runtime_config_check": "runtime-checked",
                  "test_result": "tested", TRUSTED_CATEGORY: "trusted"}
_STRENGTH = {"verified": 3, "runtime-checked": 2, "tested": 1, "trusted": 0}
FAILING = ("fail", "error")
_SEVERITY = ("failed", "stale", "missing")  # worst first (R9)
LOGICAL_KEY = "logical_key"  # the details key a producer sets to make its own supersession key (R2)
# Whose details the rules read: supersession keys (R2), re-mapped records (R2a), counterexamples of
# failing items (R3) and evidence sets (R12). A store read may leave every other item's details undecoded.
RULE_DETAILS = DetailsFilter(statuses=frozenset(FAILING), keys=(LOGICAL_KEY, SUPERSEDES_KEY, RUN_KEY))


def supersession_key(e: EvidenceView) -> str:
    """What a newer item replaces (R2): ``details.logical_key``, a JUnit test id, else the item id.

    A JUnit record id ``junit:<report tag>:<test id>`` names its report, so the next run of the
    same test gets a new id; keyed by the test id, the newer run supersedes the older.

    >>> from evidence_db.views import EvidenceView as V
    >>> supersession_key(V("junit:0a1b:tests.t.test_x", "test_result", "o", "pass", "", "d", "", "", "", ""))
    'junit:tests.t.test_x'
    >>> supersession_key(V("proof-1", "kernel_proof", "o", "pass", "", "d", "", "", "", "", details={"logical_key": "k"}))
    'k'
    """
    if e.details:
        key = e.details.get(LOGICAL_KEY)
        if isinstance(key, str) and key:
            return key
    item_id = e.item_id
    if item_id.startswith("junit:") and item_id.count(":") >= 2:
        return "junit:" + item_id.split(":", 2)[2]
    return item_id


def superseded_ids(evidence: Iterable[EvidenceView]) -> dict[str, str]:
    """Item ids another item names in ``details.supersedes`` (R2a), each with the newest such item."""
    out: dict[str, tuple[int, str]] = {}
    for e in evidence:
        target = e.details.get(SUPERSEDES_KEY) if e.details else None
        if isinstance(target, str) and (target not in out or e.seq > out[target][0]):
            out[target] = (e.seq, e.item_id)
    return {target: by for target, (_, by) in out.items()}


class EvidenceIndex:
    """Evidence under D, latest per (obligation, supersession key) by chain seq (R1, R2), less
    items a re-mapping superseded (R2a; ``superseded`` maps each to its successor).

    ``elsewhere`` counts, per obligation, items under other deployment configurations that
    ``evidence`` leaves out (a store read of D's items only); they never count, but R7 and the
    totals see them as if they had been given.
    """

    def __init__(self, evidence: Iterable[EvidenceView], deployment_digest: str,
                 rejected: frozenset[tuple[str, str]] = frozenset(), elsewhere: Mapping[str, int] | None = None
                 ) -> None:
        self.rejected = rejected  # (item id, content digest) pairs a reviewer rejected (R11)
        latest: dict[str, dict[str, EvidenceView]] = defaultdict(dict)
        self.num_other_deployments: dict[str, int] = defaultdict(int, elsewhere or {})
        self.num_given = sum(self.num_other_deployments.values())
        evidence = evidence if isinstance(evidence, list) else list(evidence)
        self.superseded = superseded_ids(evidence)
        superseded = self.superseded
        num_given = 0
        for e in evidence:
            num_given += 1
            if superseded and e.item_id in superseded:
                continue
            if e.deployment_digest != deployment_digest:
                self.num_other_deployments[e.obligation] += 1
                continue
            per_item = latest[e.obligation]
            key = supersession_key(e)
            held = per_item.get(key)
            if held is None or e.seq > held.seq:
                per_item[key] = e
        self.num_given += num_given
        self.latest = {o: [items[k] for k in sorted(items)] for o, items in latest.items()}
        self.num_under_d = sum(len(v) for v in self.latest.values())

    def items(self, obligation: str) -> list[EvidenceView]:
        """The latest evidence items for ``obligation`` under D, sorted by item id."""
        return self.latest.get(obligation, [])


@dataclass(frozen=True, slots=True)
class SolutionVerdict:
    """A solution's derived status with its per-obligation results and defeaters."""

    status: str
    reasons: tuple[str, ...]
    obligations: tuple[ObligationResult, ...]
    counterexamples: tuple[Counterexample, ...]


def _obligation(obligation: str, node: Node, index: EvidenceIndex, matcher: SubjectMatcher, fresh: Freshness
                ) -> tuple[ObligationResult, list[Counterexample], str | None]:
    accepted = set(node.policy_categories) | ({TRUSTED_CATEGORY} if node.is_trusted else set())
    fresh_passing: list[EvidenceView] = []
    stale: list[str] = []
    stale_by_cause: dict[str, list[str]] = defaultdict(list)
    defeaters: list[EvidenceView] = []
    reasons: list[str] = []
    num_unbound = num_inconclusive = num_off_policy = 0
    rejected, stale_cause = index.rejected, fresh.stale_cause  # hoisted: the loop runs once per item
    max_age_days, has_subjects = node.max_age_days, bool(node.subjects)
    for e in index.items(obligation):
        if rejected and (e.item_id, e.content_digest) in rejected:
            reasons.append(f"{e.item_id} does not count: a reviewer rejected it")
            continue
        cause, bound = stale_cause(e, matcher, max_age_days)
        if cause:
            if e.category in accepted or e.status in FAILING:
                stale.append(e.item_id)
                stale_by_cause[cause].append(e.item_id)
            continue
        if has_subjects and not bound:
            num_unbound += 1
        if e.status in FAILING:
            defeaters.append(e)  # R3: failing evidence defeats whatever its category
        elif e.category not in accepted:
            num_off_policy += 1
        elif e.status == "pass":
            fresh_passing.append(e)
        else:
            num_inconclusive += 1
    for cause, ids in sorted(stale_by_cause.items()):
        more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
        reasons.append(f"stale: {cause} since {ids[0]}{more}")
    if num_inconclusive:
        reasons.append(f"{num_inconclusive} inconclusive item(s) do not discharge {obligation}")
    if num_off_policy:
        reasons.append(f"{num_off_policy} passing item(s) of categories outside the policy do not count")
    if num_unbound:
        reasons.append(f"{num_unbound} item(s) name none of the covered subjects; only D binds them")
    partial, why_partial = incomplete_runs(fresh_passing)
    reasons.extend(why_partial)
    passing: dict[str, list[str]] = defaultdict(list)
    for e in fresh_passing:
        if e.item_id not in partial:
            passing[e.category].append(e.item_id)
    counted = tuple(sorted(i for ids in passing.values() for i in ids))
    if defeaters:
        cex = [Counterexample(e.item_id, obligation, e.category, e.status, e.summary, dict(e.details))
               for e in defeaters]
        reasons.insert(0, "defeated by " + ", ".join(f"{e.item_id} ({e.status}: {e.summary})" for e in defeaters))
        return ObligationResult(obligation, "failed", tuple(sorted(passing)), counted, tuple(stale),
                                tuple(c.evidence_id for c in cex), tuple(reasons)), cex, None
    label = _discharge_label(node, passing)
    if label is not None:
        return ObligationResult(obligation, label, tuple(sorted(passing)), counted, tuple(stale), (),
                                tuple(reasons)), [], label
    other = index.num_other_deployments.get(obligation, 0)
    if stale or other:
        if other:
            reasons.append(f"{other} item(s) exist only under other deployment configurations")
        return ObligationResult(obligation, "stale", tuple(sorted(passing)), counted, tuple(stale), (),
                                tuple(reasons)), [], None
    reasons.insert(0, f"no evidence under D for obligation {obligation}")
    return ObligationResult(obligation, "missing", tuple(sorted(passing)), counted, (), (), tuple(reasons)), [], None


def _discharge_label(node: Node, passing: Mapping[str, list[str]]) -> str | None:
    """R4: the policy is met when every `requires` category and one `any_of` category pass."""
    if not node.requires and not node.any_of:
        return "trusted" if node.is_trusted and passing.get(TRUSTED_CATEGORY) else None
    if not all(passing.get(c) for c in node.requires):
        return None
    if node.any_of and not any(passing.get(c) for c in node.any_of):
        return None
    labels = [CATEGORY_LABEL[c] for c in node.policy_categories if passing.get(c) and c in CATEGORY_LABEL]
    return max(labels, key=lambda s: _STRENGTH[s]) if labels else None


def solution_verdict(node: Node, index: EvidenceIndex, *, fresh: Freshness, review: ReviewState | None
                     ) -> SolutionVerdict:
    """The derived status of solution ``node`` under D (rules R1–R12)."""
    matcher = fresh.matcher(node.subjects)
    results: list[ObligationResult] = []
    counterexamples: list[Counterexample] = []
    labels: list[str | None] = []
    for obligation in node.obligations:
        result, cex, label = _obligation(obligation, node, index, matcher, fresh)
        results.append(result)
        counterexamples.extend(cex)
        labels.append(label)
    # Name the obligation in a reason only when it is not simply the solution itself.
    named = len(results) > 1 or any(r.id != node.id for r in results)
    reasons = [f"{r.id}: {why}" if named else why for r in results for why in r.reasons]
    if any(r.status == "failed" for r in results):
        status = "failed"
    elif node.is_trusted and not all(lb in _STRENGTH and lb != "trusted" for lb in labels):
        status = "trusted-reviewed" if review is not None and review.is_accepted else "trusted-unreviewed"
        # Evidence is optional for a trusted item: only what was found is worth a reason.
        reasons = [f"{r.id}: {why}" if named else why for r in results if r.status != "missing" for why in r.reasons]
        results = [r if r.status in CATEGORY_LABEL.values() else _as_status(r, status) for r in results]
        if review is not None and not review.is_accepted:
            reasons.insert(0, f"review: {review.state}" + (f" ({review.decision} by {review.reviewer})"
                                                            if review.reviewer else ""))
    else:
        worst = next((s for s in _SEVERITY if any(r.status == s for r in results)), None)
        status = worst or min((lb for lb in labels if lb), key=lambda s: _STRENGTH[s], default="missing")
    if not node.obligations:
        reasons.append("solution covers no obligations")
    return SolutionVerdict(status, tuple(reasons), tuple(results), tuple(counterexamples))


def _as_status(result: ObligationResult, status: str) -> ObligationResult:
    return ObligationResult(result.id, status, result.categories, result.evidence_ids, result.stale_ids,
                            result.defeater_ids, result.reasons)

