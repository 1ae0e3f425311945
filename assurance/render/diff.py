"""What changed between two snapshots of a case: claims, evidence, reviews and the trusted base.

Both sides are compared on what both know: with an export on one side, only the D's the export
holds and only the evidence its nodes cite (unless it lists every item). Two snapshots of one
D each, different ones, are compared node by node across the two D's. Context nodes
(contexts, assumptions, justifications) carry no status and are never listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assurance.evaluation import CONTEXT
from assurance.render.snapshot import Snapshot

__all__ = ["StatusChange", "ReviewChange", "CaseDiff", "diff_snapshots"]


@dataclass(frozen=True, slots=True)
class StatusChange:
    """A node whose status differs (``""`` before or after: the node is new or gone)."""

    deployment: str  # the D digest, or "<D of A>→<D of B>" across two D's
    node_id: str
    kind: str
    before: str
    after: str

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"deployment": self.deployment, "node": self.node_id, "kind": self.kind,
                "before": self.before or None, "after": self.after or None}


@dataclass(frozen=True, slots=True)
class ReviewChange:
    """A trusted item whose review was added, changed or dropped.

    ``None`` or a review without a decision (state ``unreviewed``): no review on that side.
    """

    deployment: str
    node_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    @property
    def change(self) -> str:
        """``added``, ``removed`` or ``changed``."""
        if not (self.before or {}).get("decision"):
            return "added"
        return "removed" if not (self.after or {}).get("decision") else "changed"

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"deployment": self.deployment, "node": self.node_id, "change": self.change,
                "before": self.before, "after": self.after}


@dataclass(frozen=True, slots=True)
class CaseDiff:
    """Differences from snapshot A to snapshot B, each list sorted."""

    a: str
    b: str
    status_changes: tuple[StatusChange, ...]
    evidence_added: tuple[str, ...]
    evidence_removed: tuple[str, ...]
    evidence_changed: tuple[str, ...]  # same id, different content digest
    trusted_added: tuple[tuple[str, str], ...]  # (deployment, node id)
    trusted_removed: tuple[tuple[str, str], ...]
    review_changes: tuple[ReviewChange, ...] = ()

    @property
    def is_empty(self) -> bool:
        """Whether A and B agree on everything compared."""
        return not (self.status_changes or self.evidence_added or self.evidence_removed or self.evidence_changed
                    or self.trusted_added or self.trusted_removed or self.review_changes)

    def to_json(self) -> dict[str, Any]:
        """As a JSON object (schema ``bitcase.diff/v1``)."""
        return {
            "schema": "bitcase.diff/v1", "a": self.a, "b": self.b, "identical": self.is_empty,
            "status_changes": [c.to_json() for c in self.status_changes],
            "evidence": {"added": list(self.evidence_added), "removed": list(self.evidence_removed),
                         "changed": list(self.evidence_changed)},
            "reviews": [c.to_json() for c in self.review_changes],
            "trusted_base": {"added": [{"deployment": d, "node": n} for d, n in self.trusted_added],
                             "removed": [{"deployment": d, "node": n} for d, n in self.trusted_removed]},
        }


def _deployment_map(a: Snapshot, b: Snapshot) -> dict[str, str]:
    """How A's D's are keyed for comparison with B's: a D maps to itself, or to B's one D."""
    da, db = a.deployments, b.deployments
    if len(da) == 1 and len(db) == 1 and da != db:
        [one_a], [one_b] = da, db
        return {one_a: f"{one_a}→{one_b}", one_b: f"{one_a}→{one_b}"}
    shown = da | db
    if a.is_export:  # compare only the D's the export(s) hold
        shown &= da
    if b.is_export:
        shown &= db
    return {d: d for d in shown}


def _keyed(mapping: dict[tuple[str, str], Any], keys: dict[str, str]) -> dict[tuple[str, str], Any]:
    return {(keys[d], n): v for (d, n), v in mapping.items() if d in keys}


def _evidence(snapshot: Snapshot, other: Snapshot, keys: dict[str, str]) -> dict[str, str]:
    """The evidence to compare: every item, or only cited items when either side knows no more."""
    if snapshot.has_all_evidence and other.has_all_evidence:
        return snapshot.evidence
    cited = set().union(*(ids for d, ids in snapshot.cited.items() if d in keys))
    return {i: snapshot.evidence.get(i, "") for i in cited}


def diff_snapshots(a: Snapshot, b: Snapshot) -> CaseDiff:
    """Compare A (before) with B (after).

    Evidence digests are compared only where both sides know them (a JSON export may name
    evidence without its digest).
    """
    keys = _deployment_map(a, b)
    claims_a, claims_b = _keyed(a.claims, keys), _keyed(b.claims, keys)
    changes = []
    for key in sorted(claims_a.keys() | claims_b.keys()):
        kind_a, before = claims_a.get(key, ("", ""))
        kind_b, after = claims_b.get(key, ("", ""))
        if before != after and CONTEXT not in (before, after):
            changes.append(StatusChange(key[0], key[1], kind_b or kind_a, before, after))
    reviews_a, reviews_b = _keyed(a.reviews, keys), _keyed(b.reviews, keys)
    review_changes = tuple(ReviewChange(d, n, reviews_a.get((d, n)), reviews_b.get((d, n)))
                           for d, n in sorted(reviews_a.keys() | reviews_b.keys())
                           if reviews_a.get((d, n)) != reviews_b.get((d, n)))
    ev_a, ev_b = _evidence(a, b, keys), _evidence(b, a, keys)
    both = ev_a.keys() & ev_b.keys()
    changed = sorted(i for i in both if ev_a[i] and ev_b[i] and ev_a[i] != ev_b[i])
    base_a = {(keys[d], n) for d, n in a.trusted_base if d in keys}
    base_b = {(keys[d], n) for d, n in b.trusted_base if d in keys}
    return CaseDiff(
        a=a.source, b=b.source, status_changes=tuple(changes),
        evidence_added=tuple(sorted(ev_b.keys() - ev_a.keys())),
        evidence_removed=tuple(sorted(ev_a.keys() - ev_b.keys())),
        evidence_changed=tuple(changed),
        trusted_added=tuple(sorted(base_b - base_a)),
        trusted_removed=tuple(sorted(base_a - base_b)),
        review_changes=review_changes,
    )
