"""Appending to the hash chain inside the caller's transaction.

A :class:`ChainAppender` takes the store's write lock first (PostgreSQL: a transaction-scoped
advisory lock; SQLite: a write to the chain head, which holds the database write lock), then
reads the chain head, so concurrent writers append one after another and every link is
computed from the true previous row. Evidence rows and subjects go in with the driver's
``executemany`` (no per-row ORM or type processing: that was most of the cost of a 100,000
item ingest); the head is written by :meth:`ChainAppender.finish`. Nothing is visible to
other sessions until the caller commits.
"""

from __future__ import annotations

import uuid
from typing import Iterable, Sequence

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from evidence_db.chain import KIND_EVIDENCE, chain_link, content_digest_of_text
from evidence_db.engine import PG_LOCK_KEY
from evidence_db.errors import RecordConflict, StoreDamaged, StoreError
from evidence_db.models import (MAIN_CHAIN, BundleSignature, ChainHead, Deployment, EvidenceItem, ProducerRun, Review,
                                utc_now_datetime)
from evidence_db.prepare import PreparedRecord
from evidence_db.views import IngestResult

__all__ = ["ChainAppender", "LOOKUP_CHUNK"]

LOOKUP_CHUNK = 500  # ids per IN (...) lookup; well under SQLite's bound-parameter limit
ITEM_COLUMNS = ("seq", "record_id", "schema_id", "category", "obligation", "status", "summary", "details",
                "produced_at", "deployment_id", "producer_id", "content_digest", "prev_chain_digest", "chain_digest")
SUBJECT_COLUMNS = ("evidence_seq", "position", "uri", "sha256")


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


