"""The assurance graph as a networkx ``DiGraph``: structure checks and export for other tools.

The status path keeps :class:`~assurance.graph.AssuranceGraph` (plain dictionaries, no import
cost); what is not on it uses networkx, imported when first needed: ``bitcase case validate``
lists every cycle and the nodes no top claim reaches, and ``bitcase case export`` writes
GraphML or node-link JSON. The answers equal the domain class's on the same case (the tests
compare them on the bundled and the benchmark cases).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable

from assurance.case_model import Case
from assurance.graph import CONTEXT, SUPPORT
from assurance.ids import NodeId

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["to_networkx", "cycles", "unreachable", "claims_resting_on", "graphml_text", "node_link_text",
           "MAX_CYCLES"]

MAX_CYCLES = 20  # a case with more is listed this far: each needs fixing anyway


def to_networkx(case: Case) -> "nx.DiGraph":
    """A ``DiGraph`` of ``case``: node attributes from the case, edges with ``relation``.

    Edges follow :meth:`AssuranceGraph.from_case`: claim -> what it rests on, edges to unknown
    ids left out, and for a pair with both relations the later one (context) wins.

    >>> from assurance.case_model import Node
    >>> g = to_networkx(Case("c", "C", "G", (Node("G", "goal", "g", supported_by=("S",)), Node("S", "solution", "s"))))
    >>> sorted(g.edges(data="relation"))
    [('G', 'S', 'supported_by')]
    """
    import networkx as nx

    graph = nx.DiGraph(case=case.id, title=case.title, top=case.top)
    for node in case.nodes:
        if node.id in graph:
            continue  # a duplicate id: validation reports it
        attrs: dict[str, Any] = {"kind": node.kind, "text": node.text, "source": node.source, "line": node.line}
        if node.kind == "solution":
            attrs.update(obligations=" ".join(node.obligations), requires=" ".join(node.requires),
                         any_of=" ".join(node.any_of), subjects=" ".join(node.subjects), trusted=node.is_trusted)
        if node.generated_by:
            attrs["generated_by"] = node.generated_by
        graph.add_node(node.id, **attrs)
    for node in case.nodes:
        for relation, targets in ((SUPPORT, node.supported_by), (CONTEXT, node.in_context_of)):
            for target in targets:
                if target in graph:
                    graph.add_edge(node.id, target, relation=relation)
    return graph


def cycles(case: Case, *, limit: int = MAX_CYCLES) -> list[list[NodeId]]:
    """Up to ``limit`` elementary cycles, each rotated to start at its smallest id, sorted."""
    import networkx as nx

    found = []
    for cycle in nx.simple_cycles(to_networkx(case)):
        start = cycle.index(min(cycle))
        found.append([NodeId(n) for n in cycle[start:] + cycle[:start]])
        if len(found) >= limit:
            break
    return sorted(found)


def unreachable(case: Case) -> list[NodeId]:
    """Nodes that no top claim (a goal nothing rests on) reaches through support or context, sorted."""
    import networkx as nx

    graph = to_networkx(case)
    tops = [n for n, d in graph.in_degree() if d == 0 and graph.nodes[n]["kind"] == "goal"]
    reached = set(tops).union(*(nx.descendants(graph, t) for t in tops))
    return sorted(NodeId(n) for n in graph if n not in reached)


def claims_resting_on(case: Case, node_ids: Iterable[str]) -> list[NodeId]:
    """Every claim that rests on any of ``node_ids`` (what distrusting them can reach), sorted."""
    import networkx as nx

    graph = to_networkx(case)
    found: set[str] = set()
    for node_id in node_ids:
        if node_id not in graph:
            raise KeyError(f"no node {node_id!r} in case {case.id!r}")
        found |= nx.ancestors(graph, node_id)
    return sorted(NodeId(n) for n in found)


def graphml_text(case: Case) -> str:
    """The case graph as GraphML (yEd, Gephi, Cytoscape)."""
    import networkx as nx

    return "\n".join(nx.generate_graphml(to_networkx(case), prettyprint=True)) + "\n"


def node_link_text(case: Case) -> str:
    """The case graph as networkx node-link JSON (d3, ``nx.node_link_graph``), keys sorted."""
    import networkx as nx

    data = nx.node_link_data(to_networkx(case), edges="edges")
    data["nodes"].sort(key=lambda n: n["id"])
    data["edges"].sort(key=lambda e: (e["source"], e["target"]))
    return json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n"
