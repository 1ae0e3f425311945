"""Solution status rules R1–R10 (docs/status-rules.md), one test per rule or more."""

from datetime import timedelta

from assurance.status import evaluate
from tests.assurance.conftest import D, KERNEL_V1, KERNEL_V2, NOW, OTHER_D, TODAY, ev

MM = "kernel.mm.contract"
SUB_V1 = (("code:kernels/mm.py", KERNEL_V1),)
CURRENT = {"code:kernels/mm.py": KERNEL_V1, "code:engine/x.py": KERNEL_V1}


def run(case, evidence, *, subjects=CURRENT, reviews=(), deployment=D):
    return evaluate(case, evidence=evidence, reviews=reviews, subjects=subjects, deployment_digest=deployment,
                    today=TODAY, now=NOW)


def test_r1_evidence_under_another_configuration_never_counts(mini_case):
    r = run(mini_case, [ev(MM, deployment=OTHER_D, subjects=SUB_V1)]).node(MM)
    assert r.status == "stale" and r.evidence_ids == ()
    assert any("other deployment configurations" in why for why in r.reasons)


def test_r1_failures_under_another_configuration_do_not_defeat(mini_case):
    evaluation = run(mini_case, [ev(MM, subjects=SUB_V1, item="p"), ev(MM, "fail", item="f", deployment=OTHER_D)])
    assert evaluation.node(MM).status == "verified"


def test_r2_latest_item_by_chain_seq_wins(mini_case):
    older_fail = ev(MM, "fail", item="proof", seq=10, subjects=SUB_V1)
    newer_pass = ev(MM, "pass", item="proof", seq=11, subjects=SUB_V1)
    assert run(mini_case, [newer_pass, older_fail]).node(MM).status == "verified"
    assert run(mini_case, [ev(MM, "pass", item="proof", seq=12), ev(MM, "fail", item="proof", seq=13)]
               ).node(MM).status == "failed"


def test_r3_failing_evidence_is_a_defeater_with_its_counterexample(mini_case):
    cex = {"run_a": {"M": 3}, "run_b": {"M": 67}, "pid": 0}
    evaluation = run(mini_case, [ev(MM, subjects=SUB_V1, item="ok"),
                                 ev(MM, "fail", item="refuted", details=cex, summary="REFUTED")])
    r = evaluation.node(MM)
    assert r.status == "failed"
    assert [(c.evidence_id, c.details, c.summary) for c in r.counterexamples] == [("refuted", cex, "REFUTED")]
    assert r.obligations[0].defeater_ids == ("refuted",)


def test_r3_a_failure_defeats_whatever_its_category(mini_case):
    failing_test = ev(MM, "fail", category="test_result", item="differential")
    assert run(mini_case, [ev(MM, subjects=SUB_V1), failing_test]).node(MM).status == "failed"


def test_r3_an_error_also_defeats(mini_case):
    assert run(mini_case, [ev(MM, "error")]).node(MM).status == "failed"


def test_r4_only_categories_in_the_policy_discharge(mini_case):
    r = run(mini_case, [ev(MM, category="test_result")]).node(MM)
    assert r.status == "missing" and any("outside the policy" in why for why in r.reasons)


def test_r4_any_of_and_the_strongest_label(mini_case):
    suite = "suite.batch"
    assert run(mini_case, [ev(suite, category="test_result")]).node(suite).status == "tested"
    assert run(mini_case, [ev(suite, category="runtime_config_check")]).node(suite).status == "runtime-checked"
    both = [ev(suite, category="test_result"), ev(suite, category="runtime_config_check")]
    r = run(mini_case, both).node(suite)
    assert r.status == "runtime-checked" and r.obligations[0].categories == ("runtime_config_check", "test_result")


def test_r4_requires_needs_every_category(mini_case):
    from dataclasses import replace

    node = replace(mini_case.node(MM), requires=("kernel_proof", "runtime_config_check"))
    case = mini_case.with_nodes(tuple(node if n.id == MM else n for n in mini_case.nodes))
    assert run(case, [ev(MM)]).node(MM).status == "missing"
    assert run(case, [ev(MM), ev(MM, category="runtime_config_check")]).node(MM).status == "verified"


