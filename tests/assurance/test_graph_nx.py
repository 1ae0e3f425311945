"""The networkx view of a case gives the domain class's answers; validation and export through the CLI."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from typer.testing import CliRunner

from assurance.case_loader import load_case
from assurance.cli.main import app
from assurance.graph import AssuranceGraph
from assurance.graph_nx import claims_resting_on, cycles, to_networkx, unreachable
from assurance.scope import BUNDLED_CASE

runner = CliRunner()
LEDGER = Path(__file__).parent.parent / "fixtures" / "ledger" / "case.toml"


@pytest.fixture(scope="module")
def bench_case(tmp_path_factory: pytest.TempPathFactory):
    sys.path.insert(0, str(Path(__file__).parents[2]))
    from bench.status import write_case

    random.seed(7)
    path = tmp_path_factory.mktemp("bench") / "case.toml"
    write_case(path, 2000)
    return load_case(path)


@pytest.mark.parametrize("which", ["bundled", "bench", "ledger"])
def test_networkx_answers_equal_the_domain_class(which: str, bench_case) -> None:
    case = {"bundled": lambda: load_case(BUNDLED_CASE), "bench": lambda: bench_case,
            "ledger": lambda: load_case(LEDGER)}[which]()
    domain, graph = AssuranceGraph.from_case(case), to_networkx(case)
    assert sorted(graph.nodes) == sorted(domain.nodes())
    for node_id in domain.nodes()[:: max(1, len(domain.nodes()) // 200)]:
        assert nx.descendants(graph, node_id) == domain.descendants(node_id)
        assert set(claims_resting_on(case, [node_id])) == domain.ancestors(node_id)
        assert sorted(graph.successors(node_id)) == sorted(domain.supported_by(node_id) + domain.context_of(node_id))
    assert list(nx.lexicographical_topological_sort(graph)) == domain.top_down()
    assert sorted(n for n, d in graph.in_degree() if d == 0) == domain.roots()
    assert cycles(case) == [] and domain.find_cycle() is None and unreachable(case) == []


CYCLIC = """
[case]
id = "loop"
top = "G"
[[node]]
id = "G"
kind = "goal"
text = "g"
supported_by = ["Sn"]
[[node]]
id = "A"
kind = "goal"
text = "a"
supported_by = ["B"]
[[node]]
id = "B"
kind = "strategy"
text = "b"
supported_by = ["A", "Sx"]
[[node]]
id = "Sn"
kind = "solution"
text = "s"
requires = ["test_result"]
[[node]]
id = "Sx"
kind = "solution"
text = "x"
requires = ["test_result"]
"""


def test_validate_lists_every_cycle_and_the_nodes_no_top_claim_reaches(tmp_path: Path) -> None:
    path = tmp_path / "loop.toml"
    path.write_text(CYCLIC)
    case = load_case(path)
    assert cycles(case) == [["A", "B"]] and unreachable(case) == ["A", "B", "Sx"]
    domain_cycle = AssuranceGraph.from_case(case).find_cycle()
    assert set(domain_cycle) == {"A", "B"}
    result = runner.invoke(app, ["case", "validate", str(path), "--json"])
    assert result.exit_code == 2
    issues = {(i["code"], i["node"]) for i in json.loads(result.stdout)["issues"]}
    assert {("cycle", "A"), ("unreachable", "A"), ("unreachable", "B"), ("unreachable", "Sx")} <= issues


def test_case_export_graphml_and_node_link_round_trip(tmp_path: Path) -> None:
    graphml = runner.invoke(app, ["case", "export", str(LEDGER), "--format", "graphml"])
    assert graphml.exit_code == 0, graphml.stderr
    (tmp_path / "g.graphml").write_text(graphml.stdout)
    read = nx.read_graphml(tmp_path / "g.graphml")
    original = to_networkx(load_case(LEDGER))
    assert sorted(read.edges(data="relation")) == sorted(original.edges(data="relation"))
    assert read.nodes["trusted.decimal"]["trusted"] is True and read.nodes["G.ledger"]["kind"] == "goal"
    out = tmp_path / "g.json"
    linked = runner.invoke(app, ["case", "export", str(LEDGER), "--format", "node-link", "--out", str(out)])
    assert linked.exit_code == 0 and linked.stdout == ""
    again = nx.node_link_graph(json.loads(out.read_text()), edges="edges")
    assert sorted(again.edges(data="relation")) == sorted(original.edges(data="relation"))
    bad = runner.invoke(app, ["case", "export", str(LEDGER), "--format", "dot"])
    assert bad.exit_code == 2


def test_status_does_not_import_networkx() -> None:
    code = ("import sys; from assurance.cli.main import app; import assurance.scope, assurance.status, "
            "assurance.cli.claims; print('networkx' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).parents[2])
    assert result.stdout.strip() == "False", result.stderr
