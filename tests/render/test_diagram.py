"""The trust-boundary diagram: DOT-safe ids, deterministic bytes, focus, Graphviz present or not."""

import re
from dataclasses import replace

import pytest

from assurance.render import graphviz
from assurance.render.components import layout, region_of
from assurance.render.diagram import UnknownNodeError, dot_quote, dot_source
from assurance.render.html import RenderOptions, render_report_html
from assurance.render.model import ComponentModel, ContractModel, NodeModel, ScopeModel
from tests.render.conftest import HOSTILE, make_model, make_scope, needs_dot



def _ids(dot_text):
    """Every node id, edge end and cluster name, as pydot parses the DOT text back."""
    import pydot

    (graph,) = pydot.graph_from_dot_data(dot_text)
    ids, graphs = [], [graph]
    while graphs:
        g = graphs.pop()
        ids += [g.get_name()] + [n.get_name() for n in g.get_nodes()]
        ids += [end for e in g.get_edges() for end in (e.get_source(), e.get_destination())]
        graphs += g.get_subgraphs()
    return [i for i in ids if i not in ("node", "edge", "graph")]


def test_dot_ids_never_contain_colons_and_text_goes_in_labels():
    dot_text = dot_source(make_scope(hostile=True))
    ids = _ids(dot_text)
    assert ids and all(":" not in i and '"' not in i for i in ids)
    assert "cluster_verified" in dot_text and "cluster_trusted" in dot_text


def test_the_same_scope_gives_the_same_dot_bytes():
    assert dot_source(make_scope()) == dot_source(make_scope())


def test_hostile_labels_are_quoted_and_cannot_expand():
    quoted = dot_quote('<b>x</b> "q" \\N \\G' + "\n" + HOSTILE)
    assert quoted.startswith('"<b>') and quoted.endswith('"')
    assert '\\\\N' in quoted and '\\"q\\"' in quoted  # backslashes and quotes escaped
    assert quoted.count('"') - quoted.count('\\"') == 2  # no unescaped quote inside


def test_components_land_in_the_right_regions():
    dot_text = dot_source(make_scope())
    clusters = {m.group(1): m.group(2) for m in re.finditer(r"subgraph (cluster_\w+) \{(.*?)\n\}", dot_text, re.S)}
    assert re.search(r"^kernels \[", clusters["cluster_verified"], re.M)
    assert re.search(r"^triton \[", clusters["cluster_trusted"], re.M)
    assert re.search(r"^gpu \[", clusters["cluster_trusted"], re.M)
    assert re.search(r"^driver \[", clusters["cluster_outside"], re.M)
    assert "sealed plan" in dot_text  # the runtime-checked contract engine -> kernels
    assert region_of([]) == "outside" and region_of(["failed"]) == "unsupported"
    assert region_of(["verified", "tested"]) == "tested"


def test_solutions_take_the_components_their_claims_name():
    scope = make_scope()
    drawn = layout(scope)
    assert drawn.attached["Sn-compare"] == ("engine",)  # inherited from G1
    assert drawn.attached["Sn-kernels"] == ("kernels", "kernel_proof")
    assert drawn.attached["T-gpu"] == ("gpu",) and "G1" not in drawn.attached
    assert [c.key for c in drawn.components] == [c.key for c in scope.components]  # nothing unassigned
    orphan = replace(scope, nodes=tuple(replace(n, components=()) if n.node_id == "G1" else n for n in scope.nodes))
    drawn = layout(orphan)
    assert drawn.attached["Sn-compare"] == ("unassigned",) and drawn.components[-1].key == "unassigned"
    assert "Not assigned to a component" in dot_source(orphan)


