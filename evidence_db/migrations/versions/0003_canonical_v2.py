"""RFC 8785 canonical JSON (schema v2): reviews name their schema, as evidence items already do.

A review row's ``schema_id`` fixes the canonical JSON of its content digest (see
``evidence_db/chain.py``). Rows written before this revision are v1 and keep verifying by the v1
rule; new reviews are ``bitcase.review/v2``. Downgrading is refused while the store holds v2
rows, since a bitcase before this revision would verify them by the wrong rule.

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

REVIEW_V1 = "bitcase.review/v1"  # frozen copies of the schema ids of this revision
REVIEW_V2 = "bitcase.review/v2"
EVIDENCE_V1 = "bitcase.evidence/v1"


def upgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        batch.add_column(sa.Column("schema_id", sa.String(length=64), server_default=REVIEW_V1, nullable=False))


def downgrade() -> None:
    conn = op.get_bind()
    newer = (conn.scalar(sa.text("SELECT COUNT(*) FROM reviews WHERE schema_id <> :v1"), {"v1": REVIEW_V1})
             + conn.scalar(sa.text("SELECT COUNT(*) FROM evidence_items WHERE schema_id <> :v1"),
                           {"v1": EVIDENCE_V1}))
    if newer:
        raise RuntimeError(f"the store holds {newer} schema v2 row(s) (RFC 8785 digests) that a bitcase before "
                           f"revision 0003 would verify by the wrong rule; downgrade refused")
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("schema_id")
