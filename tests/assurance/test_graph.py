"""The graph domain class: verbs, deterministic order and domain errors."""

import pytest

from assurance.graph import AssuranceGraph, GraphError
from assurance.ids import NodeId, dot_safety_problem, is_dot_safe


def test_domain_verbs(mini_case):
    g = AssuranceGraph.from_case(mini_case)
    assert g.supported_by(NodeId("S.split")) == ["kernel.mm.contract", "suite.batch", "trusted.compiler"]
    assert g.supports(NodeId("suite.batch")) == ["S.split"]
    assert g.context_of(NodeId("G.top")) == ["C.d"]
    assert g.roots() == ["G.top"]
    assert g.undeveloped_goals() == []
    assert g.descendants(NodeId("G.top")) == {"C.d", "S.split", "kernel.mm.contract", "suite.batch", "trusted.compiler"}
    assert g.ancestors(NodeId("suite.batch")) == {"G.top", "S.split"}
    assert g.kind(NodeId("C.d")) == "context" and len(g) == 6


def test_order_is_deterministic_whatever_the_insertion_order():
    def build(order):
        g = AssuranceGraph()
        for n in order:
            g.add_node(NodeId(n), "goal")
        g.add_support(NodeId("a"), NodeId("c"))
        g.add_support(NodeId("a"), NodeId("b"))
        return g

    assert build("abc").top_down() == build("cba").top_down() == ["a", "b", "c"]
    assert build("abc").bottom_up() == ["c", "b", "a"]


def test_subgraph_and_undeveloped_goals(mini_case):
    g = AssuranceGraph.from_case(mini_case)
    sub = g.subgraph([NodeId("G.top"), NodeId("C.d")])
    assert sub.nodes() == ["C.d", "G.top"] and sub.undeveloped_goals() == ["G.top"]


def test_cycles_raise_a_domain_error():
    g = AssuranceGraph()
    for n in "ab":
        g.add_node(NodeId(n), "goal")
    g.add_support(NodeId("a"), NodeId("b"))
    g.add_support(NodeId("b"), NodeId("a"))
    assert g.find_cycle() in (["a", "b", "a"], ["b", "a", "b"])
    with pytest.raises(GraphError, match="cycle"):
        g.top_down()


def test_unknown_nodes_raise_a_domain_error():
    with pytest.raises(GraphError, match="no node 'x'"):
        AssuranceGraph().supported_by(NodeId("x"))


def test_dot_safety():
    assert is_dot_safe("kernel.matmul.n64_k64.contract")
    assert "':'" in dot_safety_problem("code:x")
    assert "keyword" in dot_safety_problem("Subgraph")
    assert dot_safety_problem("") == "is empty"
