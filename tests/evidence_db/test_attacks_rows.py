"""Rows no bitcase write could produce are named, never a traceback or a blamed URL; upgrades refuse stray rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from evidence_db.bundle import write_bundle
from evidence_db.chain import ContentHasher, chain_link
from evidence_db.errors import StoreError
from evidence_db.migrate import upgrade
from evidence_db.session import open_session
from evidence_db.verify import ChainWalk
from tests.evidence_db.attacks import build_store, forge_review, invoke, raw_sql, record, trust_review_digest


@pytest.fixture
def case_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BITCASE_HOME", str(tmp_path / "home"))
    return tmp_path / "gate.toml"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """Dates and blobs of any shape fit only SQLite's columns (PostgreSQL's types refuse them)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return url


@pytest.mark.parametrize("column", ["created_at", "expires"])
def test_an_unparsable_review_date_names_the_row(sqlite_url: str, case_path: Path, column: str) -> None:
    build_store(sqlite_url, case_path)
    with raw_sql(sqlite_url) as conn:
        conn.execute(text(f"UPDATE reviews SET {column} = 'the 5th of never'"))
    verify = invoke("audit", "verify", "--db", sqlite_url)
    assert verify.exit_code == 1
    assert f"seq 3 (review 'trusted.compiler'): column {column} is unreadable" in verify.stdout
    for command in ("trusted-base", "check"):
        result = invoke(command, "--db", sqlite_url, "--case", case_path)
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert f"first bad row seq 3 (review 'trusted.compiler'): column {column}" in result.stderr
    listed = invoke("review", "list", "--db", sqlite_url)
    assert listed.exit_code == 1 and "chain seq 3" in listed.stderr and "the 5th of never" in listed.stderr


def test_details_stored_as_a_blob_name_the_row(sqlite_url: str, case_path: Path) -> None:
    build_store(sqlite_url, case_path)
    with raw_sql(sqlite_url) as conn:
        conn.execute(text("UPDATE evidence_items SET details = X'FF7B7D' WHERE seq = 2"))
    verify = invoke("audit", "verify", "--db", sqlite_url)
    assert verify.exit_code == 1 and "seq 2 (evidence 'batch-1'): column details is unreadable" in verify.stdout
    status = invoke("status", "--db", sqlite_url, "--case", case_path)
    assert status.exit_code == 1 and "first bad row seq 2 (evidence 'batch-1')" in status.stderr
    assert "database URL" not in status.stderr and "cannot use the database" not in status.stderr


def test_a_blob_of_valid_json_still_verifies_when_its_bytes_are_the_ingested_text(sqlite_url: str,
                                                                                   case_path: Path) -> None:
    build_store(sqlite_url, case_path)
    with raw_sql(sqlite_url) as conn:
        conn.execute(text("UPDATE evidence_items SET details = CAST(details AS BLOB) WHERE seq = 2"))
    assert invoke("audit", "verify", "--db", sqlite_url).exit_code == 0  # the same bytes: the same content


def test_an_upgrade_over_stray_rows_names_them_and_changes_nothing(empty_url: str, tmp_path: Path) -> None:
    upgrade(empty_url, revision="0001")
    with raw_sql(empty_url) as conn:
        for seq in (0, -3):
            conn.execute(text(
                "INSERT INTO reviews (seq, target, target_digest, decision, reviewer, rationale, created_at, "
                f"content_digest, prev_chain_digest, chain_digest) VALUES ({seq}, 'trusted.x', 'd', 'accept', 'm', "
                "'r', '2026-11-01 00:00:00', 'c', 'p', 'h')"))
    with pytest.raises(StoreError) as info:
        upgrade(empty_url)
    assert "2 row(s) sit at chain positions the hash chain never covers" in str(info.value)
    assert "reviews seq -3 (target 'trusted.x'); reviews seq 0 (target 'trusted.x')" in str(info.value)
    assert "SELECT * FROM evidence_items WHERE seq < 1" in info.value.hint
    with raw_sql(empty_url) as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == "0001"
        assert conn.execute(text("SELECT count(*) FROM reviews")).scalar_one() == 2
        conn.execute(text("DELETE FROM reviews"))
    from evidence_db.schema_check import HEAD_REVISION

    assert upgrade(empty_url).current == HEAD_REVISION


def test_an_append_over_rows_beyond_the_head_names_them(store_url: str, case_path: Path) -> None:
    build_store(store_url, case_path)
    with raw_sql(store_url) as conn:
        forge_review(conn, seq=4, target_digest=trust_review_digest(case_path))
    bundle = case_path.parent / "more.jsonl"
    write_bundle(bundle, [record("proof-2", "kernel.mm.contract")])
    result = invoke("ingest", bundle, "--db", store_url)
    assert result.exit_code == 1 and "rows beyond its chain head (seq 3)" in result.stderr
    assert "reviews seq 4 (target 'trusted.compiler')" in result.stderr and "Traceback" not in result.output


def test_details_that_are_not_an_object_fail_even_under_a_rewritten_chain(sqlite_url: str, case_path: Path) -> None:
    """Edited details fail the chain; rewritten with every digest recomputed, they still cannot be read."""
    build_store(sqlite_url, case_path)
    assert invoke("status", "--db", sqlite_url, "--case", case_path).exit_code == 0
    with raw_sql(sqlite_url) as conn:
        conn.execute(text("UPDATE evidence_items SET status = 'fail', details = '[1]' WHERE seq = 2"))
    assert "first bad row seq 2" in invoke("status", "--db", sqlite_url, "--case", case_path).stderr
    with open_session(sqlite_url) as session:  # what the forger recomputes, knowing the formulas
        row, _, _, producer, deployment = [r for w in ChainWalk(session).windows() for r in w.evidence][1]
    digest = ContentHasher().digest(schema_id=row[11], record_id="batch-1", category="test_result",
                                    obligation="suite.batch", status="fail", summary=row[5], produced_at=row[6],
                                    producer=producer[0], deployment=deployment[0], subjects="[]", details="[1]")
    with raw_sql(sqlite_url) as conn:
        link2 = chain_link(conn.execute(text("SELECT chain_digest FROM evidence_items WHERE seq = 1")).scalar_one(),
                           2, "evidence", digest)
        conn.execute(text("UPDATE evidence_items SET content_digest = :d, chain_digest = :c WHERE seq = 2"),
                     {"d": digest, "c": link2})
        link3 = chain_link(link2, 3, "review",
                           conn.execute(text("SELECT content_digest FROM reviews WHERE seq = 3")).scalar_one())
        conn.execute(text("UPDATE reviews SET prev_chain_digest = :p, chain_digest = :c"), {"p": link2, "c": link3})
        conn.execute(text("UPDATE chain_heads SET chain_digest = :c"), {"c": link3})
    assert invoke("audit", "verify", "--db", sqlite_url).exit_code == 0  # a consistent rewrite: out of the chain's reach
    result = invoke("status", "--db", sqlite_url, "--case", case_path)
    assert result.exit_code == 1 and "chain seq 2" in result.stderr and "rewritten" in result.stderr
