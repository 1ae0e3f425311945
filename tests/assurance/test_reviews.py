"""Review rules V1–V3: trusted items are reviewed only against their current digest."""

from dataclasses import replace
from datetime import timedelta

from assurance.reviews import review_state, trust_digest
from assurance.status import evaluate
from tests.assurance.conftest import D, NOW, TODAY, review

T = "trusted.compiler"


def status_with(case, reviews):
    evaluation = evaluate(case, evidence=[], reviews=reviews, subjects={}, deployment_digest=D, today=TODAY, now=NOW)
    return evaluation.node(T)


def test_v1_the_trust_digest_covers_text_and_rationale(mini_case):
    node = mini_case.node(T)
    assert trust_digest(replace(node, text="other")) != trust_digest(node)
    assert trust_digest(replace(node, rationale="other")) != trust_digest(node)
    assert trust_digest(replace(node, source="§9")) == trust_digest(node)


def test_v2_an_accept_pinned_to_the_current_digest_reviews_the_item(mini_case):
    node = mini_case.node(T)
    r = status_with(mini_case, [review(T, trust_digest(node))])
    assert r.status == "trusted-reviewed" and r.review.state == "accepted" and r.review.reviewer == "auditor"


def test_v2_expired_rejected_and_needs_work_are_flagged(mini_case):
    digest = trust_digest(mini_case.node(T))
    expired = status_with(mini_case, [review(T, digest, expires=TODAY - timedelta(days=1))])
    assert expired.status == "trusted-unreviewed" and expired.review.state == "expired"
    assert status_with(mini_case, [review(T, digest, expires=TODAY)]).review.state == "accepted"
    assert status_with(mini_case, [review(T, digest, "reject")]).review.state == "rejected"
    assert status_with(mini_case, [review(T, digest, "needs-work")]).review.state == "needs-work"
    assert any("rejected" in why for why in status_with(mini_case, [review(T, digest, "reject")]).reasons)


def test_v2_the_latest_pinned_review_decides(mini_case):
    digest = trust_digest(mini_case.node(T))
    later_reject = [review(T, digest, "accept", seq=1), review(T, digest, "reject", seq=2)]
    assert status_with(mini_case, later_reject).review.state == "rejected"
    assert status_with(mini_case, list(reversed([review(T, digest, "reject", seq=3),
                                                  review(T, digest, "accept", seq=4)]))).review.state == "accepted"


def test_v3_editing_the_item_makes_its_review_stale(mini_case):
    old = trust_digest(mini_case.node(T))
    edited = replace(mini_case.node(T), rationale="a new argument")
    case = mini_case.with_nodes(tuple(edited if n.id == T else n for n in mini_case.nodes))
    r = status_with(case, [review(T, old)])
    assert r.status == "trusted-unreviewed" and r.review.state == "stale" and r.review.target_digest == old


def test_v3_no_review_at_all(mini_case):
    state = review_state(mini_case.node(T), [review("other.item", "sha256:x")], today=TODAY)
    assert state.state == "unreviewed" and state.num_reviews == 0
