"""Initial schema: deployments, producer runs, evidence items, subjects, reviews, chain head.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

GENESIS_DIGEST = "sha256:" + "0" * 64  # frozen copy of evidence_db.models.GENESIS_DIGEST
DIGEST = sa.String(length=71)
SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite: INTEGER PRIMARY KEY is the rowid


def _chain_columns() -> list[sa.Column]:
    return [
        sa.Column("content_digest", DIGEST, nullable=False),
        sa.Column("prev_chain_digest", DIGEST, nullable=False),
        sa.Column("chain_digest", DIGEST, nullable=False),
    ]


def upgrade() -> None:
    chain_heads = op.create_table(
        "chain_heads",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("chain_digest", DIGEST, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_chain_heads")),
    )
    op.bulk_insert(chain_heads, [{"name": "main", "seq": 0, "chain_digest": GENESIS_DIGEST}])
    op.create_table(
        "deployments",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("digest", DIGEST, nullable=False),
        sa.Column("fields", sa.JSON(), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployments")),
        sa.UniqueConstraint("digest", name=op.f("uq_deployments_digest")),
    )
    op.create_table(
        "producer_runs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("digest", DIGEST, nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("version", sa.String(length=200), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("accelerator", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.String(length=40), nullable=False),
        sa.Column("finished_at", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_producer_runs")),
        sa.UniqueConstraint("digest", name=op.f("uq_producer_runs_digest")),
    )
    op.create_table(
        "reviews",
        sa.Column("seq", SEQ, autoincrement=False, nullable=False),
        sa.Column("target", sa.String(length=512), nullable=False),
        sa.Column("target_digest", sa.String(length=200), nullable=False),
        sa.Column("decision", sa.String(length=16), nullable=False),
        sa.Column("reviewer", sa.String(length=255), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("expires", sa.Date(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        *_chain_columns(),
        sa.CheckConstraint("decision IN ('accept', 'reject', 'needs-work')", name=op.f("ck_reviews_decision")),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_reviews")),
    )
    op.create_index("ix_reviews_target", "reviews", ["target"])
    op.create_table(
        "evidence_items",
        sa.Column("seq", SEQ, autoincrement=False, nullable=False),
        sa.Column("record_id", sa.String(length=512), nullable=False),
        sa.Column("schema_id", sa.String(length=64), nullable=False),
        sa.Column("category", sa.String(length=40), nullable=False),
        sa.Column("obligation", sa.String(length=512), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("produced_at", sa.String(length=40), nullable=False),
        sa.Column("deployment_id", sa.Uuid(), nullable=False),
        sa.Column("producer_id", sa.Uuid(), nullable=False),
        *_chain_columns(),
        sa.CheckConstraint(
            "category IN ('kernel_proof', 'trusted_contract_translation', 'runtime_config_check', 'test_result')",
            name=op.f("ck_evidence_items_category")),
        sa.CheckConstraint("status IN ('pass', 'fail', 'error', 'inconclusive')",
                           name=op.f("ck_evidence_items_status")),
        sa.ForeignKeyConstraint(["deployment_id"], ["deployments.id"],
                                name=op.f("fk_evidence_items_deployment_id_deployments")),
        sa.ForeignKeyConstraint(["producer_id"], ["producer_runs.id"],
                                name=op.f("fk_evidence_items_producer_id_producer_runs")),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_evidence_items")),
        sa.UniqueConstraint("record_id", name=op.f("uq_evidence_items_record_id")),
    )
    op.create_index(op.f("ix_evidence_items_deployment_id"), "evidence_items", ["deployment_id"])
    op.create_table(
        "subjects",
        sa.Column("evidence_seq", SEQ, nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("uri", sa.String(length=2048), nullable=False),
        sa.Column("sha256", DIGEST, nullable=False),
        sa.ForeignKeyConstraint(["evidence_seq"], ["evidence_items.seq"],
                                name=op.f("fk_subjects_evidence_seq_evidence_items")),
        sa.PrimaryKeyConstraint("evidence_seq", "position", name=op.f("pk_subjects")),
    )


def downgrade() -> None:
    op.drop_table("subjects")
    op.drop_table("evidence_items")
    op.drop_table("reviews")
    op.drop_table("producer_runs")
    op.drop_table("deployments")
    op.drop_table("chain_heads")
