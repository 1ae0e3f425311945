"""Flattening the argument DAG: shared nodes once, cycles and deep cases survive."""

from assurance.render.model import NodeModel, ScopeModel
from assurance.render.tree import tree_rows


def _scope(nodes, tops):
    return ScopeModel("sha256:" + "0" * 64, {}, tuple(nodes), tuple(tops), ())


def test_shared_node_is_written_once_then_referenced():
    scope = _scope([NodeModel("G", "goal", "g", children=("A", "B")), NodeModel("A", "goal", "a", children=("S",)),
                    NodeModel("B", "goal", "b", children=("S",)), NodeModel("S", "solution", "s")], ["G"])
    rows = [(r.node.node_id, r.depth, r.is_ref) for r in tree_rows(scope)]
    assert rows == [("G", 0, False), ("A", 1, False), ("S", 2, False), ("B", 1, False), ("S", 2, True)]


def test_context_rows_come_first_and_orphans_are_roots():
    scope = _scope([NodeModel("G", "goal", "g", children=("S",), context=("C",)), NodeModel("C", "context", "c"),
                    NodeModel("S", "solution", "s"), NodeModel("X", "solution", "orphan")], ["G"])
    rows = [(r.node.node_id, r.relation) for r in tree_rows(scope)]
    assert rows == [("G", "root"), ("C", "in-context-of"), ("S", "supported-by"), ("X", "root")]


def test_cycle_and_ten_thousand_levels_do_not_recurse():
    depth = 10_000
    nodes = [NodeModel(f"G{i}", "goal", "g", children=(f"G{i + 1}",)) for i in range(depth)]
    nodes.append(NodeModel(f"G{depth}", "goal", "last", children=("G0",)))  # closes a cycle
    rows = tree_rows(_scope(nodes, ["G0"]))
    assert len(rows) == depth + 2 and rows[-1].is_ref and rows[-1].node.node_id == "G0"
    assert max(r.depth for r in rows) == depth + 1
