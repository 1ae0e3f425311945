"""Schema v1 (pre-RFC 8785) bundles and stores stay readable and verifiable beside v2 evidence."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from evidence_db.canonical import canonical_json, digest_of_v1
from evidence_db.chain import chain_link
from evidence_db.engine import create_store_engine
from evidence_db.errors import BundleError
from evidence_db.ingest import ingest_paths
from evidence_db.migrate import migrate_connection, upgrade
from evidence_db.reviews import add_review, list_reviews
from evidence_db.session import open_session
from evidence_db.store import ingest_records, load_evidence
from evidence_db.verify import verify_chain
from tests.evidence_db.factories import record, record_dict

# What bitcase wrote before schema v2: Python's json, keys sorted by code point, compact.
V1_FIELDS = {"gpu": "none", "eps": 9.999999747378752e-06, "theta": 10000.0, "tiny": 1e-07, "big": 2**60,
             "\U0001f600": "non-BMP", "\ufb33": "BMP"}


def _v1_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _v1_line(index: int) -> tuple[str, str]:
    """A v1 bundle line and the content digest bitcase v1 gave it."""
    value = record_dict(index, schema="bitcase.evidence/v1", id=f"v1:{index}",
                        deployment={"fields": V1_FIELDS, "digest": digest_of_v1(V1_FIELDS)},
                        details={"seconds": 2.0, "diff": 1e-07, "count": 2**60})
    line = _v1_json(value)
    return line, "sha256:" + hashlib.sha256(line.encode("utf-8")).hexdigest()


def test_v1_and_v2_bundles_share_a_store_and_the_chain_verifies(store_url: str, tmp_path: Path) -> None:
    lines, digests = zip(*(_v1_line(i) for i in range(3)))
    v1 = tmp_path / "v1.jsonl"
    v1.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open_session(store_url, write=True) as session:
        assert ingest_paths(session=session, paths=[v1])[0][1].added == 3
        ingest_records(session=session, records=[record(1, details={"seconds": 2.0, "diff": 1e-07})])
    with open_session(store_url, write=True) as session:
        assert ingest_paths(session=session, paths=[v1])[0][1].unchanged == 3  # re-ingest: a no-op
    with open_session(store_url) as session:
        views = load_evidence(session=session)
        assert verify_chain(session=session).faults == ()
    assert [v.content_digest for v in views[:3]] == list(digests)
    assert views[0].details == {"seconds": 2.0, "diff": 1e-07, "count": 2**60}  # v1 text kept: 2.0 stays a float
    assert views[0].deployment_digest == digest_of_v1(V1_FIELDS)
    assert views[3].content_digest == record(1, details={"seconds": 2.0, "diff": 1e-07}).content_digest()
    stored = _stored_details(store_url)
    assert stored[0] == _v1_json({"seconds": 2.0, "diff": 1e-07, "count": 2**60})
    assert stored[3] == canonical_json({"seconds": 2.0, "diff": 1e-07}) == '{"diff":1e-7,"seconds":2}'


def _stored_details(url: str) -> list[str]:
    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return [str(t) for t in conn.execute(text("SELECT CAST(details AS TEXT) FROM evidence_items ORDER BY seq"))
                    .scalars()]
    finally:
        engine.dispose()


def test_a_v2_record_is_held_to_the_v2_rules() -> None:
    from evidence_db.prepare import Preparer

    small = {k: v for k, v in V1_FIELDS.items() if k != "big"}
    for fields, message, hint in ((small, "deployment.digest`: sha256:.* does not match the fields", "digest_of"),
                                  (V1_FIELDS, "deployment.fields.big`: integer .* out of range", "2**53 - 1")):
        wrong = record_dict(0, deployment={"fields": fields, "digest": digest_of_v1(fields)})
        with pytest.raises(BundleError, match=message) as info:
            Preparer()(wrong, "line 1")
        assert hint in (info.value.hint or "")


def test_a_store_written_before_v2_upgrades_and_keeps_verifying(empty_url: str) -> None:
    engine = create_store_engine(empty_url)
    try:
        with engine.connect() as conn:
            migrate_connection(conn, revision="0001")
            _insert_v1_review(conn)  # a review exactly as bitcase v1 chained it, at seq 1
            conn.commit()
    finally:
        engine.dispose()
    upgrade(empty_url)
    with open_session(empty_url, write=True) as session:
        assert verify_chain(session=session).faults == ()
        add_review(session=session, target="T_gpu", target_digest="sha256:" + "b" * 64, decision="reject",
                   reviewer="bob", rationale="v2 review", expires=None)
    with open_session(empty_url) as session:
        assert verify_chain(session=session).faults == ()
        assert [(r.reviewer, r.seq) for r in list_reviews(session=session)] == [("alice", 1), ("bob", 2)]
    engine = create_store_engine(empty_url)
    try:
        with engine.begin() as conn:
            assert conn.execute(text("SELECT schema_id FROM reviews ORDER BY seq")).scalars().all() == [
                "bitcase.review/v1", "bitcase.review/v2"]
            conn.execute(text("UPDATE reviews SET schema_id = 'bitcase.review/v2' WHERE seq = 1"))
    finally:
        engine.dispose()
    with open_session(empty_url) as session:
        faults = verify_chain(session=session).faults
    assert [(f.seq, f.kind) for f in faults] == [(1, "review")] and "content was edited" in faults[0].reason


def _insert_v1_review(conn: Any) -> None:
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    content = {"schema": "bitcase.review/v1", "target": "T_triton", "target_digest": "sha256:" + "a" * 64,
               "decision": "accept", "reviewer": "alice", "rationale": "ok", "expires": None,
               "created_at": "2026-01-02T03:04:05.000000Z"}
    digest = "sha256:" + hashlib.sha256(_v1_json(content).encode("utf-8")).hexdigest()
    chain = chain_link("sha256:" + "0" * 64, 1, "review", digest)
    conn.execute(text("INSERT INTO reviews (seq, target, target_digest, decision, reviewer, rationale, expires, "
                      "created_at, content_digest, prev_chain_digest, chain_digest) VALUES (1, :t, :td, 'accept', "
                      "'alice', 'ok', NULL, :c, :d, :p, :ch)"),
                 {"t": content["target"], "td": content["target_digest"], "c": created, "d": digest,
                  "p": "sha256:" + "0" * 64, "ch": chain})
    conn.execute(text("UPDATE chain_heads SET seq = 1, chain_digest = :ch WHERE name = 'main'"), {"ch": chain})


def test_downgrade_below_v2_is_refused_while_v2_rows_exist(store_url: str) -> None:
    with open_session(store_url, write=True) as session:
        ingest_records(session=session, records=[record(0)])
    engine = create_store_engine(store_url)
    try:
        with pytest.raises(RuntimeError, match="schema v2 row"), engine.connect() as conn:
            migrate_connection(conn, revision="0001", is_downgrade=True)
    finally:
        engine.dispose()
