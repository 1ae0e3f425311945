"""Data access: ingest, read back, idempotence, conflicts, reviews; on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evidence_db.bundle import Subject
from evidence_db.canonical import sha256_digest
from evidence_db.errors import BundleError, RecordConflict
from evidence_db.models import ProducerRun
from evidence_db.reviews import add_review, list_reviews
from evidence_db.store import count_elsewhere, ingest_records, list_deployments, load_details, load_evidence
from evidence_db.views import DetailsFilter, IngestResult, SubjectView
from tests.evidence_db.factories import DEPLOYMENT, OTHER_DEPLOYMENT, record, records

DIGEST = sha256_digest(b"reviewed")


def test_ingested_records_read_back_exactly(db_session: Session) -> None:
    originals = records(3) + [record(9, details={"x": 0.1, "big": 1e20, "neg": -0.0, "int": 2**53 - 1,
                                                "text": "grüße ✓ 😀", "nested": [{"a": None, "b": True}],
                                                "nul": "a\x00b", "escapes": "\"\\\n", "tiny": 1e-300},
                                     subjects=(), status="fail", category="test_result")]
    assert ingest_records(session=db_session, records=originals) == IngestResult(added=4, unchanged=0)
    views = load_evidence(session=db_session)
    assert [v.item_id for v in views] == [r.id for r in originals]
    for view, original in zip(views, originals):
        assert view.content_digest == original.content_digest()
        assert (view.category, view.obligation, view.status, view.summary, view.produced_at) == (
            original.category, original.obligation, original.status, original.summary, original.produced_at)
        assert view.details == original.details
        assert view.deployment_digest == DEPLOYMENT.digest
        assert (view.producer_tool, view.producer_version) == ("bitcase verify", "0.1.0")
        assert view.subjects == tuple(SubjectView(s.uri, s.sha256) for s in original.subjects)
    assert [v.seq for v in views] == [1, 2, 3, 4]
    # RFC 8785 numbers are values, not spellings: 1e20 is stored as 100000000000000000000, -0.0 as 0
    assert views[3].details["big"] == 10**20 and repr(views[3].details["neg"]) == "0"


def test_reingesting_identical_records_is_a_no_op(db_session: Session) -> None:
    ingest_records(session=db_session, records=records(3))
    assert ingest_records(session=db_session, records=records(4)) == IngestResult(added=1, unchanged=3)
    assert len(load_evidence(session=db_session)) == 4


def test_same_id_with_different_content_is_a_conflict(db_session: Session) -> None:
    ingest_records(session=db_session, records=[record(0)])
    with pytest.raises(RecordConflict, match="already stored with different content") as info:
        ingest_records(session=db_session, records=[record(1), record(0, summary="edited")])
    assert info.value.field == "id" and "record 2" in info.value.where
    assert "new id" in info.value.hint


def test_duplicates_within_one_ingest(db_session: Session) -> None:
    assert ingest_records(session=db_session, records=[record(0), record(0)]) == IngestResult(1, 1)
    with pytest.raises(RecordConflict, match="also appears at record 1"):
        ingest_records(session=db_session, records=[record(5), record(5, status="fail")])


def test_deployments_and_producers_are_stored_once(db_session: Session) -> None:
    ingest_records(session=db_session, records=records(5) + records(2, start=10, deployment=OTHER_DEPLOYMENT))
    deployments = list_deployments(session=db_session)
    assert {d.digest for d in deployments} == {DEPLOYMENT.digest, OTHER_DEPLOYMENT.digest}
    assert next(d for d in deployments if d.digest == DEPLOYMENT.digest).fields == DEPLOYMENT.fields
    assert all(d.first_seen.endswith("Z") for d in deployments)
    assert db_session.scalar(select(func.count()).select_from(ProducerRun)) == 1
    only_other = load_evidence(session=db_session, deployment_digest=OTHER_DEPLOYMENT.digest)
    assert [v.item_id for v in only_other] == ["proof:matmul:10", "proof:matmul:11"]
    assert all(len(v.subjects) == 2 for v in only_other)
    assert load_evidence(session=db_session, deployment_digest="sha256:" + "f" * 64) == []


def test_bad_records_are_refused_with_the_field_named(db_session: Session) -> None:
    with pytest.raises(BundleError) as info:
        ingest_records(session=db_session, records=[record(0), record(1, details={"x": float("nan")})])
    assert info.value.field == "details.x" and "record 2" in info.value.where
    with pytest.raises(BundleError) as info:
        ingest_records(session=db_session, records=[record(2, subjects=(Subject("code:x", "md5:abc"),))])
    assert info.value.field == "subjects[0].sha256"
    with pytest.raises(TypeError, match="EvidenceRecord"):
        ingest_records(session=db_session, records=[{"id": "x"}])


def test_reviews_are_appended_to_the_same_chain(db_session: Session) -> None:
    ingest_records(session=db_session, records=records(2))
    created = datetime(2025, 7, 1, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    review = add_review(session=db_session, target="T_triton_compiler", target_digest=DIGEST, decision="accept",
                        reviewer="alice", rationale="Compiler output inspected.\nNo issues.",
                        expires=date(2026, 1, 1), created_at=created)
    assert review.seq == 3 and review.created_at == "2025-07-01T10:30:00.000000Z"
    add_review(session=db_session, target="proof:matmul:0", target_digest=DIGEST, decision="needs-work",
               reviewer="bob", rationale="Re-run after the plan change.", expires=None)
    ingest_records(session=db_session, records=records(1, start=7))
    reviews = list_reviews(session=db_session)
    assert [(r.target, r.decision, r.seq, r.expires) for r in reviews] == [
        ("T_triton_compiler", "accept", 3, date(2026, 1, 1)), ("proof:matmul:0", "needs-work", 4, None)]
    assert reviews[0] == review
    assert [v.seq for v in load_evidence(session=db_session)] == [1, 2, 5]


@pytest.mark.parametrize(("changes", "field"), [
    ({"decision": "approve"}, "decision"),
    ({"reviewer": " "}, "reviewer"),
    ({"target": "a\nb"}, "target"),
    ({"rationale": "x" * 70000}, "rationale"),
    ({"expires": "2026-01-01"}, "expires"),
    ({"created_at": datetime(2025, 1, 1)}, "created_at"),
])
def test_bad_reviews_are_refused(db_session: Session, changes: dict, field: str) -> None:
    fields = {"target": "T", "target_digest": DIGEST, "decision": "accept", "reviewer": "alice",
              "rationale": "ok", "expires": None, **changes}
    with pytest.raises(BundleError) as info:
        add_review(session=db_session, **fields)
    assert info.value.field == field
    assert list_reviews(session=db_session) == []


def test_in_memory_store(fresh_db) -> None:
    with Session(fresh_db) as session:
        assert ingest_records(session=session, records=records(2)) == IngestResult(2, 0)
        session.commit()
    with Session(fresh_db) as session:
        assert [v.item_id for v in load_evidence(session=session)] == ["proof:matmul:0", "proof:matmul:1"]


def test_evidence_without_details_and_details_on_demand(db_session: Session) -> None:
    ingest_records(session=db_session, records=records(3))
    bare = load_evidence(session=db_session, with_details=False)
    assert [v.details for v in bare] == [{}, {}, {}]
    assert [v.subjects for v in bare] == [v.subjects for v in load_evidence(session=db_session)]
    details = load_details(session=db_session, item_ids=["proof:matmul:2", "proof:matmul:0", "unknown"])
    assert details == {"proof:matmul:0": record(0).details, "proof:matmul:2": record(2).details}


def test_one_deployment_with_only_the_details_a_filter_selects(db_session: Session) -> None:
    ingest_records(session=db_session, records=[
        record(0), record(1, status="fail", details={"witness": [1, 2]}),
        record(2, details={"logical_key": "k", "n": 1}), record(3, details={"outer": {"run_key": "nested"}}),
        record(4, details={"note": "logical_key without quotes", "run_keys": 1}),
        record(5, obligation="G_other", deployment=OTHER_DEPLOYMENT, status="fail"),
        record(6, deployment=OTHER_DEPLOYMENT), record(7, obligation="G_other", deployment=OTHER_DEPLOYMENT)])
    wanted = DetailsFilter(statuses=frozenset({"fail", "error"}), keys=("logical_key", "run_key"))
    views = load_evidence(session=db_session, deployment_digest=DEPLOYMENT.digest, with_details=wanted)
    assert [v.item_id for v in views] == [f"proof:matmul:{i}" for i in range(5)]
    assert [v.details for v in views] == [{}, {"witness": [1, 2]}, {"logical_key": "k", "n": 1},
                                          {"outer": {"run_key": "nested"}}, {}]
    assert {v.deployment_digest for v in views} == {DEPLOYMENT.digest}
    whole = load_evidence(session=db_session, deployment_digest=DEPLOYMENT.digest)
    assert [v.subjects for v in views] == [v.subjects for v in whole] and all(len(v.subjects) == 2 for v in views)
    assert [(v.summary, v.seq, v.producer_tool) for v in views] == [(v.summary, v.seq, v.producer_tool) for v in whole]
    assert count_elsewhere(session=db_session, deployment_digest=DEPLOYMENT.digest) == {"G_kernel_matmul": 1,
                                                                                         "G_other": 2}
    assert count_elsewhere(session=db_session, deployment_digest="sha256:" + "f" * 64) == {"G_kernel_matmul": 6,
                                                                                            "G_other": 2}
    assert [v.details for v in load_evidence(session=db_session, with_details=DetailsFilter())] == [{}] * 8


def test_details_filter_keys_are_plain_names() -> None:
    with pytest.raises(ValueError, match="quotes"):
        DetailsFilter(keys=('a"b',))
    with pytest.raises(ValueError, match="non-empty"):
        DetailsFilter(keys=("",))
