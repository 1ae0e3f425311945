"""Flatten a scope's argument DAG into rows for a collapsible tree.

The report renders the tree as a flat list of rows with a depth, not as nested markup: a
case can be thousands of levels deep, which neither Jinja recursion nor the HTML parser's
nesting limit would survive. A node shared by several parents is written out once, at its
first visit; later visits are reference rows that link to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from assurance.render.model import NodeModel, ScopeModel

__all__ = ["TreeRow", "tree_rows"]


@dataclass(frozen=True, slots=True)
class TreeRow:
    """One line of the tree: a node at a depth, reached through ``relation`` from its parent."""

    node: NodeModel
    depth: int
    relation: str  # "root" | "supported-by" | "in-context-of"
    is_ref: bool  # a repeat visit: links to the row where the node is written out
    num_children: int  # rows directly below this one (0 for reference rows)


def tree_rows(scope: ScopeModel) -> list[TreeRow]:
    """Depth-first rows from the top claims, then from nodes no top claim reaches."""
    by_id = {n.node_id: n for n in scope.nodes}
    reached_by_parent: set[str] = set()
    for node in scope.nodes:
        reached_by_parent.update(c for c in (*node.children, *node.context) if c in by_id)
    roots = list(dict.fromkeys(scope.top_claims))
    roots += sorted(n.node_id for n in scope.nodes if n.node_id not in reached_by_parent
                    and n.node_id not in roots)

    rows: list[TreeRow] = []
    written: set[str] = set()

    def children_of(node: NodeModel) -> list[tuple[str, str]]:
        kids = [(c, "in-context-of") for c in node.context if c in by_id]
        return kids + [(c, "supported-by") for c in node.children if c in by_id]

    def visit(start: str) -> None:
        # Explicit stack instead of recursion: the depth of a case is unbounded.
        stack: list[tuple[str, int, str]] = [(start, 0, "root")]
        while stack:
            node_id, depth, relation = stack.pop()
            node = by_id[node_id]
            if node_id in written:
                rows.append(TreeRow(node, depth, relation, True, 0))
                continue
            written.add(node_id)
            kids = children_of(node)
            rows.append(TreeRow(node, depth, relation, False, len(kids)))
            for kid_id, kid_relation in reversed(kids):
                stack.append((kid_id, depth + 1, kid_relation))

    for root in roots:
        if root not in written:
            visit(root)
    # Nodes only reachable through a cycle among themselves.
    for node in sorted(scope.nodes, key=lambda n: n.node_id):
        if node.node_id not in written:
            visit(node.node_id)
    return rows
