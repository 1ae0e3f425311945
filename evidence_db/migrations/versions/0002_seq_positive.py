"""Chain positions start at 1: CHECK (seq >= 1) on every chained table (evidence items, reviews).

A row at seq 0 or below is one the hash chain never visits, so it can only have been inserted
outside bitcase. A store holding such rows is not changed: the upgrade stops and names them, so
whoever runs it decides what they are (see docs/evidence-format.md).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from typing import Any, Callable

import sqlalchemy as sa
from alembic import op

from evidence_db.errors import StoreError

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

CHAINED = {"evidence_items": "record_id", "reviews": "target"}  # frozen: table -> the column that names a row
SUBJECT_COLUMNS = "evidence_seq, position, uri, sha256"
MAX_NAMED = 20


def _stray_rows() -> list[str]:
    found = []
    for table, key in CHAINED.items():
        rows = op.get_bind().execute(sa.text(f"SELECT seq, {key} FROM {table} WHERE seq < 1 ORDER BY seq"))
        found += [f"{table} seq {seq} ({key} {name!r})" for seq, name in rows]
    return found


def upgrade() -> None:
    stray = _stray_rows()
    if stray:
        shown = "; ".join(stray[:MAX_NAMED]) + (f"; and {len(stray) - MAX_NAMED} more" if len(stray) > MAX_NAMED else "")
        raise StoreError(f"cannot add the constraint seq >= 1: {len(stray)} row(s) sit at chain positions the hash "
                         f"chain never covers, so they were inserted outside bitcase: {shown}",
                         hint="inspect them (SELECT * FROM evidence_items WHERE seq < 1; the same for reviews), "
                              "delete them or restore the store from a backup, then run `bitcase db upgrade` again")
    _alter_chained(lambda batch, table: batch.create_check_constraint(op.f(f"ck_{table}_seq_positive"),
                                                                       "seq >= 1"))


def downgrade() -> None:
    _alter_chained(lambda batch, table: batch.drop_constraint(op.f(f"ck_{table}_seq_positive"), type_="check"))


def _alter_chained(change: Callable[[Any, str], None]) -> None:
    """Apply ``change`` to each chained table in batch mode.

    On SQLite batch mode copies evidence_items and drops the original, which subjects reference;
    foreign keys stay enforced (they cannot be switched off inside the migration's transaction),
    so the subjects are set aside while it happens and put back after, each checked again.
    """
    is_sqlite = op.get_bind().dialect.name == "sqlite"
    if is_sqlite:
        op.execute(f"CREATE TEMPORARY TABLE subjects_aside AS SELECT {SUBJECT_COLUMNS} FROM subjects")
        op.execute("DELETE FROM subjects")
    for table in CHAINED:
        with op.batch_alter_table(table) as batch:
            change(batch, table)
    if is_sqlite:
        op.execute(f"INSERT INTO subjects ({SUBJECT_COLUMNS}) SELECT {SUBJECT_COLUMNS} FROM subjects_aside")
        op.execute("DROP TABLE subjects_aside")
