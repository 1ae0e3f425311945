"""Alembic is the only schema path: migrations match the models, and stores behind head are refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from evidence_db.engine import create_store_engine
from evidence_db.errors import SchemaNotCurrent, StoreError
from evidence_db.migrate import ensure_store, head_revision, migrate_connection, schema_drift, upgrade
from evidence_db.models import Base
from evidence_db.session import open_session

TABLES = {"chain_heads", "deployments", "producer_runs", "evidence_items", "subjects", "reviews",
          "bundle_signatures", "signed_evidence", "store_identity"}


def test_migrations_match_models(store_url: str) -> None:
    assert schema_drift(store_url) == []


def test_drift_check_sees_a_schema_changed_behind_its_back(store_url: str) -> None:
    engine = create_store_engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_evidence_items_deployment_id"))
        conn.execute(text("ALTER TABLE reviews ADD COLUMN note VARCHAR(10)"))
    engine.dispose()
    kinds = sorted(diff[0] for diff in schema_drift(store_url))
    assert kinds == ["add_index", "remove_column"]


def test_upgrade_creates_every_table_and_downgrade_removes_them(empty_url: str) -> None:
    state = upgrade(empty_url)
    assert state.current == head_revision() and state.is_current
    engine = create_store_engine(empty_url)
    try:
        assert TABLES <= set(inspect(engine).get_table_names())
        assert set(Base.metadata.tables) == TABLES
        with engine.connect() as conn:
            migrate_connection(conn, revision="base", is_downgrade=True)
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
    assert upgrade(empty_url).is_current  # and back up again


def test_upgrade_is_idempotent(store_url: str) -> None:
    assert upgrade(store_url).is_current
    assert ensure_store(store_url) == store_url


def test_open_session_refuses_an_empty_database(empty_url: str) -> None:
    if empty_url.startswith("sqlite"):
        sqlite3.connect(empty_url.removeprefix("sqlite:///")).close()  # an empty file exists
    with pytest.raises(SchemaNotCurrent) as info:
        with open_session(empty_url):
            pass
    assert "no bitcase evidence store schema" in str(info.value)
    assert "bitcase db upgrade" in info.value.hint


def test_open_session_refuses_a_store_behind_head(store_url: str) -> None:
    engine = create_store_engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0000'"))
    engine.dispose()
    with pytest.raises(SchemaNotCurrent) as info:
        with open_session(store_url):
            pass
    assert f"at schema revision 0000, this bitcase needs {head_revision()}" in str(info.value)
    assert "bitcase db upgrade" in info.value.hint


def test_open_session_does_not_create_a_missing_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.db"
    with pytest.raises(StoreError, match="no evidence store at") as info:
        with open_session(str(path)):
            pass
    assert "bitcase db upgrade" in info.value.hint
    assert not path.exists()


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="cannot use the database") as info:
        upgrade("postgresql+psycopg://nobody:secret@127.0.0.1:1/none")
    assert "secret" not in str(info.value)


def test_unsupported_backend_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="unsupported database backend 'mysql'"):
        create_store_engine("mysql://localhost/db")


def test_sqlite_connections_enforce_foreign_keys_and_use_wal(db_path: Path) -> None:
    engine = create_store_engine(f"sqlite:///{db_path}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one() >= 1000
            with pytest.raises(IntegrityError):
                conn.exec_driver_sql("INSERT INTO subjects (evidence_seq, position, uri, sha256) "
                                     "VALUES (99, 0, 'u', 'd')")
    finally:
        engine.dispose()


def test_in_memory_store_is_at_head(fresh_db) -> None:
    with fresh_db.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
        head = conn.exec_driver_sql("SELECT seq, chain_digest FROM chain_heads").one()
    assert version == head_revision()
    assert tuple(head) == (0, "sha256:" + "0" * 64)


def test_the_read_path_head_constant_is_the_shipped_migrations_head() -> None:
    from evidence_db.schema_check import HEAD_REVISION

    assert HEAD_REVISION == head_revision(), "update HEAD_REVISION in evidence_db/schema_check.py"


def test_status_path_opens_the_store_without_importing_alembic(db_path: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from evidence_db.session import open_session\n"
            f"with open_session({str(db_path)!r}) as s: pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
