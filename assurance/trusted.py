"""The trusted base of a claim, and what-if analysis: which claims lose support if we distrust items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from assurance.evaluation import CONTEXT, NOT_APPLICABLE, TRUSTED_STATUSES, Evaluation, NodeResult
from assurance.ids import NodeId
from assurance.status import aggregate

__all__ = ["trusted_base", "ClaimChange", "WhatIf", "whatif", "SUPPORTED"]

SUPPORTED = ("supported", "supported-under-trust")


def trusted_base(evaluation: Evaluation, top: str | None = None) -> list[NodeResult]:
    """Every trusted item ``top`` (default: the primary claim) rests on, sorted by id.

    An item counts while its status is trusted-reviewed or trusted-unreviewed; a trusted item
    that evidence now discharges (e.g. a premise checked at run time) is no longer in the base.
    """
    below = evaluation.rests_on(top or evaluation.top)
    return sorted((r for r in below if r.status in TRUSTED_STATUSES), key=lambda r: r.id)


@dataclass(frozen=True, slots=True)
class ClaimChange:
    """A claim whose status changes when items are distrusted."""

    id: NodeId
    text: str
    before: str
    after: str

    @property
    def loses_support(self) -> bool:
        """Whether the claim was supported (possibly under trust) and no longer is."""
        return self.before in SUPPORTED and self.after not in SUPPORTED

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"id": self.id, "text": self.text, "before": self.before, "after": self.after,
                "loses_support": self.loses_support}


@dataclass(frozen=True, slots=True)
class WhatIf:
    """The outcome of distrusting some items."""

    distrusted: tuple[NodeId, ...]
    changes: tuple[ClaimChange, ...]  # top-down order

    @property
    def lost(self) -> tuple[ClaimChange, ...]:
        """Claims that lose support."""
        return tuple(c for c in self.changes if c.loses_support)

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"distrusted": list(self.distrusted), "claims_losing_support": [c.to_json() for c in self.lost],
                "changes": [c.to_json() for c in self.changes]}


def whatif(evaluation: Evaluation, distrust: Iterable[str]) -> WhatIf:
    """Re-aggregate with each of ``distrust`` (solution ids) treated as unsupported.

    Raises ``KeyError`` for an unknown id and ``ValueError`` for a node that is not a solution.
    """
    ids = tuple(sorted({NodeId(i) for i in distrust}))
    for node_id in ids:
        result = evaluation.node(node_id)
        if result.kind != "solution":
            raise ValueError(f"{node_id!r} is a {result.kind}; only solutions (evidence or trusted items) "
                             "can be distrusted")
    statuses = {n: r.status for n, r in evaluation.nodes.items()}
    for node_id in ids:
        if statuses[node_id] not in (NOT_APPLICABLE,):
            statuses[node_id] = "distrusted"
    changes = []
    for node_id in reversed(list(evaluation.nodes)):
        result = evaluation.nodes[node_id]
        if not result.is_claim or result.status in (NOT_APPLICABLE, CONTEXT):
            continue
        node = evaluation.case.node(node_id)
        child = {c: statuses[c] for c in evaluation.graph.supported_by(node_id)}
        after, _ = aggregate(node, child)
        statuses[node_id] = after
        if after != result.status:
            changes.append(ClaimChange(node_id, result.text, result.status, after))
    return WhatIf(ids, tuple(reversed(changes)))
