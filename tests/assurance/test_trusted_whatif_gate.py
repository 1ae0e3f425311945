"""Trusted base, what-if analysis and the CI gate rules."""

import pytest

from assurance.gate import gate
from assurance.reviews import trust_digest
from assurance.status import evaluate
from assurance.trusted import trusted_base, whatif
from tests.assurance.conftest import D, NOW, TODAY, ev, review

MM, SUITE, T = "kernel.mm.contract", "suite.batch", "trusted.compiler"


def run(case, evidence=(), reviews=()):
    return evaluate(case, evidence=list(evidence), reviews=list(reviews), subjects={}, deployment_digest=D,
                    today=TODAY, now=NOW)


def discharged():
    return [ev(MM), ev(SUITE, category="test_result")]


def accepted(case):
    return [review(T, trust_digest(case.node(T)))]


def test_trusted_base_lists_trusted_items_with_review_state(mini_case):
    base = trusted_base(run(mini_case, discharged()))
    assert [(r.id, r.review.state) for r in base] == [(T, "unreviewed")]
    assert [r.review.state for r in trusted_base(run(mini_case, discharged(), accepted(mini_case)))] == ["accepted"]


def test_whatif_lists_the_claims_that_lose_support(mini_case):
    outcome = whatif(run(mini_case, discharged()), [T])
    assert [(c.id, c.before, c.after) for c in outcome.lost] == [
        ("G.top", "supported-under-trust", "incomplete"), ("S.split", "supported-under-trust", "incomplete")]
    assert outcome.to_json()["distrusted"] == [T]


def test_whatif_on_an_unsupported_claim_changes_nothing(mini_case):
    assert whatif(run(mini_case, [ev(MM)]), [T]).lost == ()


def test_whatif_rejects_unknown_ids_and_non_solutions(mini_case):
    evaluation = run(mini_case)
    with pytest.raises(KeyError, match="nope"):
        whatif(evaluation, ["nope"])
    with pytest.raises(ValueError, match="is a goal"):
        whatif(evaluation, ["G.top"])


def test_gate_passes_only_with_support_and_reviews(mini_case):
    assert gate(run(mini_case, discharged(), accepted(mini_case))) == []
    unreviewed = gate(run(mini_case, discharged()))
    assert [(f.node, f.message) for f in unreviewed] == [(T, "trusted item review is unreviewed")]
    assert gate(run(mini_case, discharged()), accept_unreviewed=True) == []


def test_gate_never_accepts_a_rejected_trusted_item(mini_case):
    rejected = [review(T, trust_digest(mini_case.node(T)), "reject")]
    findings = gate(run(mini_case, discharged(), rejected), accept_unreviewed=True)
    assert [(f.node, f.message) for f in findings] == [(T, "trusted item review is rejected")]


def test_gate_reports_the_claim_and_each_failed_stale_or_missing_solution(mini_case):
    findings = gate(run(mini_case, [ev(MM, "fail")], accepted(mini_case)))
    assert [(f.node, f.status) for f in findings] == [("G.top", "defeated"), (MM, "failed"), (SUITE, "missing")]
    assert all(f.goal == "G.top" for f in findings)