def test_a_case_without_components_gets_a_derived_layout_not_the_engine():
    nodes = (NodeModel("G.top", "goal", "Top", "supported-under-trust", children=("G.a", "G.b")),
             NodeModel("G.a", "goal", "Parsing is exact", "supported", children=("t.parse",)),
             NodeModel("G.b", "goal", "Storage is durable", "supported-under-trust", children=("t.store", "tr.disk")),
             NodeModel("t.parse", "solution", "parse tests", "tested"),
             NodeModel("t.store", "solution", "store tests", "tested"),
             NodeModel("tr.disk", "solution", "The disk keeps what fsync wrote", "trusted-unreviewed",
                       is_trusted=True))
    scope = ScopeModel("sha256:" + "1" * 64, {}, nodes, ("G.top",), ("tr.disk",), system="mything")
    drawn = layout(scope)
    assert drawn.is_derived
    assert [c.key for c in drawn.components] == ["G_a", "G_b", "tr_disk"]
    assert drawn.attached == {"t.parse": ("G_a",), "t.store": ("G_b",), "tr.disk": ("tr_disk", "relies_on_tr_disk")}
    assert [(c.source, c.target) for c in drawn.contracts] == [("G_b", "tr_disk")]
    dot_text = dot_source(scope)
    assert "Inference engine" not in dot_text and "declares no [[component]] tables" in dot_text
    assert all(":" not in i for i in _ids(dot_text))
    single = replace(scope, nodes=(replace(nodes[0], children=("t.parse",)), nodes[3]), trusted_base=())
    assert [c.label for c in layout(single).components] == ["mything"]


def test_declared_ids_with_dots_and_dashes_become_distinct_dot_ids():
    comps = (ComponentModel("a.b", "A dot B"), ComponentModel("a-b", "A dash B"), ComponentModel("legend", "L"))
    scope = ScopeModel("sha256:" + "1" * 64, {}, (NodeModel("G", "goal", "g", "supported", children=("s",),
                                                            components=("a-b",)),
                                                  NodeModel("s", "solution", "s", "tested")), ("G",), (),
                       components=comps, contracts=(ContractModel("x.y", "a.b", "legend", "uses"),))
    drawn = layout(scope)
    assert [c.key for c in drawn.components] == ["a_b", "a_b_2", "c_legend"]
    assert drawn.attached["s"] == ("a_b_2",) and drawn.contracts[0].target == "c_legend"


def test_the_legend_says_what_edges_and_regions_mean():
    dot_text = dot_source(make_scope())
    assert "cluster_legend" in dot_text
    for words in ("solid: A contract", "dashed: A contract taken on trust", "Outside the case (implicitly trusted)",
                  "not checked at all", "a check, not a proof"):
        assert words in dot_text, words
    assert "declares no [[component]]" not in dot_text


def test_nodes_that_do_not_apply_under_d_are_said_so():
    scope = make_scope()
    nodes = tuple(replace(n, status="not-applicable") if n.node_id == "T-gpu" else n for n in scope.nodes)
    dot_text = dot_source(replace(scope, nodes=nodes))
    assert "GPU\\n(not applicable under D)" in dot_text and "Driver and CUDA runtime\\n(no case node)" in dot_text


def test_focus_draws_only_what_the_claim_rests_on():
    scope = make_scope()
    full, focused = dot_source(scope), dot_source(scope, focus="Sn-kernels")
    assert "focus_claim" in focused and "triton" in full and "triton [" not in focused
    with pytest.raises(UnknownNodeError):
        dot_source(scope, focus="nope")


def test_svg_is_reduced_to_drawing_elements():
    svg = (b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" onload="x()" width="10">'
           b'<script>alert(1)</script><g id="a" onclick="y()"><a href="javascript:z()"><text>hi &lt;b&gt;</text></a>'
           b'<text x="1">ok</text><foreignObject><div>html</div></foreignObject></g></svg>')
    clean = graphviz.sanitize_svg(svg)
    assert "script" not in clean and "onload" not in clean and "onclick" not in clean
    assert "javascript" not in clean and "foreignObject" not in clean and 'id="a"' not in clean
    assert "ok" in clean and 'width="10"' in clean


def test_missing_dot_is_reported_and_the_report_says_so(monkeypatch):
    monkeypatch.setattr(graphviz.shutil, "which", lambda name: None)
    with pytest.raises(graphviz.DotMissingError, match="apt-get install graphviz"):
        graphviz.run_dot("digraph g {}", "svg")
    html = render_report_html(make_model(), RenderOptions())
    assert "was not found" in html and "apt-get install graphviz" in html and "DOT source" in html


@needs_dot
def test_report_embeds_the_diagram_svg_inline():
    html = render_report_html(make_model(hostile=True))
    svg = html.split('<figure class="svg">', 1)[1].split("</figure>", 1)[0]
    assert svg.startswith("<svg") and "Triton compiler" in svg
    assert "<script" not in svg.lower()
    assert not re.search(r"<[^>]*\son\w+\s*=", svg)  # no event-handler attribute on any element
    assert "<title>Sn-kernels</title>" in svg  # tooltips survive as <title> elements
