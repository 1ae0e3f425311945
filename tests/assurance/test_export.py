"""SARIF 2.1.0 export of failing, stale and missing obligations."""

import json
from pathlib import Path

from assurance.export import SARIF_RULES, to_sarif
from assurance.status import evaluate
from tests.sarif_schema import validate_or_skip
from tests.assurance.conftest import D, KERNEL_V1, KERNEL_V2, NOW, OTHER_D, TODAY, ev

MM, SUITE, T = "kernel.mm.contract", "suite.batch", "trusted.compiler"


def test_sarif_results_carry_stable_rule_ids_and_locations(mini_case):
    evidence = [ev(MM, "fail", details={"lane": 3}, item="refuted"), ev(SUITE, category="test_result", deployment=OTHER_D)]
    evaluation = evaluate(mini_case, evidence=evidence, reviews=[], subjects={}, deployment_digest=D,
                          today=TODAY, now=NOW)
    log = json.loads(json.dumps(to_sarif(evaluation)))
    assert log["version"] == "2.1.0" and log["$schema"].endswith("/sarif-schema-2.1.0.json")
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [r[0] for r in SARIF_RULES]
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert set(by_rule) == {"BC001", "BC002", "BC004"}
    failed = by_rule["BC001"]
    assert failed["level"] == "error" and failed["properties"]["evidence_ids"] == ["refuted"]
    assert failed["partialFingerprints"] == {"bitcaseObligation/v1": f"mini/{MM}"}
    assert failed["locations"][0]["physicalLocation"]["region"]["startLine"] == mini_case.node(MM).line
    assert failed["locations"][0]["logicalLocations"][0]["name"] == MM
    assert run["results"][0]["ruleIndex"] == 0
    assert run["properties"]["top_status"] == "defeated"


def test_a_clean_case_has_only_trust_notes(mini_case):
    evidence = [ev(MM, subjects=(("code:kernels/mm.py", KERNEL_V1),)), ev(SUITE, category="test_result")]
    current = {"code:kernels/mm.py": KERNEL_V1}
    clean = evaluate(mini_case, evidence=evidence, reviews=[], subjects=current, deployment_digest=D, today=TODAY, now=NOW)
    assert [r["ruleId"] for r in to_sarif(clean)["runs"][0]["results"]] == ["BC004"]
    edited = evaluate(mini_case, evidence=evidence, reviews=[], subjects={"code:kernels/mm.py": KERNEL_V2},
                      deployment_digest=D, today=TODAY, now=NOW)
    assert sorted(r["ruleId"] for r in to_sarif(edited)["runs"][0]["results"]) == ["BC002", "BC004"]


def test_sarif_validates_against_the_official_schema(mini_case):
    evidence = [ev(MM, "fail", details={"lane": 3}, item="refuted"), ev(SUITE, category="test_result", deployment=OTHER_D)]
    evaluation = evaluate(mini_case, evidence=evidence, reviews=[], subjects={}, deployment_digest=D,
                          today=TODAY, now=NOW)
    validate_or_skip(json.loads(json.dumps(to_sarif(evaluation))))
