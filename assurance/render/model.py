"""The report's input: plain frozen dataclasses, independent of the store and the graph.

:mod:`assurance.render.adapter` assembles a :class:`ReportModel` from the assurance graph's
evaluation and the evidence store; everything else in :mod:`assurance.render` reads only
these types, so rendering tests build models directly from fixtures. The structure is
documented in ``docs/report.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SOLUTION_STATUSES", "GOAL_STATUSES", "OTHER_STATUSES", "REVIEW_STATES", "NODE_KINDS", "ReviewModel", "NodeModel",
           "EvidenceModel", "ComponentModel", "ContractModel", "ScopeModel", "ReportModel"]

SOLUTION_STATUSES = ("verified", "runtime-checked", "tested", "trusted-reviewed",
                     "trusted-unreviewed", "stale", "failed", "missing")
GOAL_STATUSES = ("supported", "supported-under-trust", "defeated", "incomplete")
# A node whose `when` condition excludes it under D, and a solution distrusted in a what-if.
OTHER_STATUSES = ("not-applicable", "distrusted")
# The state of the latest audit review of a trusted item or evidence item.
REVIEW_STATES = ("accepted", "unreviewed", "needs-work", "rejected", "stale", "expired")
NODE_KINDS = ("goal", "strategy", "solution", "context", "assumption", "justification")


@dataclass(frozen=True, slots=True)
class ReviewModel:
    """Where the audit review of one item stands (``state`` is one of REVIEW_STATES)."""

    state: str
    reviewer: str = ""
    decision: str = ""
    rationale: str = ""
    reviewed_at: str = ""
    expires: str = ""  # YYYY-MM-DD or ""

    def __post_init__(self) -> None:
        if self.state not in REVIEW_STATES:
            raise ValueError(f"review state {self.state!r} is not one of {REVIEW_STATES}")

    @property
    def is_flagged(self) -> bool:
        """True unless an unexpired accepting review pins the current digest."""
        return self.state != "accepted"


@dataclass(frozen=True, slots=True)
class NodeModel:
    """One case node with its derived status (status is "" for context-like nodes)."""

    node_id: str
    kind: str
    text: str
    status: str = ""
    source_ref: str = ""  # where the case defines it: "cases/determinism.toml:42"
    citation: str = ""  # what the claim comes from in the source document: "§2.3, p.3"
    reasons: tuple[str, ...] = ()
    evidence_ids: tuple[str, ...] = ()
    children: tuple[str, ...] = ()  # supported-by targets, in case order
    context: tuple[str, ...] = ()  # in-context-of targets
    categories: tuple[str, ...] = ()  # evidence categories allowed to discharge a solution
    is_trusted: bool = False
    trust_rationale: str = ""
    review: ReviewModel | None = None
    counterexamples: tuple[dict[str, Any], ...] = ()
    components: tuple[str, ...] = ()  # ids of the case's components or contracts the node names itself

    def __post_init__(self) -> None:
        if not self.node_id:
            raise ValueError("a node needs a non-empty id")
        if self.status and self.status not in SOLUTION_STATUSES + GOAL_STATUSES + OTHER_STATUSES:
            raise ValueError(f"node {self.node_id!r}: unknown status {self.status!r}")


@dataclass(frozen=True, slots=True)
class EvidenceModel:
    """One evidence item under the scope's deployment configuration."""

    item_id: str
    category: str
    obligation: str
    status: str  # pass | fail | error | inconclusive
    summary: str
    produced_at: str
    content_digest: str
    producer_tool: str = ""
    producer_version: str = ""
    subjects: tuple[tuple[str, str], ...] = ()  # (uri, sha256)
    details: dict[str, Any] = field(default_factory=dict)
    is_stale: bool = False  # a covered subject's digest changed since it was produced
    review: ReviewModel | None = None


@dataclass(frozen=True, slots=True)
class ComponentModel:
    """A part of the system the case declares (``[[component]]``), drawn in the diagram."""

    key: str
    label: str


@dataclass(frozen=True, slots=True)
class ContractModel:
    """What component ``source`` relies on component ``target`` for (``[[contract]]``)."""

    key: str
    source: str
    target: str
    label: str


@dataclass(frozen=True, slots=True)
class ScopeModel:
    """The case evaluated under one deployment configuration D."""

    deployment_digest: str
    deployment_fields: dict[str, Any]
    nodes: tuple[NodeModel, ...]
    top_claims: tuple[str, ...]
    trusted_base: tuple[str, ...]  # node ids of every trusted item a top claim rests on
    evidence: tuple[EvidenceModel, ...] = ()
    notes: tuple[str, ...] = ()  # what the reader should know about this evaluation
    # The case's declared components and contracts; none: the diagram derives them from the graph.
    components: tuple[ComponentModel, ...] = ()
    contracts: tuple[ContractModel, ...] = ()
    system: str = ""  # what to call the whole system in a derived diagram (the case id)

    def __post_init__(self) -> None:
        keys = [c.key for c in (*self.components, *self.contracts)]
        if len(set(keys)) != len(keys):
            raise ValueError("component and contract keys in a scope must be unique")
        names = {c.key for c in self.components}
        if any(c.source not in names or c.target not in names for c in self.contracts):
            raise ValueError("every contract must join two components of the scope")
        ids = {n.node_id for n in self.nodes}
        if len(ids) != len(self.nodes):
            raise ValueError("node ids in a scope must be unique")
        unknown = [c for c in (*self.top_claims, *self.trusted_base) if c not in ids]
        if unknown:
            raise ValueError(f"top claims / trusted base name unknown nodes: {unknown[:5]}")


@dataclass(frozen=True, slots=True)
class ReportModel:
    """Everything one report shows: one scope per deployment configuration."""

    title: str
    case_ref: str  # the case file or name the report was built from
    case_digest: str
    store_ref: str  # the store, without credentials
    scopes: tuple[ScopeModel, ...]
    as_of: str = ""  # latest evidence time (never the wall clock, so reports are reproducible)
    # The hash chain check the report was built from: a line of text, the head digest, and when it
    # ran (the one wall-clock time in a report: an auditor needs to know when the store was checked).
    chain_summary: str = ""
    chain_head: str = ""
    verified_at: str = ""
    tool_version: str = ""  # the bitcase that built the report

    def __post_init__(self) -> None:
        if not self.scopes:
            raise ValueError("a report needs at least one deployment configuration")
