"""The read path's schema check: is the store at the shipped head revision? (no Alembic import).

Every command that opens the store checks its schema revision first. Importing Alembic for that
costs more than the check itself, so this module reads Alembic's ``alembic_version`` table with
plain SQLAlchemy and compares it with :data:`HEAD_REVISION`, which a test keeps equal to the
head of the shipped migrations (``evidence_db.migrate.head_revision``).
"""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text

from evidence_db.engine import describe_url, translate_db_errors
from evidence_db.errors import SchemaNotCurrent

__all__ = ["HEAD_REVISION", "current_revision", "require_current_schema"]

HEAD_REVISION = "0002"  # the newest file in evidence_db/migrations/versions; tested


def current_revision(engine: Engine, url: str) -> str | None:
    """The revision the store is at, or None when it has no bitcase schema yet."""
    with translate_db_errors(url), engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return rows[0] if len(rows) == 1 else (None if not rows else ",".join(sorted(rows)))


def require_current_schema(engine: Engine, url: str) -> None:
    """Raise :class:`SchemaNotCurrent` unless the store is at the head revision."""
    current = current_revision(engine, url)
    if current == HEAD_REVISION:
        return
    shown = describe_url(url)
    upgrade_cmd = f"bitcase db upgrade --db '{shown}'"
    if current is None:
        raise SchemaNotCurrent(f"{shown} has no bitcase evidence store schema", hint=f"create it with `{upgrade_cmd}`")
    raise SchemaNotCurrent(f"the evidence store {shown} is at schema revision {current}, "
                           f"this bitcase needs {HEAD_REVISION}", hint=f"migrate it with `{upgrade_cmd}`")
