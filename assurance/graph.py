"""The assurance graph: a small domain class over adjacency maps.

Edges run from a claim to what it rests on: ``parent -> child`` for *supported by* and
``node -> context`` for *in context of*; a pair holds at most one edge (the later relation
wins). Every listing is in a deterministic order (sorted ids, a lexicographical topological
sort), so output never depends on insertion order. Plain dictionaries rather than a graph
library: the status path builds this graph for every ``bitcase status`` and needs only these
few walks, so it skips the library's import and per-edge bookkeeping.
"""

from __future__ import annotations

import heapq
from typing import Iterable

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
        self._kinds: dict[NodeId, str] = {}  # insertion order
        self._succ: dict[NodeId, dict[NodeId, str]] = {}  # node -> {child: relation}
        self._pred: dict[NodeId, dict[NodeId, str]] = {}  # node -> {parent: relation}

    @classmethod
    def from_case(cls, case: Case) -> "AssuranceGraph":
        """The graph of ``case``; edges to unknown ids are left out (validation reports them)."""
        graph = cls()
        for node in case.nodes:
            if node.id not in graph._kinds:
                graph.add_node(node.id, node.kind)
        known = graph._kinds
        for node in case.nodes:
            for child in node.supported_by:
                if child in known:
                    graph._link(node.id, child, SUPPORT)
            for ctx in node.in_context_of:
                if ctx in known:
                    graph._link(node.id, ctx, CONTEXT)
        return graph

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._kinds

    def __len__(self) -> int:
        return len(self._kinds)

    def _need(self, node_id: NodeId) -> None:
        if node_id not in self._kinds:
            raise GraphError(f"no node {node_id!r} in the assurance graph")

    def _link(self, parent: NodeId, child: NodeId, rel: str) -> None:
        self._succ[parent][child] = rel
        self._pred[child][parent] = rel

    def add_node(self, node_id: NodeId, kind: str) -> None:
        """Add a node of GSN ``kind`` (again: update its kind)."""
        self._kinds[node_id] = kind
        self._succ.setdefault(node_id, {})
        self._pred.setdefault(node_id, {})

    def add_support(self, parent: NodeId, child: NodeId) -> None:
        """Record that ``parent`` is supported by ``child``."""
        self._need(parent), self._need(child)
        self._link(parent, child, SUPPORT)

    def add_context(self, node_id: NodeId, context: NodeId) -> None:
        """Record that ``node_id`` is stated in the context of ``context``."""
        self._need(node_id), self._need(context)
        self._link(node_id, context, CONTEXT)

    def kind(self, node_id: NodeId) -> str:
        """The GSN kind of ``node_id``."""
        self._need(node_id)
        return self._kinds[node_id]

    def nodes(self) -> list[NodeId]:
        """Every node id, sorted."""
        return sorted(self._kinds)

    def _out(self, node_id: NodeId, rel: str) -> list[NodeId]:
        self._need(node_id)
        return sorted(c for c, r in self._succ[node_id].items() if r == rel)

    def supported_by(self, node_id: NodeId) -> list[NodeId]:
        """The nodes ``node_id`` is directly supported by, sorted."""
        return self._out(node_id, SUPPORT)

    def context_of(self, node_id: NodeId) -> list[NodeId]:
        """The contexts, assumptions and justifications ``node_id`` is stated in, sorted."""
        return self._out(node_id, CONTEXT)

    def supports(self, node_id: NodeId) -> list[NodeId]:
        """The claims ``node_id`` directly supports (its parents), sorted."""
        self._need(node_id)
        return sorted(p for p, r in self._pred[node_id].items() if r == SUPPORT)

    def roots(self) -> list[NodeId]:
        """Nodes nothing points at (by either relation): the top claims of a well-formed case."""
        return sorted(n for n, parents in self._pred.items() if not parents)

    def undeveloped_goals(self) -> list[NodeId]:
        """Goals with no supporting node, sorted."""
        return sorted(n for n, k in self._kinds.items()
                      if k == "goal" and SUPPORT not in self._succ[n].values())

    def find_cycle(self) -> list[NodeId] | None:
        """One cycle as a closed node path (first node repeated at the end), or ``None``."""
        done: set[NodeId] = set()
        for start in self._kinds:
            if start in done:
                continue
            path, on_path = [start], {start}
            stack = [iter(self._succ[start])]
            while stack:
                child = next(stack[-1], None)
                if child is None:
                    stack.pop()
                    done.add(path[-1])
                    on_path.discard(path.pop())
                elif child in on_path:
                    return path[path.index(child):] + [child]
                elif child not in done:
                    path.append(child)
                    on_path.add(child)
                    stack.append(iter(self._succ[child]))
        return None

    def _reach(self, node_id: NodeId, edges: dict[NodeId, dict[NodeId, str]]) -> set[NodeId]:
        self._need(node_id)
        seen: set[NodeId] = set()
        todo = [node_id]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        seen.discard(node_id)
        return seen

    def descendants(self, node_id: NodeId) -> set[NodeId]:
        """Everything ``node_id`` rests on, through support and context edges."""
        return self._reach(node_id, self._succ)

    def ancestors(self, node_id: NodeId) -> set[NodeId]:
        """Every claim that rests on ``node_id``."""
        return self._reach(node_id, self._pred)

    def subgraph(self, node_ids: Iterable[NodeId]) -> "AssuranceGraph":
        """A new graph with only ``node_ids`` (unknown ids ignored) and the edges among them."""
        keep = {n for n in node_ids if n in self._kinds}
        sub = AssuranceGraph()
        for node_id, kind in self._kinds.items():
            if node_id in keep:
                sub.add_node(node_id, kind)
        for node_id in sub._kinds:
            for child, rel in self._succ[node_id].items():
                if child in keep:
                    sub._link(node_id, child, rel)
        return sub

    def top_down(self) -> list[NodeId]:
        """Every node, claims before what they rest on; ties broken by id.

        Raises :class:`GraphError` when the graph has a cycle.
        """
        waiting = {n: len(parents) for n, parents in self._pred.items()}
        ready = [n for n, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        order: list[NodeId] = []
        while ready:
            node_id = heapq.heappop(ready)
            order.append(node_id)
            for child in self._succ[node_id]:
                waiting[child] -= 1
                if waiting[child] == 0:
                    heapq.heappush(ready, child)
        if len(order) < len(self._kinds):
            raise GraphError(f"the assurance graph has a cycle: {' -> '.join(self.find_cycle() or [])}")
        return order

    def bottom_up(self) -> list[NodeId]:
        """Every node, supporters before the claims they support (reverse of :meth:`top_down`)."""
        return list(reversed(self.top_down()))
