"""ORM models of the evidence store (SQLAlchemy 2.0 typed declarative).

Tables: ``deployments`` (a configuration D), ``producer_runs`` (the tool run behind a record),
``evidence_items`` and their ``subjects``, ``reviews``, ``bundle_signatures`` and the items each
covers (``signed_evidence``), ``store_identity`` and ``chain_heads`` (the tip of the hash chain).
Evidence items, reviews and bundle signatures share one append-only hash chain ordered by ``seq``; see
``evidence_db/chain.py`` and docs/evidence-format.md. The schema changes only through the
Alembic migrations in ``evidence_db/migrations``; a test fails when they drift from these models.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, timezone
from typing import Annotated, Any

from sqlalchemy import JSON, BigInteger, CheckConstraint, ForeignKey, Index, Integer, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import DateTime

from evidence_db.bundle import CATEGORIES, STATUSES

__all__ = ["Base", "Model", "SEQ_TYPE", "Deployment", "ProducerRun", "EvidenceItem", "Subject", "Review",
           "BundleSignature", "SignedEvidence", "StoreIdentity", "ChainHead", "DECISIONS", "MAIN_CHAIN", "GENESIS_DIGEST"]

DECISIONS = ("accept", "reject", "needs-work")
MAIN_CHAIN = "main"  # the one chain over evidence items and reviews
GENESIS_DIGEST = "sha256:" + "0" * 64  # the "previous chain digest" of the first row

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Reused column types.
DigestStr = Annotated[str, mapped_column(String(71))]  # "sha256:" + 64 hex
IsoTimeStr = Annotated[str, mapped_column(String(40))]  # ISO 8601 as the producer wrote it
UtcDateTime = Annotated[datetime, mapped_column(DateTime(timezone=True))]
SEQ_TYPE = BigInteger().with_variant(Integer, "sqlite")  # SQLite: INTEGER PRIMARY KEY is the rowid
KeyIdStr = Annotated[str, mapped_column(String(64))]  # "SHA256:" + 43 base64 characters
PublicKeyStr = Annotated[str, mapped_column(String(200))]  # "ssh-ed25519 AAAA…"
ChainSeq = Annotated[int, mapped_column(SEQ_TYPE, primary_key=True, autoincrement=False)]  # chain position


def _sql_in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def utc_now_datetime() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON}


class Model(Base):
    """Abstract base: a client-generated UUID primary key (rows can be batch-inserted)."""

    __abstract__ = True

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4, sort_order=-10)


class Deployment(Model):
    """A deployment configuration D, keyed by the digest of its fields."""

    __tablename__ = "deployments"

    digest: Mapped[DigestStr] = mapped_column(unique=True)
    fields: Mapped[dict[str, Any]]
    first_seen: Mapped[UtcDateTime] = mapped_column(default=utc_now_datetime)

    evidence: Mapped[list[EvidenceItem]] = relationship(back_populates="deployment")


class ProducerRun(Model):
    """One run of a producing tool, keyed by the digest of its fields."""

    __tablename__ = "producer_runs"

    digest: Mapped[DigestStr] = mapped_column(unique=True)
    tool: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(200))
    command: Mapped[str] = mapped_column(Text)
    host: Mapped[str] = mapped_column(String(255))
    accelerator: Mapped[str] = mapped_column(String(200))
    started_at: Mapped[IsoTimeStr]
    finished_at: Mapped[IsoTimeStr]

    evidence: Mapped[list[EvidenceItem]] = relationship(back_populates="producer")


class EvidenceItem(Base):
    """One evidence item: exactly one category, the D it was produced under, a chain link.

    Keyed by its chain position: appends are sequential, and on SQLite the key is the rowid.
    """

    __tablename__ = "evidence_items"
    __table_args__ = (
        CheckConstraint(f"category IN ({_sql_in(CATEGORIES)})", name="category"),
        CheckConstraint(f"status IN ({_sql_in(STATUSES)})", name="status"),
        CheckConstraint("seq >= 1", name="seq_positive"),  # the chain's first position is 1
    )

    seq: Mapped[ChainSeq]
    record_id: Mapped[str] = mapped_column(String(512), unique=True)
    schema_id: Mapped[str] = mapped_column(String(64))
    category: Mapped[str] = mapped_column(String(40))
    obligation: Mapped[str] = mapped_column(String(512))
    status: Mapped[str] = mapped_column(String(16))
    summary: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]]
    produced_at: Mapped[IsoTimeStr]
    deployment_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("deployments.id"), index=True)
    producer_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("producer_runs.id"))
    content_digest: Mapped[DigestStr]
    prev_chain_digest: Mapped[DigestStr]
    chain_digest: Mapped[DigestStr]

    deployment: Mapped[Deployment] = relationship(back_populates="evidence")
    producer: Mapped[ProducerRun] = relationship(back_populates="evidence")
    subjects: Mapped[list[Subject]] = relationship(back_populates="evidence", order_by="Subject.position")


class Subject(Base):
    """Something an evidence item covers: a URI and the digest it had, at its place in the record."""

    __tablename__ = "subjects"

    evidence_seq: Mapped[int] = mapped_column(SEQ_TYPE, ForeignKey("evidence_items.seq"), primary_key=True)
    position: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    uri: Mapped[str] = mapped_column(String(2048))
    sha256: Mapped[DigestStr]

    evidence: Mapped[EvidenceItem] = relationship(back_populates="subjects")


class Review(Base):
    """An audit review of a case node or evidence item, pinned to the target's digest."""

    __tablename__ = "reviews"
    __table_args__ = (
        CheckConstraint(f"decision IN ({_sql_in(DECISIONS)})", name="decision"),
        CheckConstraint("seq >= 1", name="seq_positive"),
        Index("ix_reviews_target", "target"),
    )

    seq: Mapped[ChainSeq]
    # v1 rows predate the column (migration 0003 gives them the v1 id); new reviews name v2
    schema_id: Mapped[str] = mapped_column(String(64), server_default="bitcase.review/v1")
    target: Mapped[str] = mapped_column(String(512))
    target_digest: Mapped[str] = mapped_column(String(200))
    decision: Mapped[str] = mapped_column(String(16))
    reviewer: Mapped[str] = mapped_column(String(255))
    rationale: Mapped[str] = mapped_column(Text)
    expires: Mapped[date | None]
    created_at: Mapped[UtcDateTime]
    content_digest: Mapped[DigestStr]
    prev_chain_digest: Mapped[DigestStr]
    chain_digest: Mapped[DigestStr]
    # A signed review: the key id is also in the chained content, so removing the signature shows.
    signer_key_id: Mapped[KeyIdStr | None]
    signer_public_key: Mapped[PublicKeyStr | None]
    signature: Mapped[str | None] = mapped_column(String(100))  # base64 ed25519 over the DSSE PAE