def test_r5_editing_a_covered_file_makes_the_proof_stale_at_once(mini_case):
    proof = ev(MM, subjects=SUB_V1)
    assert run(mini_case, [proof]).node(MM).status == "verified"
    r = run(mini_case, [proof], subjects={"code:kernels/mm.py": KERNEL_V2}).node(MM)
    assert r.status == "stale" and r.stale_evidence_ids == (proof.item_id,)
    assert any("code:kernels/mm.py changed" in why for why in r.reasons)


def test_r5_a_deleted_covered_file_is_stale(mini_case):
    r = run(mini_case, [ev(MM, subjects=SUB_V1)], subjects={}).node(MM)
    assert r.status == "stale" and any("no longer exists" in why for why in r.reasons)


def test_r5_subjects_the_solution_does_not_cover_are_ignored(mini_case):
    proof = ev(MM, subjects=SUB_V1 + (("code:proofs/z3.py", KERNEL_V1),))
    assert run(mini_case, [proof]).node(MM).status == "verified"


def test_r5_deployment_subject_must_be_d(mini_case):
    suite = "suite.batch"
    good = ev(suite, category="test_result", subjects=(("deployment:" + D, D),))
    bad = ev(suite, category="test_result", subjects=(("deployment:" + OTHER_D, OTHER_D),))
    assert run(mini_case, [good]).node(suite).status == "tested"
    assert run(mini_case, [bad]).node(suite).status == "stale"


def test_r5_a_stale_failure_no_longer_defeats(mini_case):
    r = run(mini_case, [ev(MM, "fail", subjects=SUB_V1)], subjects={"code:kernels/mm.py": KERNEL_V2}).node(MM)
    assert r.status == "stale" and r.counterexamples == ()


def test_r5_unbound_evidence_counts_with_a_note(mini_case):
    r = run(mini_case, [ev(MM)]).node(MM)
    assert r.status == "verified" and any("name none of the covered subjects" in why for why in r.reasons)


