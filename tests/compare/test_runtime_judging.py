"""The runtime-check verdicts on synthetic observations: each defect the checks exist for is caught."""

from dataclasses import replace

import pytest

from engine.compare.runtime_checks import (ATTENTION_FORMS, KERNELS_ON_PATH, deployment_check, finiteness_check,
                                           plan_check)
from engine.compare.runtime_probe import ProbeResult, observed_environment
from evidence_db.bundle import Deployment

PLAN = "sha256:" + "1" * 64
# The default path: the MLP's activation in the gate/up projection's epilogue, attention in both forms
CONFIGS = {f"{k}.x": {"BLOCK": 16, "num_warps": 4}
           for k in (*KERNELS_ON_PATH, "matmul_silu", *(k for form in ATTENTION_FORMS for k in form))}


def probe(**changes) -> ProbeResult:
    fields = d_fields()
    base = ProbeResult(engine_deployment=Deployment(fields), plan_digest=PLAN, plan_keys=tuple(CONFIGS),
                       plan_configs=CONFIGS, launches=[(k.split(".")[0], k, dict(v)) for k, v in CONFIGS.items()],
                       torch_num_threads=1, cached_tokens=32, prefill_chunk_ends=(512, 529),
                       outside_plan_refused="kernel launch refused: ...",
                       wrong_deployment_refused="this engine runs under D ...")
    return replace(base, **changes)


def d_fields(**changes):
    env = observed_environment("cpu")
    fields = {"kernel_plan": {"digest": PLAN}, "torch_num_threads": 1,
              "software": {"python": env["python"], "torch": env["torch"], "triton": env["triton"]},
              "accelerator": {"name": "cpu"}}
    fields.update(changes)
    return fields


def test_a_clean_probe_passes():
    assert plan_check(probe(), PLAN, d_fields())[0] == "pass"
    fields = d_fields()
    assert deployment_check(probe(), fields, Deployment(fields).digest, "cpu", None)[0] == "pass"


@pytest.mark.parametrize("change,expected", [
    ({"launches": [("matmul", "matmul.unsealed", {"BLOCK": 16, "num_warps": 4})]}, "outside the plan"),
    ({"launches": [("matmul", "matmul.x", {"BLOCK": 32, "num_warps": 4})]}, "launch options differ"),
    ({"launches": [("matmul", "matmul.x", {"BLOCK": 16, "num_warps": 4})]}, "does not cover the forward path"),
    ({"outside_plan_refused": None}, "was admitted"),
    ({"plan_digest": "sha256:" + "2" * 64}, "plan digests differ"),
    ({"cached_tokens": 0}, "did not exercise chunking and reuse"),
])
def test_plan_defects_fail(change, expected):
    status, problems, _ = plan_check(probe(**change), PLAN, d_fields())
    assert status == "fail" and any(expected in p for p in problems), problems


@pytest.mark.parametrize("plan_activation,launched,missing", [
    ("matmul_silu", "silu_mul", "matmul_silu"),  # a fused plan that ran the two-launch form
    ("silu_mul", "matmul_silu", "silu_mul"),  # a plan without the fused entry
    ("gelu_tanh_mul", "silu_mul", "gelu_tanh_mul"),
])
def test_the_planned_activation_must_be_launched(plan_activation, launched, missing):
    options = {"BLOCK": 16, "num_warps": 4}
    common = {k: v for k, v in CONFIGS.items() if k != "matmul_silu.x"}
    plan = {**common, f"{plan_activation}.x": options}
    ran = {**common, f"{launched}.x": options}
    observed = probe(plan_keys=tuple(plan), plan_configs={**plan, **ran},
                     launches=[(k.split(".")[0], k, dict(v)) for k, v in ran.items()])
    status, problems, _ = plan_check(observed, PLAN, d_fields())
    assert status == "fail" and any(f"'{missing}'" in p and "forward path" in p for p in problems), problems


