"""The hash chain detects rows edited, deleted or reordered behind the tool's back (raw SQL)."""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from evidence_db.canonical import sha256_digest
from evidence_db.chain import GENESIS_DIGEST, chain_link
from evidence_db.reviews import add_review
from evidence_db.store import ingest_records, load_evidence
from evidence_db.verify import verify_chain
from tests.evidence_db.factories import records

OTHER = "'sha256:" + "1" * 64 + "'"


def _fill(session: Session) -> None:
    """Seq 1-5 evidence, 6 a review, 7-8 evidence."""
    ingest_records(session=session, records=records(5))
    add_review(session=session, target="T_triton", target_digest=sha256_digest(b"t"), decision="accept",
               reviewer="alice", rationale="inspected", expires=date(2030, 1, 1))
    ingest_records(session=session, records=records(2, start=5))


def _run(session: Session, *statements: str) -> None:
    for statement in statements:
        session.execute(text(statement))


def test_intact_chain_verifies(db_session: Session) -> None:
    _fill(db_session)
    report = verify_chain(session=db_session)
    assert report.is_intact and report.first_bad is None
    assert (report.num_rows, report.head_seq) == (8, 8)
    views = load_evidence(session=db_session)
    prev = GENESIS_DIGEST
    for view in views[:5]:  # the chain digests follow the documented formula
        prev = chain_link(prev, view.seq, "evidence", view.content_digest)
    assert db_session.execute(text("SELECT chain_digest FROM evidence_items WHERE seq = 5")).scalar_one() == prev


def test_empty_store_verifies(db_session: Session) -> None:
    report = verify_chain(session=db_session)
    assert report.is_intact and (report.num_rows, report.head_seq, report.head_digest) == (0, 0, GENESIS_DIGEST)


TAMPERING = {
    "summary edited": ((3, "evidence", "proof:matmul:2", "content was edited"),
                       ["UPDATE evidence_items SET summary = 'all good' WHERE seq = 3"]),
    "status edited": ((7, "evidence", "proof:matmul:5", "content was edited"),
                      ["UPDATE evidence_items SET status = 'pass', summary = summary WHERE seq = 7",
                       "UPDATE evidence_items SET status = 'fail' WHERE seq = 7"]),
    "details edited": ((2, "evidence", "proof:matmul:1", "content was edited"),
                       ["""UPDATE evidence_items SET details = '{"index": 1}' WHERE seq = 2"""]),
    "subject edited": ((4, "evidence", "proof:matmul:3", "content was edited"),
                       ["UPDATE subjects SET uri = 'code:other.py' WHERE position = 1 AND evidence_seq = 4"]),
    "deployment edited": ((1, "evidence", "proof:matmul:0", "content was edited"),
                          ["""UPDATE deployments SET fields = '{"gpu": "none"}'"""]),
    "producer edited": ((1, "evidence", "proof:matmul:0", "content was edited"),
                        ["UPDATE producer_runs SET version = '9.9'"]),
    "digest rewritten": ((2, "evidence", "proof:matmul:1", "content was edited"),
                         [f"UPDATE evidence_items SET content_digest = {OTHER} WHERE seq = 2"]),
    "row deleted": ((5, "missing", "", "deleted"),
                    ["DELETE FROM subjects WHERE evidence_seq = 5",
                     "DELETE FROM evidence_items WHERE seq = 5"]),
    "newest row deleted": ((8, "missing", "", "deleted"),
                           ["DELETE FROM subjects WHERE evidence_seq = 8",
                            "DELETE FROM evidence_items WHERE seq = 8"]),
    "rows reordered": ((2, "evidence", "proof:matmul:3", "link to the previous row is broken"),
                       ["CREATE TEMPORARY TABLE moved AS SELECT * FROM subjects WHERE evidence_seq IN (2, 4)",
                        "DELETE FROM subjects WHERE evidence_seq IN (2, 4)",
                        "UPDATE evidence_items SET seq = seq + 1000 WHERE seq IN (2, 4)",
                        "UPDATE evidence_items SET seq = 4 WHERE seq = 1002",
                        "UPDATE evidence_items SET seq = 2 WHERE seq = 1004",
                        "INSERT INTO subjects SELECT 6 - evidence_seq, position, uri, sha256 FROM moved"]),
    "chain digest edited": ((7, "evidence", "proof:matmul:5", "chain digest was altered"),
                            [f"UPDATE evidence_items SET chain_digest = {OTHER} WHERE seq = 7"]),
    "review edited": ((6, "review", "T_triton", "content was edited"),
                      ["UPDATE reviews SET rationale = 'rubber-stamped'"]),
    "review deleted": ((6, "missing", "", "deleted"), ["DELETE FROM reviews"]),
    "review decision flipped": ((6, "review", "T_triton", "content was edited"),
                                ["UPDATE reviews SET decision = 'reject'"]),
    "head rewound": ((7, "head", "", "does not match the last row"), ["UPDATE chain_heads SET seq = 7"]),
    "head edited": ((8, "head", "", "does not match the last row"), [f"UPDATE chain_heads SET chain_digest = {OTHER}"]),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_tampering_names_the_first_bad_row(db_session: Session, case: str) -> None:
    (seq, kind, key, reason), statements = TAMPERING[case]
    _fill(db_session)
    _run(db_session, *statements)
    report = verify_chain(session=db_session)
    assert not report.is_intact
    first = report.first_bad
    assert (first.seq, first.kind, first.key) == (seq, kind, key), report.faults
    assert reason in first.reason


def test_one_edit_is_reported_once(db_session: Session) -> None:
    _fill(db_session)
    _run(db_session, "UPDATE evidence_items SET summary = 'x' WHERE seq = 3")
    assert [f.seq for f in verify_chain(session=db_session).faults] == [3]
