"""Engines for the evidence store: SQLite (default) or PostgreSQL through psycopg 3.

SQLite connections get ``PRAGMA foreign_keys=ON``, WAL journaling and a busy timeout, so a
reader never blocks a writer and a second writer waits instead of failing. SQLAlchemy emits
BEGIN itself (the sqlite3 driver's legacy transaction handling is switched off): a connection
carrying the execution option :data:`WRITE_OPTION` begins with ``BEGIN IMMEDIATE`` and so
takes the write lock before it reads anything, which is what keeps hash-chain appends
serialized between processes.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from sqlalchemy import Connection, Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError, OperationalError
from sqlalchemy.pool import StaticPool

from evidence_db.canonical import canonical_json_v1
from evidence_db.errors import StoreError

__all__ = ["create_store_engine", "describe_url", "is_sqlite", "translate_db_errors",
           "WRITE_OPTION", "PG_LOCK_KEY", "SQLITE_BUSY_TIMEOUT_MS", "PG_CONNECT_TIMEOUT_S"]

WRITE_OPTION = "bitcase_write"  # execution option: this connection will append to the store
PG_LOCK_KEY = 0x626974636173_6531  # pg_advisory_xact_lock key serializing appends and upgrades
SQLITE_BUSY_TIMEOUT_MS = 30_000
PG_CONNECT_TIMEOUT_S = 10


def describe_url(url: str) -> str:
    """The URL as safe to print: password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable database URL>"


def is_sqlite(engine_or_conn: Engine | Connection) -> bool:
    """Whether the engine (or connection) talks to SQLite."""
    return engine_or_conn.dialect.name == "sqlite"


def create_store_engine(url: str) -> Engine:
    """An engine for ``url`` (a SQLAlchemy URL) with the store's connection settings.

    ``sqlite://`` or ``sqlite:///:memory:`` gives one shared in-memory connection (tests).
    Raises :class:`StoreError` for a URL that is malformed or names an unsupported backend.
    """
    try:
        sa_url = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"cannot parse database URL {url!r}: {exc}",
                         hint="use a file path, sqlite:///PATH or postgresql://USER@HOST/DB") from None
    backend = sa_url.get_backend_name()
    # JSON columns are stored compact and sorted; any exact spelling does (digests are recomputed
    # from the parsed value by its row's rule), and this one also takes v1's 64-bit integers.
    kwargs: dict[str, Any] = {"json_serializer": canonical_json_v1}
    if backend == "sqlite":
        if sa_url.database in (None, "", ":memory:"):
            kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
    elif backend == "postgresql":
        if "connect_timeout" not in sa_url.query:
            kwargs["connect_args"] = {"connect_timeout": PG_CONNECT_TIMEOUT_S}
    else:
        raise StoreError(f"unsupported database backend {backend!r} in {describe_url(url)}",
                         hint="the store runs on SQLite or PostgreSQL (postgresql+psycopg://…)")
    try:
        engine = create_engine(sa_url, **kwargs)
    except (NoSuchModuleError, ImportError) as exc:
        raise StoreError(f"no database driver for {describe_url(url)}: {exc}",
                         hint="for PostgreSQL use postgresql+psycopg:// (psycopg 3 comes with bitcase)") from None
    if backend == "sqlite":
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN (see _sqlite_on_begin)
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode=WAL")  # in-memory databases answer "memory": fine
    cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    mode = "IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "DEFERRED"
    conn.exec_driver_sql(f"BEGIN {mode}")


@contextmanager
def translate_db_errors(url: str) -> Iterator[None]:
    """Turn driver-level failures (unreachable server, locked or foreign file) into :class:`StoreError`.

    Integrity errors pass through: with the store's own locking they mean a bug, not bad input.
    """
    try:
        yield
    except IntegrityError:
        raise
    except DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
        if exc.connection_invalidated:
            raise StoreError(f"lost the connection to {describe_url(url)}: {reason}",
                             hint="check the database server, then retry") from None
        if isinstance(exc, OperationalError) and ("locked" in reason or "busy" in reason):
            raise StoreError(f"the store {describe_url(url)} is busy: {reason}",
                             hint="another process held its write lock too long; retry when it finishes") from None
        raise StoreError(f"cannot use the database {describe_url(url)}: {reason}",
                         hint="check the URL (--db, $BITCASE_DB, $DATABASE_URL), that the server runs and that "
                              "it is a bitcase store") from None
