"""Schema migrations, run programmatically: Alembic is the only way the schema changes.

``bitcase db upgrade`` calls :func:`upgrade`; ``bitcase init``/``bitcase assure`` call
:func:`ensure_store`; every other command opens the store through
:func:`evidence_db.session.open_session`, which checks the revision without Alembic
(:mod:`evidence_db.schema_check`) and tells the user to run ``bitcase db upgrade`` when the
store is behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine

from evidence_db.engine import WRITE_OPTION, create_store_engine, describe_url, translate_db_errors
from evidence_db.errors import StoreError
from evidence_db.models import Base

__all__ = ["SchemaState", "alembic_config", "head_revision", "schema_state",
           "upgrade", "migrate_connection", "ensure_store", "schema_drift"]

SCRIPT_LOCATION = "evidence_db:migrations"


@dataclass(frozen=True, slots=True)
class SchemaState:
    """Where a store's schema stands relative to the shipped migrations."""

    url: str  # password hidden
    current: str | None  # None: no bitcase schema yet
    head: str

    @property
    def is_current(self) -> bool:
        return self.current == self.head


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations (no alembic.ini involved)."""
    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))  # configparser escaping
    return cfg


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The head revision of the shipped migrations."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise StoreError(f"the shipped migrations have {len(heads)} heads {heads}; expected one",
                         hint="merge the migration branches (alembic merge) before release")
    return heads[0]


def schema_state(engine: Engine, url: str) -> SchemaState:
    """The revision the store at ``engine`` is at, and the head it should be at."""
    with translate_db_errors(url), engine.connect() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
    current = heads[0] if heads else None
    return SchemaState(url=describe_url(url), current=current, head=head_revision())


def upgrade(url: str, *, revision: str = "head") -> SchemaState:
    """Migrate the store at ``url`` to ``revision`` (creating it if empty); return the new state.

    Safe to run concurrently: the migration transaction holds the store's write lock.
    """
    engine = create_store_engine(url)
    try:
        with translate_db_errors(url), engine.connect() as conn:
            migrate_connection(conn, revision=revision)
        return schema_state(engine, url)
    except CommandError as exc:  # an unknown revision, or one the store cannot move to
        raise StoreError(f"cannot migrate {describe_url(url)} to {revision!r}: {exc}",
                         hint=f"the newest revision is {head_revision()}; `bitcase db current` shows the store's"
                         ) from None
    finally:
        engine.dispose()


def migrate_connection(connection: Connection, *, revision: str = "head", is_downgrade: bool = False) -> None:
    """Migrate the database behind an open connection (e.g. an in-memory SQLite store) and commit.

    With ``is_downgrade`` it migrates down to ``revision`` instead (``"base"``: no tables left).
    """
    conn = connection.execution_options(**{WRITE_OPTION: True})
    cfg = alembic_config()
    cfg.attributes["connection"] = conn
    (command.downgrade if is_downgrade else command.upgrade)(cfg, revision)
    conn.commit()


def ensure_store(url: str) -> str:
    """Create or migrate the store at ``url`` so it is at head; return ``url``.

    For commands that set a store up (``bitcase init``, ``bitcase assure``); read and ingest
    commands use :func:`evidence_db.session.open_session`, which refuses a store behind head.
    """
    upgrade(url)
    return url


def schema_drift(url: str) -> list[Any]:
    """Differences between the models and the migrated schema at ``url`` (empty: no drift).

    Upgrades nothing: run it on a store migrated to head (``bitcase db check`` does that on
    its own scratch store). Each entry is an Alembic autogenerate diff tuple.
    """
    engine = create_store_engine(url)
    try:
        with translate_db_errors(url), engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_server_default": True, "compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()
