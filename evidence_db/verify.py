"""Recomputing the hash chain to detect rows edited, deleted, inserted or reordered outside bitcase.

:class:`ChainWalk` reads every chained row (evidence items with their subjects, reviews) in
``seq`` windows (bounded memory), recomputes each row's content digest from its stored
columns (joined producer and deployment included) and each link, and compares the last link
with the chain head; then re-verifies every stored signature (``evidence_db.signatures``).
Each row's digest follows its own schema version (v1: Python's canonical JSON, v2: RFC 8785).
After a fault it resynchronises on the stored digests, so each damaged
row is reported once rather than everything after it. Rows the chain cannot cover (``seq``
below 1 or beyond the head, two rows at one position) are named one by one: no reader may use
them. :func:`verify_chain` only verifies; :mod:`evidence_db.verified_read` builds the views
the status rules read from the same walk, so verifying costs no second read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from sqlalchemy import LargeBinary, String, Text, cast, or_, select, type_coerce
from sqlalchemy.orm import Session

from evidence_db.bundle import SCHEMA_VERSIONS
from evidence_db.canonical import encoder_for_version
from evidence_db.chain import (GENESIS_DIGEST, KIND_EVIDENCE, KIND_REVIEW, KIND_SIGNATURE, ContentHasher, chain_link,
                               deployment_json, producer_json)
from evidence_db.chain_rows import (Entry, Subjects, edited, read_reviews, read_subjects, subjects_value,
                                    unreadable)
from evidence_db.engine import PG_LOCK_KEY
from evidence_db.models import MAIN_CHAIN, BundleSignature, ChainHead, Deployment, EvidenceItem, ProducerRun, Review
from evidence_db.signatures import check_signatures, signature_window
from evidence_db.views import ChainFault, ChainReport, ReviewView

__all__ = ["verify_chain", "ChainWalk", "ChainWindow", "EvidenceRow", "WINDOW_ROWS", "MAX_FAULTS"]

WINDOW_ROWS = 20_000
MAX_FAULTS = 50

# One stored evidence row as read: the row (seq, record_id, category, obligation, status, summary,
# produced_at, details as stored, producer id, deployment id, content digest, ...), its details
# text, its subjects, its producer (canonical JSON, tool, version) and its deployment (canonical
# JSON, digest), each None when the row names none that is stored.
EvidenceRow = tuple[Any, str, Subjects, "tuple[str, str, str] | None", "tuple[str, str] | None"]


@dataclass(slots=True)
class ChainWindow:
    """The rows of one window of chain positions, as stored (faulty rows included)."""

    evidence: list[EvidenceRow] = field(default_factory=list)
    reviews: list[ReviewView] = field(default_factory=list)


def _raw_id(column: Any) -> Any:
    """A UUID column as the driver returns it (no per-row UUID objects: they cost most of a verify)."""
    return type_coerce(column, String)


class ChainWalk:
    """One verifying pass over the chain; iterate :meth:`windows`, then read :meth:`report`.

    Reads one consistent state: SQLite reads from one snapshot; on PostgreSQL the walk holds the
    write lock in shared mode, so appends wait until the session's transaction ends.
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        conn = session.connection()
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock_shared({PG_LOCK_KEY})")
        self._faults: list[ChainFault] = []
        self._in_chain_faults = False  # a fault at a position 1..head (after one, the head check is noise)
        self._num_rows = 0
        self._prev = GENESIS_DIGEST
        head = session.execute(select(ChainHead.seq, ChainHead.chain_digest)
                               .where(ChainHead.name == MAIN_CHAIN)).one_or_none()
        if head is None:
            self._head: tuple[int, str] | None = None
            self._faults.append(ChainFault(0, "head", "", "the chain head row is missing"))
            return
        self._head = (head.seq, head.chain_digest)
        # A blob in `details` (SQLite only) is read as bytes so one undecodable row can be named.
        self._details = (cast(EvidenceItem.details, LargeBinary) if conn.dialect.name == "sqlite"
                         else cast(EvidenceItem.details, Text))
        self.producers: dict[Any, tuple[str, str, str]] = {}  # id -> (canonical JSON, tool, version)
        for pid, t, v, c, h, a, s, f in conn.execute(
                select(_raw_id(ProducerRun.id), ProducerRun.tool, ProducerRun.version, ProducerRun.command,
                       ProducerRun.host, ProducerRun.accelerator, ProducerRun.started_at, ProducerRun.finished_at)):
            self.producers[pid] = (producer_json({"tool": t, "version": v, "command": c, "host": h, "accelerator": a,
                                                  "started_at": s, "finished_at": f}), t, v)
        self._deployment_rows = {did: (digest, fields) for did, digest, fields in conn.execute(
            select(_raw_id(Deployment.id), Deployment.digest, Deployment.fields))}
        # (id, canonical JSON version) -> (canonical JSON, digest); v1 and v2 rows may share a D
        self.deployments: dict[tuple[Any, int], tuple[str, str] | None] = {}
        self._stray_rows(head.seq)

    def deployment(self, deployment_id: Any, version: int) -> tuple[str, str] | None:
        """``(canonical JSON of {"digest", "fields"}, digest)`` of a stored D in one schema version's form."""
        key = (deployment_id, version)
        if key not in self.deployments:
            stored = self._deployment_rows.get(deployment_id)
            value = None
            if stored is not None:
                digest, fields = stored
                try:
                    value = (deployment_json(encoder_for_version(version)(fields), digest), digest)
                except (ValueError, TypeError):  # fields with no form in this version: the digest cannot match
                    value = ("null", digest)
            self.deployments[key] = value
        return self.deployments[key]

    def _stray_rows(self, head_seq: int) -> None:
        """Name every row whose seq the chain cannot cover: below 1 or beyond the head."""
        outside = ("the chain covers seq 1 to {0} and no bitcase write puts a row elsewhere, so it was inserted or "
                   "renumbered outside bitcase")
        for table, key, kind in ((EvidenceItem, EvidenceItem.record_id, KIND_EVIDENCE),
                                 (Review, Review.target, KIND_REVIEW),
                                 (BundleSignature, BundleSignature.key_id, KIND_SIGNATURE)):
            rows = self._session.connection().execute(
                select(table.seq, key).where(or_(table.seq < 1, table.seq > head_seq)).order_by(table.seq))
            for seq, name in rows:
                where = "beyond the chain head" if seq > head_seq else "before the chain's first position"
                self._faults.append(ChainFault(seq, kind, name, f"stray row {where}: "
                                               + outside.format(head_seq)))

    def windows(self) -> Iterator[ChainWindow]:
        """The chain's windows in seq order, verifying as they are read (stops after MAX_FAULTS)."""
        if self._head is None:
            return
        head_seq = self._head[0]
        for lo in range(1, head_seq + 1, WINDOW_ROWS):
            hi = min(lo + WINDOW_ROWS, head_seq + 1)
            window = ChainWindow()
            reviews = read_reviews(self._session, lo, hi, window.reviews)
            for seq, (kind, key, recomputed, content, prev, chain) in signature_window(self._session, lo, hi).items():
                reviews.setdefault(seq, []).append((kind, key, edited(recomputed, content), content, prev, chain))
            self._evidence_window(lo, hi, window, reviews)
            yield window
            if len(self._faults) >= MAX_FAULTS:
                return

    def report(self) -> ChainReport:
        """What the walk found (call after :meth:`windows` is exhausted); faults in seq order."""
        if self._head is None:
            return ChainReport(0, 0, "", tuple(self._faults))
        head_seq, head_digest = self._head
        faults = self._faults
        if not self._in_chain_faults and head_digest != self._prev:
            faults.append(ChainFault(head_seq, "head", "", "the chain head does not match the last row"))
        if len(faults) < MAX_FAULTS:
            faults = faults + check_signatures(session=self._session)
        ordered = sorted(faults, key=lambda f: f.seq)  # stable: a row's own fault before the head's
        return ChainReport(num_rows=self._num_rows, head_seq=head_seq, head_digest=head_digest,
                           faults=tuple(ordered[:MAX_FAULTS]))

    def _position(self, seq: int, found: list[Entry] | None) -> None:
        """Check the row(s) at one chain position (the general path: reviews, gaps, shared positions)."""
        if not found:
            self._fault(ChainFault(seq, "missing", "", "no row at this chain position: a row was deleted or renumbered"))
            return
        self._num_rows += len(found)
        kind, key, problem, stored_content, stored_prev, stored_chain = found[0]
        reason = problem
        if len(found) > 1:
            reason = (f"{len(found)} rows share this chain position "
                      f"({', '.join(f'{k} {n!r}' for k, n, *_ in found)}): all but one were inserted outside bitcase")
        elif reason is None and stored_prev != self._prev:
            reason = ("link to the previous row is broken: a row before it was deleted, inserted or "
                      "reordered, or its digest edited")
        elif reason is None and chain_link(stored_prev, seq, kind, stored_content) != stored_chain:
            reason = "its chain digest was altered (or the row moved to another position)"
        if reason is not None:
            self._fault(ChainFault(seq, kind, key, reason))
        self._prev = stored_chain

    def _fault(self, fault: ChainFault) -> None:
        self._faults.append(fault)
        self._in_chain_faults = True

    def _evidence_window(self, lo: int, hi: int, window: ChainWindow, reviews: dict[int, list[Entry]]) -> None:
        subjects_of = read_subjects(self._session, lo, hi)
        rows = self._session.connection().execute(  # Core: plain tuples, no ORM rows, for 100,000s of rows
            select(EvidenceItem.seq, EvidenceItem.record_id, EvidenceItem.category, EvidenceItem.obligation,
                   EvidenceItem.status, EvidenceItem.summary, EvidenceItem.produced_at, self._details,
                   _raw_id(EvidenceItem.producer_id), _raw_id(EvidenceItem.deployment_id),
                   EvidenceItem.content_digest, EvidenceItem.schema_id, EvidenceItem.prev_chain_digest,
                   EvidenceItem.chain_digest)
            .where((EvidenceItem.seq >= lo) & (EvidenceItem.seq < hi)).order_by(EvidenceItem.seq)).all()
        digest_of, link = ContentHasher().digest, chain_link
        producers, deployments, deployment_of = self.producers, self.deployments, self.deployment
        versions = SCHEMA_VERSIONS
        keep = window.evidence.append
        no_subjects = subjects_value(())
        expected = lo  # the next chain position not yet checked
        prev_chain, num_rows = self._prev, self._num_rows  # kept in locals on the common path (speed)
        for row in rows:
            (seq, record_id, category, obligation, status, summary, produced_at, details, producer_id,
             deployment_id, content, schema_id, prev, chain) = row
            subjects = subjects_of.get(seq, no_subjects)
            producer = producers.get(producer_id)
            version = versions.get(schema_id, 2)
            deployment = deployments[(deployment_id, version)] if (deployment_id, version) in deployments \
                else deployment_of(deployment_id, version)
            text = details
            if type(details) is bytes:  # SQLite (see __init__)
                try:
                    text = details.decode("utf-8")
                except UnicodeDecodeError:
                    text = ""  # named by the general path
            digest = digest_of(schema_id=schema_id, record_id=record_id, category=category, obligation=obligation,
                               status=status, summary=summary, produced_at=produced_at,
                               producer=producer[0] if producer else "null",
                               deployment=deployment[0] if deployment else "null", subjects=subjects[1],
                               details=text if text is not None else "null")
            if (seq == expected and digest == content and prev == prev_chain and seq not in reviews
                    and link(prev, seq, KIND_EVIDENCE, content) == chain):
                keep((row, text, subjects, producer, deployment))
                prev_chain, num_rows, expected = chain, num_rows + 1, seq + 1
                continue
            self._prev, self._num_rows = prev_chain, num_rows  # the general path names what is wrong
            expected = self._irregular(row, expected, reviews, digest, keep, (text, subjects, producer, deployment))
            prev_chain, num_rows = self._prev, self._num_rows
        self._prev, self._num_rows = prev_chain, num_rows
        while expected < hi:
            self._position(expected, reviews.pop(expected, None))
            expected += 1

    def _irregular(self, row: Any, expected: int, reviews: dict[int, list[Entry]], digest: str, keep: Any,
                   parts: tuple[str, Subjects, Any, Any]) -> int:
        """Check an evidence row off the common path; return the next position to check."""
        seq, record_id, details, content, prev, chain = row[0], row[1], row[7], row[10], row[12], row[13]
        while expected < seq:
            self._position(expected, reviews.pop(expected, None))
            expected += 1
        if seq < expected:  # a second evidence row at one position: only with the primary key dropped
            self._num_rows += 1
            self._fault(ChainFault(seq, KIND_EVIDENCE, record_id, "another evidence row holds this chain "
                                   "position too: all but one were inserted outside bitcase"))
            return expected
        problem = None
        if type(details) is bytes:
            try:
                details.decode("utf-8")
            except UnicodeDecodeError as exc:
                problem = unreadable("details", f"stored as bytes that are not UTF-8 text (byte {exc.start})")
        if problem is None:
            problem = edited(digest, content)
            keep((row, *parts))
        self._position(seq, reviews.pop(seq, []) + [(KIND_EVIDENCE, record_id, problem, content, prev, chain)])
        return seq + 1


def verify_chain(*, session: Session) -> ChainReport:
    """Recompute the whole chain; the report lists faults in seq order (empty when intact)."""
    walk = ChainWalk(session)
    for _window in walk.windows():
        pass
    return walk.report()