@pytest.mark.parametrize("dropped,passes", [
    (("attention_prefill",), True), (("paged_attention", "attention_combine"), True),  # either form covers it
    (("attention_combine", "attention_prefill"), False),  # a walk without its merge covers nothing
    (("paged_attention", "attention_combine", "attention_prefill"), False),
])
def test_attention_is_on_the_path_in_either_form(dropped, passes):
    ran = {k: v for k, v in CONFIGS.items() if k.split(".")[0] not in dropped}
    observed = probe(launches=[(k.split(".")[0], k, dict(v)) for k, v in ran.items()])
    status, problems, _ = plan_check(observed, PLAN, d_fields())
    assert (status == "pass") == passes, problems
    if not passes:
        assert any("attention_prefill" in p and "forward path" in p for p in problems), problems


def test_plan_digest_of_d_must_match_the_recomputed_plan():
    status, problems, _ = plan_check(probe(), PLAN, d_fields(kernel_plan={"digest": "sha256:" + "3" * 64}))
    assert status == "fail" and "plan digests differ" in problems[0]


@pytest.mark.parametrize("fields,probe_change,expected", [
    (d_fields(torch_num_threads=4), {}, "thread count"),
    (d_fields(software={"python": "3.0.0", "torch": "0", "triton": "0"}), {}, "python: D says '3.0.0'"),
    (d_fields(accelerator={"name": "NVIDIA H200"}), {}, "accelerator"),
    (d_fields(), {"wrong_deployment_refused": None}, "does not match"),
])
def test_deployment_defects_fail(fields, probe_change, expected):
    status, problems, _ = deployment_check(probe(**probe_change), fields, Deployment(fields).digest, "cpu", None)
    assert status == "fail" and any(expected in p for p in problems), problems


def test_an_engine_that_refuses_d_fails_the_deployment_check():
    fields = d_fields()
    status, problems, details = deployment_check(None, fields, Deployment(fields).digest, "cpu", "DeploymentMismatch")
    assert status == "fail" and "refused to start" in problems[0]


CHECKED = [("rope_store_kv", "rope_store_kv.x", {"CHECK": 1}), ("attention_combine", "attention_combine.x", {"CHECK": 1})]
CONTROL = {"poisoned": "error", "companion": "length", "num_events": 1}


def test_the_finiteness_check_passes_when_d_runs_it_and_the_control_is_caught():
    status, problems, details = finiteness_check(probe(launches=CHECKED, finiteness_control=CONTROL),
                                                 d_fields(engine={"check_finite": True}))
    assert status == "pass", problems
    assert details["covers"] and details["stays_trusted"]


@pytest.mark.parametrize("fields,change,expected", [
    (d_fields(engine={"check_finite": False}), {}, "D does not say"),
    (d_fields(engine={"check_finite": True}),
     {"launches": CHECKED[:1] + [("attention_combine", "attention_combine.y", {"CHECK": 0})]},
     "launches without the check"),
    (d_fields(engine={"check_finite": True}), {"launches": []}, "no rope_store_kv or attention_combine launch"),
    (d_fields(engine={"check_finite": True}), {"finiteness_control": {**CONTROL, "poisoned": "length"}},
     "finished 'length', not 'error'"),
    (d_fields(engine={"check_finite": True}), {"finiteness_control": {**CONTROL, "companion": "error"}},
     "companion finished 'error'"),
])
def test_finiteness_defects_fail(fields, change, expected):
    observed = probe(**{"launches": CHECKED, "finiteness_control": CONTROL, **change})
    status, problems, _ = finiteness_check(observed, fields)
    assert status == "fail" and any(expected in p for p in problems), problems


def test_a_gemma_plan_needs_its_activation_and_softcap_launched_not_silu_mul():
    configs = {**{k: v for k, v in CONFIGS.items() if not k.startswith("silu_mul")},
               "gelu_tanh_mul.x": {"BLOCK": 16, "num_warps": 4}, "logit_softcap.x": {"BLOCK": 16, "num_warps": 4}}
    launches = [(k.split(".")[0], k, dict(v)) for k, v in configs.items()]
    gemma = probe(plan_keys=tuple(configs), plan_configs=configs, launches=launches)
    assert plan_check(gemma, PLAN, d_fields())[0] == "pass"
    for kernel in ("gelu_tanh_mul", "logit_softcap"):
        status, problems, _ = plan_check(replace(gemma, launches=[x for x in launches if x[0] != kernel]), PLAN,
                                         d_fields())
        assert status == "fail" and kernel in problems[0]
