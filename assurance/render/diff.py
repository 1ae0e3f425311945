"""What changed between two snapshots of a case: claims, evidence and the trusted base."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assurance.render.snapshot import Snapshot

__all__ = ["StatusChange", "CaseDiff", "diff_snapshots"]


@dataclass(frozen=True, slots=True)
class StatusChange:
    """A node whose status differs (``""`` before or after: the node is new or gone)."""

    deployment: str
    node_id: str
    kind: str
    before: str
    after: str

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"deployment": self.deployment, "node": self.node_id, "kind": self.kind,
                "before": self.before or None, "after": self.after or None}


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

    @property
    def is_empty(self) -> bool:
        """Whether A and B agree on everything compared."""
        return not (self.status_changes or self.evidence_added or self.evidence_removed
                    or self.evidence_changed or self.trusted_added or self.trusted_removed)

    def to_json(self) -> dict[str, Any]:
        """As a JSON object (schema ``bitcase.diff/v1``)."""
        return {
            "schema": "bitcase.diff/v1", "a": self.a, "b": self.b, "identical": self.is_empty,
            "status_changes": [c.to_json() for c in self.status_changes],
            "evidence": {"added": list(self.evidence_added), "removed": list(self.evidence_removed),
                         "changed": list(self.evidence_changed)},
            "trusted_base": {"added": [{"deployment": d, "node": n} for d, n in self.trusted_added],
                             "removed": [{"deployment": d, "node": n} for d, n in self.trusted_removed]},
        }


def diff_snapshots(a: Snapshot, b: Snapshot) -> CaseDiff:
    """Compare A (before) with B (after).

    Evidence digests are compared only where both sides know them (a JSON export may name
    evidence without its digest).
    """
    changes = []
    for key in sorted(a.claims.keys() | b.claims.keys()):
        kind_a, before = a.claims.get(key, ("", ""))
        kind_b, after = b.claims.get(key, ("", ""))
        if before != after:
            changes.append(StatusChange(key[0], key[1], kind_b or kind_a, before, after))
    both = a.evidence.keys() & b.evidence.keys()
    changed = sorted(i for i in both if a.evidence[i] and b.evidence[i] and a.evidence[i] != b.evidence[i])
    return CaseDiff(
        a=a.source, b=b.source, status_changes=tuple(changes),
        evidence_added=tuple(sorted(b.evidence.keys() - a.evidence.keys())),
        evidence_removed=tuple(sorted(a.evidence.keys() - b.evidence.keys())),
        evidence_changed=tuple(changed),
        trusted_added=tuple(sorted(b.trusted_base - a.trusted_base)),
        trusted_removed=tuple(sorted(a.trusted_base - b.trusted_base)),
    )
