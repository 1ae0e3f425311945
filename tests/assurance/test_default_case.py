"""The bundled determinism case: valid, sourced, complete, and its obligation ids documented."""

import re
from pathlib import Path

import pytest

from assurance.case_loader import load_case
from assurance.generators import PlanItem, expand_case
from assurance.graph import AssuranceGraph
from assurance.scope import BUNDLED_CASE
from assurance.status import evaluate
from assurance.validate import validate_case
from tests.assurance.conftest import D, NOW, TODAY

RULES_DOC = (Path(__file__).resolve().parents[2] / "docs" / "status-rules.md").read_text(encoding="utf-8")
PLAN = (PlanItem("matmul", "matmul.n64_k64", "kernels/matmul.py", "sha256:1"),
        PlanItem("paged_attention", "paged_attention.d16", "kernels/attention.py", "sha256:2"),
        PlanItem("attention_combine", "attention_combine.d16_s128", "kernels/attention_combine.py", "sha256:3"))
CASE_TRUSTED = {"trusted.contract-translation", "trusted.tensor-representation", "trusted.verifier-translator",
                 "trusted.verifier-rules", "trusted.solver-encoding", "trusted.interface-mapping",
                 "trusted.triton-compiler", "trusted.gpu-execution", "trusted.attention-finiteness",
                 "trusted.cuda-graph-replay", "trusted.cpu-path", "trusted.triton-primitives",
                 "trusted.finiteness-check", "trusted.dot-tile-shape"}
SUITES = {"suite.batch", "suite.chunk", "suite.prefill_decode", "suite.prefix", "suite.schedule",
          "suite.negative_control"}


def case():
    return expand_case(load_case(BUNDLED_CASE), PLAN, label="test plan")


def test_the_default_case_is_valid_with_and_without_a_plan():
    assert validate_case(load_case(BUNDLED_CASE)) == []
    assert validate_case(case()) == []


def test_every_node_cites_its_source():
    assert [n.id for n in case().nodes if not n.source.strip()] == []


def test_top_claim_frame():
    c = case()
    top = c.node(c.top)
    assert top.kind == "goal" and "§2.3" in top.source
    assert {c.node(i).kind for i in top.in_context_of} == {"context", "assumption"}
    assert any("liveness" in c.node(i).text for i in top.in_context_of)
    assert any("across hardware" in c.node(i).text for i in top.in_context_of)


def test_argument_covers_theorem_invariants_cache_plan_and_suites():
    c = case()
    below = AssuranceGraph.from_case(c).descendants(c.top)
    assert "Theorem 4.1" in c.node("S.theorem41").source
    assert {"G.inv.layout", "G.inv.kv_value", "G.inv.write_isolation", "G.inv.kernel_config"} <= below
    assert {"G.cache_provenance", "G.publication_order", "G.sealed_launch", "G.sampler_coupling"} <= below
    assert SUITES | {"runtime.plan", "runtime.no_autotune", "runtime.deployment", "engine.invariants"} <= below
    assert {"kernel.matmul.n64_k64.contract", "kernel.paged_attention.d16.contract",
            "kernel.attention_combine.d16_s128.contract"} <= below
    assert "identity" in c.node("kernel.paged_attention.d16.contract").text
    assert "ascending" in c.node("kernel.attention_combine.d16_s128.contract").text


def test_every_trusted_item_is_in_the_case_with_a_rationale():
    trusted = {n.id for n in case().nodes if n.is_trusted}
    assert trusted == CASE_TRUSTED
    assert all(case().node(t).rationale for t in trusted)


def test_fidelity_is_a_separate_top_claim_that_never_supports_determinism():
    c = case()
    graph = AssuranceGraph.from_case(c)
    assert graph.roots() == ["G.determinism", "G.fidelity", "G.serving"]
    assert "fidelity.reference" not in graph.descendants(c.top)
    assert "fidelity.reference" in graph.descendants("G.fidelity")


def test_the_serving_path_is_outside_the_determinism_claim():
    c = case()
    graph = AssuranceGraph.from_case(c)
    assert "serving.http" not in graph.descendants(c.top)
    assert "serving.http" in graph.descendants("G.serving")


def test_every_obligation_id_is_documented():
    documented = set(re.findall(r"`((?:suite|runtime|engine|fidelity|serving|trusted)\.[a-z0-9_.\-]+)`", RULES_DOC))
    obligations = {o for n in case().nodes if n.kind == "solution" and not n.generated_by for o in n.obligations}
    assert obligations - documented == set()
    assert "kernel.<entry key>.contract" in RULES_DOC


def test_cpu_and_gpu_trusted_items_follow_the_device():
    def applies(fields):
        evaluation = evaluate(case(), evidence=[], reviews=[], subjects={}, deployment_digest=D,
                              deployment_fields=fields, today=TODAY, now=NOW)
        return {n for n in CASE_TRUSTED if evaluation.node(n).status != "not-applicable"}

    cpu = {"accelerator": {"device_type": "cpu"}, "engine": {"cuda_graphs": False, "check_finite": True}}
    gpu = {"accelerator": {"device_type": "cuda", "name": "H200"}, "engine": {"cuda_graphs": False,
                                                                            "check_finite": True}}
    graphs = {"accelerator": {"device_type": "cuda", "name": "H200"},
              "engine": {"cuda_graphs": True, "check_finite": False}}
    assert applies(cpu) == CASE_TRUSTED - {"trusted.gpu-execution", "trusted.cuda-graph-replay",
                                           "trusted.dot-tile-shape"}
    assert applies(gpu) == CASE_TRUSTED - {"trusted.cpu-path", "trusted.cuda-graph-replay"}
    # without the run-time check there is no check to trust: the premise itself stays trusted
    assert applies(graphs) == CASE_TRUSTED - {"trusted.cpu-path", "trusted.finiteness-check"}


def test_every_assumption_the_verifier_relies_on_is_an_obligation_of_the_case():
    catalogue = pytest.importorskip("proofs.trusted", reason="the verifier's catalogue is not installed").CATALOGUE
    obligations = {o for n in case().nodes if n.is_trusted for o in n.obligations}
    assert {f"trusted.{i}" for i in catalogue} - obligations == set()


def test_a_passing_finiteness_runtime_check_takes_the_premise_out_of_the_trusted_base():
    from assurance.trusted import trusted_base
    from tests.assurance.conftest import ev

    fields = {"accelerator": {"device_type": "cpu"}, "engine": {"cuda_graphs": False, "check_finite": True}}
    reliance = ev("trusted.attention-finiteness", category="trusted_contract_translation", item="proof-reliance")

    def evaluated(evidence):
        return evaluate(case(), evidence=evidence, reviews=[], subjects={}, deployment_digest=D,
                        deployment_fields=fields, today=TODAY, now=NOW)

    before = evaluated([reliance])
    assert before.node("trusted.attention-finiteness").status.startswith("trusted")
    assert "trusted.attention-finiteness" in {r.id for r in trusted_base(before)}
    checked = ev("trusted.attention-finiteness", category="runtime_config_check", item="finiteness-run")
    after = evaluated([reliance, checked])
    assert after.node("trusted.attention-finiteness").status == "runtime-checked"
    assert "trusted.attention-finiteness" not in {r.id for r in trusted_base(after)}
    failed = evaluated([reliance, checked, ev("trusted.attention-finiteness", "fail", category="runtime_config_check",
                                             item="finiteness-later-run")])
    assert failed.node("trusted.attention-finiteness").status == "failed"
