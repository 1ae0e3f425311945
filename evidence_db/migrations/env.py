"""Alembic environment for the evidence store.

Run through :mod:`evidence_db.migrate` (``bitcase db upgrade``), which hands over an open
connection in ``config.attributes["connection"]``; no alembic.ini is needed. With only a URL
(``sqlalchemy.url``) it opens its own connection through the store's engine settings.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from evidence_db.engine import PG_LOCK_KEY, WRITE_OPTION, create_store_engine
from evidence_db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations(connection: Connection) -> None:
    """Migrate inside one transaction that holds the store's write lock."""
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_server_default=True,
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK_KEY})")
        context.run_migrations()


given = config.attributes.get("connection")
if given is not None:
    run_migrations(given)
else:
    engine = create_store_engine(config.get_main_option("sqlalchemy.url"))
    try:
        with engine.connect() as conn:
            run_migrations(conn.execution_options(**{WRITE_OPTION: True}))
            conn.commit()
    finally:
        engine.dispose()