class ChainAppender:
    """Appends evidence items and reviews to the chain of one session's transaction."""

    def __init__(self, session: Session) -> None:
        self._session = session
        conn = session.connection()
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK_KEY})")
        else:  # SQLite: a write takes the database write lock (a no-op after BEGIN IMMEDIATE)
            session.execute(update(ChainHead).where(ChainHead.name == MAIN_CHAIN).values(seq=ChainHead.seq))
        head = session.execute(
            select(ChainHead.seq, ChainHead.chain_digest).where(ChainHead.name == MAIN_CHAIN)).one_or_none()
        if head is None:
            raise StoreError("the store has no chain head row; it was damaged outside bitcase",
                             hint="run `bitcase audit verify` and restore the store from a backup")
        self.seq: int = head.seq
        self.prev_digest: str = head.chain_digest
        self.record_seqs: list[int] | None = None  # set to a list to collect the seq of every record appended or found
        self._refuse_rows_beyond_head()
        self._producer_ids: dict[str, uuid.UUID] = {}  # digest -> id
        self._deployment_ids: dict[str, uuid.UUID] = {}
        self._mark = mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        self._insert_item_sql = _insert_sql("evidence_items", ITEM_COLUMNS, mark)
        self._insert_subject_sql = _insert_sql("subjects", SUBJECT_COLUMNS, mark)

    def _refuse_rows_beyond_head(self) -> None:
        """Appending would collide with rows written past the head outside bitcase: name them instead."""
        beyond = []
        for table, key in ((EvidenceItem, EvidenceItem.record_id), (Review, Review.target),
                           (BundleSignature, BundleSignature.key_id)):
            beyond += [f"{table.__tablename__} seq {seq} ({key.key} {name!r})" for seq, name in self._session.execute(
                select(table.seq, key).where(table.seq > self.seq).order_by(table.seq).limit(5))]
        if beyond:
            raise StoreDamaged(f"the store holds rows beyond its chain head (seq {self.seq}), written outside "
                               f"bitcase: {'; '.join(beyond)}; nothing was appended",
                               hint="`bitcase audit verify` lists them; delete them or restore the store from a backup")

    def link(self, kind: str, content_digest: str) -> tuple[int, str, str]:
        """Reserve the next chain position: ``(seq, prev_chain_digest, chain_digest)``."""
        self.seq += 1
        prev = self.prev_digest
        self.prev_digest = chain_link(prev, self.seq, kind, content_digest)
        return self.seq, prev, self.prev_digest

    def finish(self) -> None:
        """Write the new chain head (call once, after the last append)."""
        self._session.execute(update(ChainHead).where(ChainHead.name == MAIN_CHAIN)
                              .values(seq=self.seq, chain_digest=self.prev_digest))

    def append_evidence(self, batch: Sequence[PreparedRecord]) -> IngestResult:
        """Append the records not stored yet; identical ones are no-ops, changed ones conflict."""
        fresh: dict[str, PreparedRecord] = {}
        unchanged = 0
        for rec in batch:
            first = fresh.get(rec.record_id)
            if first is None:
                fresh[rec.record_id] = rec
            elif first.content_digest == rec.content_digest:
                unchanged += 1
            else:
                raise RecordConflict(f"record id {rec.record_id!r} also appears at {first.where} with different "
                                     "content", where=rec.where, field="id",
                                     hint="give each distinct record its own id")
        for record_id, stored_digest, stored_seq in self._stored_digests(list(fresh)):
            rec = fresh.pop(record_id)
            if stored_digest != rec.content_digest:
                raise RecordConflict(f"record id {record_id!r} is already stored with different content "
                                     f"(stored {stored_digest}, this record {rec.content_digest})",
                                     where=rec.where, field="id",
                                     hint="stored evidence is append-only: give the new result a new id")
            unchanged += 1
            if self.record_seqs is not None:
                self.record_seqs.append(stored_seq)
        if fresh:
            self._insert(list(fresh.values()))
        return IngestResult(added=len(fresh), unchanged=unchanged)

    def _stored_digests(self, record_ids: list[str]) -> list[tuple[str, str, int]]:
        """``(record_id, content_digest, seq)`` of the ids already stored (driver SQL: no per-value binding cost)."""
        found: list[tuple[str, str, int]] = []
        conn = self._session.connection()
        for chunk in _chunks(record_ids, LOOKUP_CHUNK):
            marks = ", ".join([self._mark] * len(chunk))
            found.extend(conn.exec_driver_sql("SELECT record_id, content_digest, seq FROM evidence_items "
                                              f"WHERE record_id IN ({marks})", tuple(chunk)).all())
        return found

    def _insert(self, records: list[PreparedRecord]) -> None:
        producer_ids = self._producer_rows(records)
        deployment_ids = self._deployment_rows(records)
        items, subjects = [], []
        for rec in records:
            seq, prev, chain = self.link(KIND_EVIDENCE, rec.content_digest)
            items.append((seq, rec.record_id, rec.schema_id, rec.category, rec.obligation, rec.status, rec.summary,
                          rec.details_json, rec.produced_at, deployment_ids[rec.deployment_digest],
                          producer_ids[rec.producer_json], rec.content_digest, prev, chain))
            subjects.extend((seq, position, uri, sha) for position, (uri, sha) in enumerate(rec.subjects))
        if self.record_seqs is not None:
            self.record_seqs.extend(item[0] for item in items)
        conn = self._session.connection()
        conn.exec_driver_sql(self._insert_item_sql, items)
        if subjects:
            conn.exec_driver_sql(self._insert_subject_sql, subjects)

    def _producer_rows(self, records: list[PreparedRecord]) -> dict[str, str]:
        """Producer run ids keyed by the producer's canonical JSON, inserting new runs.

        Ids are hex strings: what SQLAlchemy's Uuid stores on SQLite, and PostgreSQL casts them.
        """
        by_json = {rec.producer_json: rec.producer for rec in records}
        digests = {text: content_digest_of_text(text) for text in by_json}
        self._resolve(ProducerRun, self._producer_ids, set(digests.values()))
        missing = [text for text, digest in digests.items() if digest not in self._producer_ids]
        if missing:
            rows = [{"id": uuid.uuid4(), "digest": digests[text], **by_json[text]} for text in missing]
            self._session.execute(insert(ProducerRun), rows)
            self._producer_ids.update((row["digest"], row["id"]) for row in rows)
        return {text: self._producer_ids[digest].hex for text, digest in digests.items()}

    def _deployment_rows(self, records: list[PreparedRecord]) -> dict[str, str]:
        """Deployment ids (hex strings, as for producers) keyed by digest, inserting new deployments."""
        fields = {rec.deployment_digest: rec.deployment_fields for rec in records}
        self._resolve(Deployment, self._deployment_ids, set(fields))
        missing = [digest for digest in fields if digest not in self._deployment_ids]
        if missing:
            now = utc_now_datetime()
            rows = [{"id": uuid.uuid4(), "digest": digest, "fields": fields[digest], "first_seen": now}
                    for digest in missing]
            self._session.execute(insert(Deployment), rows)
            self._deployment_ids.update((row["digest"], row["id"]) for row in rows)
        return {digest: self._deployment_ids[digest].hex for digest in fields}

    def _resolve(self, model: type[ProducerRun] | type[Deployment], known: dict[str, uuid.UUID],
                 digests: set[str]) -> None:
        """Fill ``known`` with the ids of already stored rows among ``digests``."""
        unknown = sorted(digests - known.keys())
        for chunk in _chunks(unknown, LOOKUP_CHUNK):
            rows = self._session.execute(select(model.digest, model.id).where(model.digest.in_(chunk)))
            known.update(rows.all())


def _insert_sql(table: str, columns: tuple[str, ...], mark: str) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