class BundleSignature(Base):
    """A verified bundle signature, in the hash chain after the records it covers.

    ``envelope`` is the DSSE envelope as ingested (its content digest is chained); the other
    columns repeat what its statement says, for queries, and verification checks they agree.
    """

    __tablename__ = "bundle_signatures"
    __table_args__ = (CheckConstraint("seq >= 1", name="seq_positive"),)

    seq: Mapped[ChainSeq]
    key_id: Mapped[KeyIdStr] = mapped_column(index=True)
    public_key: Mapped[PublicKeyStr]
    envelope: Mapped[str] = mapped_column(Text)
    num_records: Mapped[int] = mapped_column(BigInteger)
    records_digest: Mapped[DigestStr]
    content_digest: Mapped[DigestStr] = mapped_column(unique=True)
    prev_chain_digest: Mapped[DigestStr]
    chain_digest: Mapped[DigestStr]


class SignedEvidence(Base):
    """Which stored evidence items a bundle signature covers (checked against its records digest)."""

    __tablename__ = "signed_evidence"

    signature_seq: Mapped[int] = mapped_column(SEQ_TYPE, ForeignKey("bundle_signatures.seq"), primary_key=True)
    evidence_seq: Mapped[int] = mapped_column(SEQ_TYPE, ForeignKey("evidence_items.seq"), primary_key=True,
                                              index=True)


class StoreIdentity(Base):
    """The store's random id, named in chain-head checkpoints so one store's cannot vouch for another."""

    __tablename__ = "store_identity"

    store_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    created_at: Mapped[UtcDateTime]


class ChainHead(Base):
    """The tip of a hash chain: the last seq and its chain digest (detects tail deletion)."""

    __tablename__ = "chain_heads"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    chain_digest: Mapped[DigestStr]
