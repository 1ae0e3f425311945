"""Claim aggregation rules A0–A6 and the shape of the evaluation result."""

import json
from dataclasses import replace

from assurance.generators import PlanItem, expand_case
from assurance.reviews import trust_digest
from assurance.status import evaluate, is_applicable
from tests.assurance.conftest import D, MINI_CASE, NOW, TODAY, case_from, ev, review

MM, SUITE, T = "kernel.mm.contract", "suite.batch", "trusted.compiler"


def run(case, evidence=(), reviews=(), fields=None):
    return evaluate(case, evidence=list(evidence), reviews=list(reviews), subjects={}, deployment_digest=D,
                    deployment_fields=fields, today=TODAY, now=NOW)


def all_discharged():
    return [ev(MM), ev(SUITE, category="test_result")]


def test_a6_supported_when_everything_is_discharged_by_evidence(mini_case):
    case = mini_case.with_nodes(tuple(n for n in mini_case.nodes if n.id != T))
    case = case.with_nodes(tuple(replace(n, supported_by=tuple(c for c in n.supported_by if c != T))
                                 for n in case.nodes))
    assert run(case, all_discharged()).node("G.top").status == "supported"


def test_a5_trusted_items_make_it_supported_under_trust(mini_case):
    unreviewed = run(mini_case, all_discharged())
    assert unreviewed.node("S.split").status == "supported-under-trust"
    assert unreviewed.node("G.top").status == "supported-under-trust"
    reviewed = run(mini_case, all_discharged(), [review(T, trust_digest(mini_case.node(T)))])
    assert reviewed.node("G.top").status == "supported-under-trust"
    assert any("trusted.compiler is trusted-reviewed" in why for why in reviewed.node("S.split").reasons)


def test_a4_missing_or_stale_support_is_incomplete(mini_case):
    r = run(mini_case, [ev(MM)]).node("S.split")
    assert r.status == "incomplete" and r.reasons == ("suite.batch is missing",)


def test_a3_a_failure_defeats_every_claim_above_it(mini_case):
    evaluation = run(mini_case, [ev(MM, "fail"), ev(SUITE, category="test_result")])
    assert evaluation.node("S.split").status == "defeated"
    assert evaluation.node("G.top").status == "defeated"
    assert evaluation.node("G.top").reasons == ("defeated by S.split (defeated)",)


def test_a1_an_undeveloped_goal_is_incomplete():
    case = case_from(MINI_CASE.replace('supported_by = ["S.split"]', 'supported_by = ["S.split", "G.later"]')
                     + '\n[[node]]\nid = "G.later"\nkind = "goal"\ntext = "later"\nundeveloped = true\n')
    evaluation = run(case, all_discharged())
    assert evaluation.node("G.later").status == "incomplete"
    assert evaluation.node("G.later").reasons == ("goal is marked undeveloped",)
    assert evaluation.node("G.top").status == "incomplete"


GENERATED = """
[case]
id = "gen"
top = "G.kernels"

[[node]]
id = "G.kernels"
kind = "goal"
text = "All kernels"

[[generate]]
id = "k"
parent = "G.kernels"
[generate.node]
id = "kernel.{key}.contract"
kind = "solution"
text = "{kernel}"
requires = ["kernel_proof"]
"""


def test_a2_a_generated_goal_without_a_plan_is_incomplete_and_says_why():
    case = case_from(GENERATED)
    r = run(case).node("G.kernels")
    assert r.status == "incomplete" and "no sealed plan" in r.reasons[0]
    expanded = expand_case(case, [PlanItem("mm", "mm.a", "kernels/mm.py", "sha256:1")])
    assert run(expanded, [ev("kernel.mm.a.contract")]).node("G.kernels").status == "supported"
    assert run(expand_case(case, [])).node("G.kernels").reasons == ("no applicable supporting nodes",)


def test_a0_conditions_on_deployment_fields(mini_case):
    node = replace(mini_case.node(T), when=(("engine.device", ("cpu",)),))
    assert is_applicable(node, {"engine": {"device": "cpu"}}) == (True, None)
    assert is_applicable(node, {"engine": {"device": "cuda"}}) == (False, None)
    kept, note = is_applicable(node, {"dtype": "float32"})
    assert kept and "no field engine.device" in note
    assert is_applicable(node, None) == (True, None)
    negated = replace(node, when=(), when_not=(("device", ("cpu", "true")),))
    assert is_applicable(negated, {"device": "cpu"})[0] is False
    assert is_applicable(negated, {"device": True})[0] is False  # booleans compare as true/false
    assert is_applicable(negated, {"device": "cuda:0"})[0] is True


def test_a0_a_node_that_does_not_apply_is_ignored_by_its_parents(mini_case):
    node = replace(mini_case.node(T), when_not=(("device", ("cpu",)),))
    case = mini_case.with_nodes(tuple(node if n.id == T else n for n in mini_case.nodes))
    evaluation = run(case, all_discharged(), fields={"device": "cpu"})
    assert evaluation.node(T).status == "not-applicable"
    assert evaluation.node("G.top").status == "supported"
    assert run(case, all_discharged(), fields={"device": "cuda"}).node("G.top").status == "supported-under-trust"


def test_a0_nodes_below_an_excluded_claim_are_excluded(mini_case):
    node = replace(mini_case.node("S.split"), when=(("device", ("cuda",)),))
    case = mini_case.with_nodes(tuple(node if n.id == "S.split" else n for n in mini_case.nodes))
    evaluation = run(case, fields={"device": "cpu"})
    assert {evaluation.node(i).status for i in ("S.split", MM, SUITE, T)} == {"not-applicable"}
    assert evaluation.node("G.top").status == "incomplete"


def test_result_is_json_serialisable_and_ordered_top_down(mini_case):
    evaluation = run(mini_case, [ev(MM, "fail", details={"lane": 3})])
    doc = json.loads(json.dumps(evaluation.to_json()))
    assert doc["schema"] == "bitcase.status/v1" and doc["deployment_digest"] == D
    assert [n["id"] for n in doc["nodes"]][0] == "G.top"
    node = {n["id"]: n for n in doc["nodes"]}
    assert node[MM]["counterexamples"][0]["details"] == {"lane": 3}
    assert node[T]["trusted"] and node[T]["review"]["state"] == "unreviewed" and node[T]["rationale"]
    assert node["C.d"]["status"] == "context" and node[MM]["policy"] == {"requires": ["kernel_proof"], "any_of": []}
    assert doc["tops"] == [{"id": "G.top", "status": "defeated"}]
    assert set(node[MM]) >= {"kind", "text", "source", "source_ref", "reasons", "evidence_ids", "status"}


def test_evaluation_is_deterministic(mini_case):
    evidence = [ev(MM), ev(SUITE, category="test_result"), ev(SUITE, "fail", category="test_result", item="z")]
    first = json.dumps(run(mini_case, evidence).to_json())
    assert json.dumps(run(mini_case, list(reversed(evidence))).to_json()) == first
