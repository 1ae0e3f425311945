"""Store fixtures: SQLite and PostgreSQL stores, rolled-back sessions, in-memory and file stores.

PostgreSQL runs when BITCASE_TEST_POSTGRES_URL names a server database; each test session
works in a scratch database of its own created there (dropped at the end). Without the URL
the PostgreSQL cases skip, unless BITCASE_REQUIRE_POSTGRES=1, which makes them fail.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Iterator

import pytest
import typer
from sqlalchemy import Engine, make_url, text
from sqlalchemy.orm import Session

from evidence_db.engine import create_store_engine
from evidence_db.migrate import migrate_connection, upgrade
from tests.evidence_db.cli_main import build_app

POSTGRES_URL_VAR = "BITCASE_TEST_POSTGRES_URL"
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def postgres_urls() -> Iterator[dict[str, str]]:
    """Two scratch PostgreSQL databases for this test session: "fresh" (reset per test) and "shared"."""
    base = os.environ.get(POSTGRES_URL_VAR)
    if not base:
        if os.environ.get("BITCASE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"BITCASE_REQUIRE_POSTGRES=1 but {POSTGRES_URL_VAR} is not set")
        pytest.skip(f"PostgreSQL store tests need {POSTGRES_URL_VAR} "
                    "(e.g. postgresql+psycopg://postgres@127.0.0.1:55432/bitcase_test)")
    prefix = f"bitcase_evdb_{secrets.token_hex(4)}"
    names = {role: f"{prefix}_{role}" for role in ("fresh", "shared")}
    admin = create_store_engine(base).execution_options(isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for name in names.values():
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield {role: make_url(base).set(database=name).render_as_string(hide_password=False)
               for role, name in names.items()}
    finally:
        with admin.connect() as conn:
            for name in names.values():
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def reset_postgres(url: str) -> None:
    """Empty the scratch database: no tables, no alembic version."""
    engine = create_store_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    finally:
        engine.dispose()


@pytest.fixture
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL with nothing in it yet, for each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    url = request.getfixturevalue("postgres_urls")["fresh"]
    reset_postgres(url)
    return url


@pytest.fixture
def store_url(empty_url: str) -> str:
    """A fresh store at the head schema, for each backend."""
    upgrade(empty_url)
    return empty_url


@pytest.fixture(scope="module")
def module_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """A store shared by a module's rolled-back sessions."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'shared.db'}"
    else:
        url = request.getfixturevalue("postgres_urls")["shared"]
        reset_postgres(url)
    upgrade(url)
    engine = create_store_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture
def db_session(module_store: Engine) -> Iterator[Session]:
    """A session whose work is rolled back at teardown (one connection, outer transaction)."""
    with module_store.connect() as conn:
        outer = conn.begin()
        session = Session(bind=conn, join_transaction_mode="create_savepoint")
        try:
            yield session
        finally:
            session.close()
            outer.rollback()


@pytest.fixture
def fresh_db() -> Iterator[Engine]:
    """A new in-memory SQLite store at head."""
    engine = create_store_engine("sqlite://")
    with engine.connect() as conn:
        migrate_connection(conn)
    yield engine
    engine.dispose()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A new SQLite store file at head."""
    path = tmp_path / "bitcase.db"
    upgrade(f"sqlite:///{path}")
    return path


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every store test on each backend: ``empty_url``/``store_url``/``db_session`` users."""
    for fixture in ("empty_url", "module_store"):
        if fixture in metafunc.fixturenames:
            scope = "module" if fixture == "module_store" else None
            metafunc.parametrize(fixture, BACKENDS, indirect=True, scope=scope)


@pytest.fixture
def cli() -> typer.Typer:
    """An app with this package's command groups, registered as the main CLI does."""
    return build_app()


def count_rows(url: str, table: str) -> int:
    """Rows in a table of the store at ``url``."""
    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    finally:
        engine.dispose()
