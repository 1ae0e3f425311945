"""The result of evaluating a case: one :class:`NodeResult` per node, JSON-serialisable.

This is what the terminal tree, ``--json``, SARIF export, the HTML report and the
trust-boundary diagram consume. ``Evaluation.to_json()`` is the documented machine format
(schema ``bitcase.status/v1``, described in ``docs/status-rules.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from assurance.case_model import Case
from assurance.graph import AssuranceGraph
from assurance.ids import NodeId
from assurance.reviews import ReviewState

__all__ = [
    "SCHEMA_ID", "SOLUTION_STATUSES", "CLAIM_STATUSES", "DISCHARGED", "TRUSTED_STATUSES", "UNSUPPORTED",
    "NOT_APPLICABLE", "CONTEXT", "Counterexample", "ObligationResult", "NodeResult", "Evaluation",
]

SCHEMA_ID = "bitcase.status/v1"
SOLUTION_STATUSES = ("verified", "runtime-checked", "tested", "trusted-reviewed", "trusted-unreviewed",
                     "stale", "failed", "missing")
CLAIM_STATUSES = ("supported", "supported-under-trust", "defeated", "incomplete")
DISCHARGED = ("verified", "runtime-checked", "tested")  # by evidence, strongest first
TRUSTED_STATUSES = ("trusted-reviewed", "trusted-unreviewed")
UNSUPPORTED = ("stale", "failed", "missing", "defeated", "incomplete", "distrusted")
NOT_APPLICABLE = "not-applicable"  # a node whose `when` condition excludes it under D
CONTEXT = "context"  # contexts, assumptions and justifications frame claims; they carry no status


@dataclass(frozen=True, slots=True)
class Counterexample:
    """Failing evidence that defeats a solution, with what its producer reported."""

    evidence_id: str
    obligation: str
    category: str
    status: str  # fail | error
    summary: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"evidence_id": self.evidence_id, "obligation": self.obligation, "category": self.category,
                "status": self.status, "summary": self.summary, "details": self.details}


@dataclass(frozen=True, slots=True)
class ObligationResult:
    """How one obligation of a solution stands under D."""

    id: str
    status: str  # a solution status
    categories: tuple[str, ...] = ()  # categories with fresh passing evidence in the policy
    evidence_ids: tuple[str, ...] = ()  # fresh evidence that counts (passing, in policy)
    stale_ids: tuple[str, ...] = ()
    defeater_ids: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"id": self.id, "status": self.status, "categories": list(self.categories),
                "evidence_ids": list(self.evidence_ids), "stale_evidence_ids": list(self.stale_ids),
                "defeater_ids": list(self.defeater_ids), "reasons": list(self.reasons)}


@dataclass(frozen=True, slots=True)
class NodeResult:
    """One node with its derived status and everything that explains it."""

    id: NodeId
    kind: str
    text: str
    source: str
    status: str
    reasons: tuple[str, ...] = ()
    line: int = 0
    generated_by: str | None = None
    supported_by: tuple[NodeId, ...] = ()
    in_context_of: tuple[NodeId, ...] = ()
    is_undeveloped: bool = False
    obligations: tuple[ObligationResult, ...] = ()
    requires: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    is_trusted: bool = False
    rationale: str = ""
    review: ReviewState | None = None
    counterexamples: tuple[Counterexample, ...] = ()

    @property
    def evidence_ids(self) -> tuple[str, ...]:
        """Fresh evidence counted for this node, sorted and without repeats."""
        return tuple(sorted({e for o in self.obligations for e in o.evidence_ids}))

    @property
    def stale_evidence_ids(self) -> tuple[str, ...]:
        """Evidence that would count but is stale, sorted."""
        return tuple(sorted({e for o in self.obligations for e in o.stale_ids}))

    @property
    def is_claim(self) -> bool:
        """Goals and strategies: nodes whose status aggregates their supporters."""
        return self.kind in ("goal", "strategy")

    def to_json(self, *, case_file: str = "") -> dict[str, Any]:
        """As a JSON object (see ``docs/status-rules.md`` for every field)."""
        obligations = self.obligations
        if len(obligations) == 1:  # the common case, without the set-and-sort of the properties
            evidence_ids, stale_ids = list(obligations[0].evidence_ids), sorted(set(obligations[0].stale_ids))
        else:
            evidence_ids, stale_ids = list(self.evidence_ids), list(self.stale_evidence_ids)
        return {
            "id": self.id, "kind": self.kind, "text": self.text, "source": self.source,
            "source_ref": {"file": case_file, "line": self.line}, "generated_by": self.generated_by,
            "status": self.status, "reasons": list(self.reasons),
            "supported_by": list(self.supported_by), "in_context_of": list(self.in_context_of),
            "undeveloped": self.is_undeveloped,
            "policy": {"requires": list(self.requires), "any_of": list(self.any_of)} if self.kind == "solution" else None,
            "subjects": list(self.subjects),
            "obligations": [o.to_json() for o in obligations],
            "evidence_ids": evidence_ids, "stale_evidence_ids": stale_ids,
            "trusted": self.is_trusted, "rationale": self.rationale or None,
            "review": self.review.to_json() if self.review else None,
            "counterexamples": [c.to_json() for c in self.counterexamples],
        }


@dataclass(frozen=True)
class Evaluation:
    """Every node's derived status under one deployment configuration D."""

    case: Case
    graph: AssuranceGraph
    deployment_digest: str
    today: date
    nodes: dict[NodeId, NodeResult]  # top-down order
    tops: tuple[NodeId, ...]  # every top goal (roots of the graph), the primary first
    num_evidence: int = 0  # evidence items given
    num_evidence_under_d: int = 0
    unclaimed_obligations: dict[str, int] = field(default_factory=dict)  # under D, no solution covers them

    @property
    def top(self) -> NodeId:
        """The primary claim."""
        return self.case.top

    def node(self, node_id: str) -> NodeResult:
        """The result for ``node_id`` (``KeyError`` when unknown)."""
        try:
            return self.nodes[NodeId(node_id)]
        except KeyError:
            raise KeyError(f"no node {node_id!r} in case {self.case.id!r}") from None

    def rests_on(self, node_id: str) -> list[NodeResult]:
        """Every applicable node beneath ``node_id`` through support edges, in top-down order."""
        below = self.graph.descendants(NodeId(node_id))
        return [r for nid, r in self.nodes.items() if nid in below and r.status not in (CONTEXT, NOT_APPLICABLE)]

    def counts(self) -> dict[str, int]:
        """How many nodes have each status (sorted by status name)."""
        out: dict[str, int] = {}
        for r in self.nodes.values():
            out[r.status] = out.get(r.status, 0) + 1
        return dict(sorted(out.items()))

    def to_json(self) -> dict[str, Any]:
        """The whole evaluation as the ``bitcase.status/v1`` JSON object."""
        case_file = self.case.location
        return {
            "schema": SCHEMA_ID,
            "case": {"id": self.case.id, "title": self.case.title, "file": case_file,
                     "document": self.case.document, "top": self.top, "plan": self.case.plan_label or None},
            "deployment_digest": self.deployment_digest,
            "evaluated_on": self.today.isoformat(),
            "tops": [{"id": t, "status": self.nodes[t].status} for t in self.tops],
            "counts": self.counts(),
            "evidence": {"given": self.num_evidence, "under_deployment": self.num_evidence_under_d,
                         "unclaimed_obligations": dict(sorted(self.unclaimed_obligations.items()))},
            "nodes": [r.to_json(case_file=case_file) for r in self.nodes.values()],
        }
