"""The parsed assurance case: GSN-style nodes, node generators and the case header.

Plain frozen dataclasses with no I/O; :mod:`assurance.case_loader` builds them from TOML and
:mod:`assurance.validate` checks them. The file format is documented in ``docs/case-format.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from assurance.ids import NodeId

__all__ = ["Condition", "Node", "Generator", "Component", "Contract", "Case"]

# A deployment condition: field name -> accepted values (compared as strings).
Condition = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class Node:
    """One GSN element. Solution-only fields are empty on the other kinds."""

    id: NodeId
    kind: str  # one of assurance.ids.NODE_KINDS
    text: str
    source: str = ""  # where the claim comes from, e.g. "§2.3, p.3"
    supported_by: tuple[NodeId, ...] = ()
    in_context_of: tuple[NodeId, ...] = ()
    is_undeveloped: bool = False  # goals only: deliberately left without support
    obligations: tuple[str, ...] = ()  # solutions: obligation ids evidence must name
    requires: tuple[str, ...] = ()  # solutions: every category here must have passing evidence
    any_of: tuple[str, ...] = ()  # solutions: at least one category here must
    subjects: tuple[str, ...] = ()  # solutions: subject globs, e.g. "code:kernels/*.py", "deployment"
    is_trusted: bool = False  # solutions: a bridge taken on trust, needs review
    rationale: str = ""  # why a trusted item is acceptable
    max_age_days: int | None = None  # solutions: evidence older than this is stale
    when: Condition = ()  # applies only when every field of D has one of these values
    when_not: Condition = ()  # does not apply when any field of D has one of these values
    line: int = 0  # line of the node's table in the case file (0 if unknown)
    generated_by: str | None = None  # id of the generator that made this node
    components: tuple[str, ...] = ()  # goals, strategies, solutions: component or contract ids it is about

    @property
    def policy_categories(self) -> tuple[str, ...]:
        """Every category named in the solution's evidence policy, in declaration order."""
        return self.requires + tuple(c for c in self.any_of if c not in self.requires)

    @property
    def has_policy(self) -> bool:
        """Whether the solution says how it is discharged (evidence categories or trust)."""
        return bool(self.requires or self.any_of or self.is_trusted)


@dataclass(frozen=True, slots=True)
class Generator:
    """A ``[[generate]]`` table: one node per sealed-plan entry, attached to ``parent``."""

    id: str
    parent: NodeId
    template: Mapping[str, Any]  # node fields with {kernel} {key} {source_file} {digest} placeholders
    for_each: str = "plan_entry"
    match: tuple[str, ...] = ()  # fnmatch patterns on the kernel name; empty matches every entry
    exclude: tuple[str, ...] = ()
    line: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "template", MappingProxyType(dict(self.template)))


@dataclass(frozen=True, slots=True)
class Component:
    """A ``[[component]]`` table: a part of the system the trust-boundary diagram draws."""

    id: str
    label: str
    line: int = 0


@dataclass(frozen=True, slots=True)
class Contract:
    """A ``[[contract]]`` table: what one component relies on another for, across their boundary."""

    id: str
    source: str  # component id (``from`` in the file)
    target: str  # component id (``to`` in the file)
    label: str
    line: int = 0


@dataclass(frozen=True, slots=True)
class Case:
    """A whole case: header, hand-written nodes, generators and (once expanded) generated nodes."""

    id: str
    title: str
    top: NodeId  # the primary claim (what `bitcase check` gates on by default)
    nodes: tuple[Node, ...]
    generators: tuple[Generator, ...] = ()
    document: str = ""  # the source document node `source` fields cite
    path: Path | None = None
    is_expanded: bool = False  # generators have been applied to a plan
    plan_label: str = ""  # which plan the generated nodes came from
    root: str = ""  # where `code:` subjects resolve: relative to the case file, absolute, or "<bitcase>"
    deployment: str = ""  # the D the gate judges when pinned here (see assurance.pinning), else ""
    components: tuple[Component, ...] = ()  # empty: the diagram derives its components from the graph
    contracts: tuple[Contract, ...] = ()
    _by_id: dict[str, Node] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id: dict[str, Node] = {}
        for node in self.nodes:
            by_id.setdefault(node.id, node)  # duplicates are reported by validation
        object.__setattr__(self, "_by_id", by_id)

    def node(self, node_id: str) -> Node:
        """The node with ``node_id``; ``KeyError`` names the id when it is unknown."""
        try:
            return self._by_id[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id!r} in case {self.id!r}") from None

    def has_node(self, node_id: str) -> bool:
        """Whether the case defines ``node_id``."""
        return node_id in self._by_id

    @property
    def location(self) -> str:
        """The case file as people see it in messages."""
        return str(self.path) if self.path else f"<case {self.id}>"

    def with_nodes(self, nodes: tuple[Node, ...], **changes: Any) -> "Case":
        """A copy with a different node list (and any other header changes)."""
        return replace(self, nodes=nodes, **changes)
