"""Signatures: signed reviews, bundle signatures in the chain, the items they cover, the store's id.

Revision ID: 0004
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

DIGEST = sa.String(length=71)
KEY_ID = sa.String(length=64)
PUBLIC_KEY = sa.String(length=200)
SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite: INTEGER PRIMARY KEY is the rowid


def upgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        batch.add_column(sa.Column("signer_key_id", KEY_ID, nullable=True))
        batch.add_column(sa.Column("signer_public_key", PUBLIC_KEY, nullable=True))
        batch.add_column(sa.Column("signature", sa.String(length=100), nullable=True))
    op.create_table(
        "bundle_signatures",
        sa.Column("seq", SEQ, autoincrement=False, nullable=False),
        sa.Column("key_id", KEY_ID, nullable=False),
        sa.Column("public_key", PUBLIC_KEY, nullable=False),
        sa.Column("envelope", sa.Text(), nullable=False),
        sa.Column("num_records", sa.BigInteger(), nullable=False),
        sa.Column("records_digest", DIGEST, nullable=False),
        sa.Column("content_digest", DIGEST, nullable=False),
        sa.Column("prev_chain_digest", DIGEST, nullable=False),
        sa.Column("chain_digest", DIGEST, nullable=False),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_bundle_signatures_seq_positive")),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_bundle_signatures")),
        sa.UniqueConstraint("content_digest", name=op.f("uq_bundle_signatures_content_digest")),
    )
    op.create_index(op.f("ix_bundle_signatures_key_id"), "bundle_signatures", ["key_id"])
    op.create_table(
        "signed_evidence",
        sa.Column("signature_seq", SEQ, nullable=False),
        sa.Column("evidence_seq", SEQ, nullable=False),
        sa.ForeignKeyConstraint(["signature_seq"], ["bundle_signatures.seq"],
                                name=op.f("fk_signed_evidence_signature_seq_bundle_signatures")),
        sa.ForeignKeyConstraint(["evidence_seq"], ["evidence_items.seq"],
                                name=op.f("fk_signed_evidence_evidence_seq_evidence_items")),
        sa.PrimaryKeyConstraint("signature_seq", "evidence_seq", name=op.f("pk_signed_evidence")),
    )
    op.create_index(op.f("ix_signed_evidence_evidence_seq"), "signed_evidence", ["evidence_seq"])
    identity = op.create_table(
        "store_identity",
        sa.Column("store_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("store_id", name=op.f("pk_store_identity")),
    )
    op.bulk_insert(identity, [{"store_id": uuid.uuid4(), "created_at": datetime.now(timezone.utc)}])


def downgrade() -> None:
    op.drop_table("store_identity")
    op.drop_index(op.f("ix_signed_evidence_evidence_seq"), table_name="signed_evidence")
    op.drop_table("signed_evidence")
    op.drop_index(op.f("ix_bundle_signatures_key_id"), table_name="bundle_signatures")
    op.drop_table("bundle_signatures")
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("signature")
        batch.drop_column("signer_public_key")
        batch.drop_column("signer_key_id")