def test_r6_evidence_older_than_max_age_is_stale(mini_case):
    from dataclasses import replace

    node = replace(mini_case.node(MM), max_age_days=30)
    case = mini_case.with_nodes(tuple(node if n.id == MM else n for n in mini_case.nodes))
    old = (NOW - timedelta(days=31)).strftime("%Y-%m-%dT%H:%M:%SZ")
    recent = (NOW - timedelta(days=29)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert run(case, [ev(MM, produced_at=old)]).node(MM).status == "stale"
    assert run(case, [ev(MM, produced_at=recent)]).node(MM).status == "verified"


def test_r8_missing_and_inconclusive(mini_case):
    assert run(mini_case, []).node(MM).status == "missing"
    r = run(mini_case, [ev(MM, "inconclusive")]).node(MM)
    assert r.status == "missing" and any("inconclusive" in why for why in r.reasons)


def test_r9_a_solution_is_as_weak_as_its_weakest_obligation(mini_case):
    from dataclasses import replace

    node = replace(mini_case.node("suite.batch"), obligations=("suite.a", "suite.b"))
    case = mini_case.with_nodes(tuple(node if n.id == "suite.batch" else n for n in mini_case.nodes))
    checked, tested = ev("suite.a", category="runtime_config_check"), ev("suite.b", category="test_result")
    assert run(case, [checked, tested]).node("suite.batch").status == "tested"
    assert run(case, [checked]).node("suite.batch").status == "missing"
    stale = ev("suite.b", category="test_result", deployment=OTHER_D)
    assert run(case, [checked, stale]).node("suite.batch").status == "stale"
    assert run(case, [ev("suite.a", "fail", category="test_result"), stale]).node("suite.batch").status == "failed"


def test_r10_trusted_items_fall_back_to_trust_and_can_be_discharged(mini_case):
    from dataclasses import replace

    t = "trusted.compiler"
    assert run(mini_case, []).node(t).status == "trusted-unreviewed"
    relied_on = ev(t, category="trusted_contract_translation", item="verifier-T1")
    r = run(mini_case, [relied_on]).node(t)
    assert r.status == "trusted-unreviewed" and r.evidence_ids == ("verifier-T1",)
    assert run(mini_case, [ev(t, "fail", category="runtime_config_check")]).node(t).status == "failed"
    node = replace(mini_case.node(t), any_of=("runtime_config_check",))
    case = mini_case.with_nodes(tuple(node if n.id == t else n for n in mini_case.nodes))
    assert run(case, [ev(t, category="runtime_config_check")]).node(t).status == "runtime-checked"


def test_evidence_for_unknown_obligations_is_reported(mini_case):
    evaluation = run(mini_case, [ev("kernel.typo.contract")])
    assert evaluation.unclaimed_obligations == {"kernel.typo.contract": 1}


def test_r11_evidence_a_reviewer_rejected_does_not_count(mini_case):
    from tests.assurance.conftest import review

    proof = ev(MM, subjects=SUB_V1)
    rejected = run(mini_case, [proof], reviews=[review(proof.item_id, proof.content_digest, "reject")]).node(MM)
    assert rejected.status == "missing" and any("rejected" in why for why in rejected.reasons)
    other_digest = [review(proof.item_id, "sha256:other", "reject")]
    assert run(mini_case, [proof], reviews=other_digest).node(MM).status == "verified"
    reconsidered = [review(proof.item_id, proof.content_digest, "reject", seq=1),
                    review(proof.item_id, proof.content_digest, "accept", seq=2)]
    assert run(mini_case, [proof], reviews=reconsidered).node(MM).status == "verified"


def test_r12_a_partial_suite_run_does_not_discharge(mini_case):
    def unit(name, run="r1", status="pass"):
        return ev("suite.batch", status, category="test_result", item=f"{run}.{name}",
                  details={"run_key": run, "unit": name, "suite_units": ["u1", "u2"]})

    partial = run(mini_case, [unit("u1")]).node("suite.batch")
    assert partial.status == "missing" and any("run r1 is partial: 1 of 2" in why for why in partial.reasons)
    assert run(mini_case, [unit("u1"), unit("u2")]).node("suite.batch").status == "tested"
    other_run_complete = [unit("u1"), unit("u1", "r2"), unit("u2", "r2")]
    assert run(mini_case, other_run_complete).node("suite.batch").evidence_ids == ("r2.u1", "r2.u2")


def test_r2_the_next_junit_run_of_a_test_supersedes_the_last(mini_case):
    first = ev("suite.batch", "fail", category="test_result", item="junit:aaaa:tests.t.test_x", seq=30)
    second = ev("suite.batch", "pass", category="test_result", item="junit:bbbb:tests.t.test_x", seq=31)
    other = ev("suite.batch", "fail", category="test_result", item="junit:aaaa:tests.t.test_y", seq=32)
    assert run(mini_case, [second, first]).node("suite.batch").status == "tested"
    assert run(mini_case, [first, second, other]).node("suite.batch").status == "failed"


def test_r2_a_producer_can_name_a_logical_key(mini_case):
    old = ev(MM, "fail", item="proof-run-1", seq=40, details={"logical_key": "matmul"})
    new = ev(MM, "pass", item="proof-run-2", seq=41, details={"logical_key": "matmul"})
    assert run(mini_case, [old, new]).node(MM).status == "verified"


def test_r7_items_under_other_configurations_may_be_given_as_counts(mini_case):
    elsewhere = [ev(MM, deployment=OTHER_D, subjects=SUB_V1, item="p"), ev(MM, "fail", deployment=OTHER_D, item="f"),
                 ev("suite.batch", deployment=OTHER_D, category="test_result", item="b")]
    given = run(mini_case, elsewhere)
    counted = evaluate(mini_case, evidence=[], reviews=(), subjects=CURRENT, deployment_digest=D, today=TODAY,
                       now=NOW, elsewhere={MM: 2, "suite.batch": 1})
    assert counted.node(MM).status == "stale" and "2 item(s) exist only under other" in counted.node(MM).reasons[-1]
    assert counted.to_json() == given.to_json()


def test_r2a_a_superseded_item_does_not_count_under_any_obligation():
    from assurance.solution_status import EvidenceIndex

    old = ev("suite.batch", category="test_result", item="junit:0123456789abcdef:t.test_a", seq=1)
    new = ev("suite.other", category="test_result", item="junit:0123456789abcdef~1:t.test_a", seq=2,
             details={"supersedes": "junit:0123456789abcdef:t.test_a"})
    index = EvidenceIndex([old, new], D)
    assert index.items("suite.batch") == [] and index.items("suite.other") == [new]
    assert index.superseded == {old.item_id: new.item_id}
    assert EvidenceIndex([old], D).items("suite.batch") == [old]
