"""Rows no bitcase write could produce are named, never a traceback or a blamed URL; upgrades refuse stray rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from evidence_db.errors import StoreError
from evidence_db.migrate import upgrade
from tests.evidence_db.attacks import build_store, invoke, raw_sql


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
    assert upgrade(empty_url).current == "0002"


def test_an_append_over_rows_beyond_the_head_names_them(store_url: str, case_path: Path) -> None:
    from tests.evidence_db.attacks import forge_review, trust_review_digest

    build_store(store_url, case_path)
    with raw_sql(store_url) as conn:
        forge_review(conn, seq=4, target_digest=trust_review_digest(case_path))
    bundle = case_path.parent / "more.jsonl"
    from evidence_db.bundle import write_bundle
    from tests.evidence_db.attacks import record

    write_bundle(bundle, [record("proof-2", "kernel.mm.contract")])
    result = invoke("ingest", bundle, "--db", store_url)
    assert result.exit_code == 1 and "rows beyond its chain head (seq 3)" in result.stderr
    assert "reviews seq 4 (target 'trusted.compiler')" in result.stderr and "Traceback" not in result.output
