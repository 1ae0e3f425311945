"""The assurance graph: a small domain class around ``networkx.DiGraph``.

Edges run from a claim to what it rests on: ``parent -> child`` for *supported by* and
``node -> context`` for *in context of*. Every listing is in a deterministic order (sorted ids,
``lexicographical_topological_sort``), so output never depends on insertion order.
"""

from __future__ import annotations

from typing import Iterable

import networkx as nx

from assurance.case_model import Case
from assurance.ids import NodeId

__all__ = ["AssuranceGraph", "GraphError", "SUPPORT", "CONTEXT"]

SUPPORT = "supported_by"
CONTEXT = "in_context_of"


class GraphError(Exception):
    """A graph operation on an unknown node or a graph with a cycle."""


class AssuranceGraph:
    """Nodes of a case and their support and context edges.

    >>> g = AssuranceGraph()
    >>> g.add_node(NodeId("G1"), "goal"); g.add_node(NodeId("Sn1"), "solution")
    >>> g.add_support(NodeId("G1"), NodeId("Sn1"))
    >>> g.supported_by(NodeId("G1")), g.supports(NodeId("Sn1"))
    (['Sn1'], ['G1'])
    """

    def __init__(self) -> None:
        self._g = nx.DiGraph()

    @classmethod
    def from_case(cls, case: Case) -> "AssuranceGraph":
        """The graph of ``case``; edges to unknown ids are left out (validation reports them)."""
        graph = cls()
        for node in case.nodes:
            if node.id not in graph._g:
                graph.add_node(node.id, node.kind)
        for node in case.nodes:
            for child in node.supported_by:
                if child in graph._g:
                    graph.add_support(node.id, child)
            for ctx in node.in_context_of:
                if ctx in graph._g:
                    graph.add_context(node.id, ctx)
        return graph

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._g

    def __len__(self) -> int:
        return self._g.number_of_nodes()

    def _need(self, node_id: NodeId) -> None:
        if node_id not in self._g:
            raise GraphError(f"no node {node_id!r} in the assurance graph")

    def add_node(self, node_id: NodeId, kind: str) -> None:
        """Add a node of GSN ``kind``."""
        self._g.add_node(node_id, kind=kind)

    def add_support(self, parent: NodeId, child: NodeId) -> None:
        """Record that ``parent`` is supported by ``child``."""
        self._need(parent), self._need(child)
        self._g.add_edge(parent, child, rel=SUPPORT)

    def add_context(self, node_id: NodeId, context: NodeId) -> None:
        """Record that ``node_id`` is stated in the context of ``context``."""
        self._need(node_id), self._need(context)
        self._g.add_edge(node_id, context, rel=CONTEXT)

    def kind(self, node_id: NodeId) -> str:
        """The GSN kind of ``node_id``."""
        self._need(node_id)
        return self._g.nodes[node_id]["kind"]

    def nodes(self) -> list[NodeId]:
        """Every node id, sorted."""
        return sorted(self._g.nodes)

    def _out(self, node_id: NodeId, rel: str) -> list[NodeId]:
        self._need(node_id)
        return sorted(c for c, d in self._g.succ[node_id].items() if d["rel"] == rel)

    def supported_by(self, node_id: NodeId) -> list[NodeId]:
        """The nodes ``node_id`` is directly supported by, sorted."""
        return self._out(node_id, SUPPORT)

    def context_of(self, node_id: NodeId) -> list[NodeId]:
        """The contexts, assumptions and justifications ``node_id`` is stated in, sorted."""
        return self._out(node_id, CONTEXT)

    def supports(self, node_id: NodeId) -> list[NodeId]:
        """The claims ``node_id`` directly supports (its parents), sorted."""
        self._need(node_id)
        return sorted(p for p, d in self._g.pred[node_id].items() if d["rel"] == SUPPORT)

    def roots(self) -> list[NodeId]:
        """Nodes nothing points at (by either relation): the top claims of a well-formed case."""
        return sorted(n for n in self._g.nodes if self._g.in_degree(n) == 0)

    def undeveloped_goals(self) -> list[NodeId]:
        """Goals with no supporting node, sorted."""
        return sorted(n for n, k in self._g.nodes(data="kind")
                      if k == "goal" and not any(d["rel"] == SUPPORT for d in self._g.succ[n].values()))

    def find_cycle(self) -> list[NodeId] | None:
        """One cycle as a closed node path (first node repeated at the end), or ``None``."""
        try:
            edges = nx.find_cycle(self._g)
        except nx.NetworkXNoCycle:
            return None
        path = [NodeId(u) for u, _v in edges]
        return path + [path[0]]

    def descendants(self, node_id: NodeId) -> set[NodeId]:
        """Everything ``node_id`` rests on, through support and context edges."""
        self._need(node_id)
        return set(nx.descendants(self._g, node_id))

    def ancestors(self, node_id: NodeId) -> set[NodeId]:
        """Every claim that rests on ``node_id``."""
        self._need(node_id)
        return set(nx.ancestors(self._g, node_id))

    def subgraph(self, node_ids: Iterable[NodeId]) -> "AssuranceGraph":
        """A new graph with only ``node_ids`` and the edges among them."""
        sub = AssuranceGraph()
        sub._g = self._g.subgraph(node_ids).copy()
        return sub

    def top_down(self) -> list[NodeId]:
        """Every node, claims before what they rest on; ties broken by id.

        Raises :class:`GraphError` when the graph has a cycle.
        """
        try:
            return list(nx.lexicographical_topological_sort(self._g, key=str))
        except nx.NetworkXUnfeasible:
            raise GraphError(f"the assurance graph has a cycle: {' -> '.join(self.find_cycle() or [])}") from None

    def bottom_up(self) -> list[NodeId]:
        """Every node, supporters before the claims they support (reverse of :meth:`top_down`)."""
        return list(reversed(self.top_down()))
