"""Opening the evidence store: one session per unit of work, committed or rolled back.

>>> with open_session("bitcase.db") as session:          # doctest: +SKIP
...     evidence = load_evidence(session=session)
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import make_url
from sqlalchemy.orm import Session

from assurance.settings import resolve_db_url
from evidence_db.engine import WRITE_OPTION, create_store_engine, describe_url, translate_db_errors
from evidence_db.errors import StoreError
from evidence_db.schema_check import require_current_schema

__all__ = ["open_session", "missing_sqlite_file", "store_label"]


def missing_sqlite_file(url: str) -> Path | None:
    """The path of a SQLite file URL whose file does not exist (opening would create it)."""
    sa_url = make_url(url)
    if sa_url.get_backend_name() != "sqlite" or sa_url.database in (None, "", ":memory:"):
        return None
    if sa_url.query.get("mode") == "memory" or sa_url.database.startswith("file:"):
        return None
    path = Path(sa_url.database)
    return None if path.exists() else path


@contextmanager
def open_session(url: str | None = None, *, write: bool = False) -> Iterator[Session]:
    """A session on the store at ``url``: committed when the block ends, rolled back on error.

    ``url`` is anything :func:`assurance.settings.resolve_db_url` accepts (a URL, a file path,
    or None for ``$BITCASE_DB`` / ``$DATABASE_URL`` / ``./bitcase.db``). The store must exist
    and be at the head schema revision, otherwise :class:`~evidence_db.errors.StoreError` tells
    the user to run ``bitcase db upgrade``. Pass ``write=True`` for sessions that append
    (ingest, reviews): on SQLite they take the write lock at BEGIN, so concurrent writers queue
    instead of failing midway.
    """
    resolved = resolve_db_url(url)
    missing = missing_sqlite_file(resolved)
    if missing is not None:
        raise StoreError(f"no evidence store at {missing}",
                         hint=f"create it with `bitcase db upgrade --db '{missing}'`")
    engine = create_store_engine(resolved)
    try:
        require_current_schema(engine, resolved)
        bind = engine.execution_options(**{WRITE_OPTION: True}) if write else engine
        with translate_db_errors(resolved), Session(bind) as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise
    finally:
        engine.dispose()


def store_label(url: str | None = None) -> str:
    """The resolved store URL as safe to print (password hidden)."""
    return describe_url(resolve_db_url(url))
