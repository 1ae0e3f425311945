"""Data access for evidence: append records, read them back as views.

Every function takes keyword-only arguments and a :class:`~sqlalchemy.orm.Session` from
:func:`evidence_db.session.open_session` (use ``write=True`` to append). They neither commit
nor roll back: the session's owner decides, so a whole ``bitcase ingest`` is one transaction.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Iterable

from sqlalchemy import LargeBinary, Text, case, cast, func, null, or_, select
from sqlalchemy.orm import Session

from evidence_db.appender import LOOKUP_CHUNK, ChainAppender
from evidence_db.bundle import EvidenceRecord
from evidence_db.bundle_sig import BundleSignature
from evidence_db.chain import iso_utc
from evidence_db.coverage import in_chain
from evidence_db.errors import StoreDamaged
from evidence_db.models import Deployment, EvidenceItem, ProducerRun, Subject
from evidence_db.bundle import SCHEMA_ID
from evidence_db.prepare import PreparedRecord, Preparer
from evidence_db.signatures import append_signature
from evidence_db.views import DeploymentView, DetailsFilter, EvidenceView, IngestResult, SubjectView

__all__ = ["ingest_records", "ingest_prepared", "load_evidence", "load_details", "count_elsewhere", "list_deployments",
           "BATCH_SIZE"]

BATCH_SIZE = 2000  # records per executemany; bounds memory when streaming huge bundles


def ingest_prepared(*, session: Session, records: Iterable[PreparedRecord],
                    signature: BundleSignature | None = None) -> IngestResult:
    """Append prepared records in batches to the hash chain; see :func:`ingest_records`.

    With the ``signature`` of their bundle (already verified), the records must be the signed
    ones (else :class:`~evidence_db.errors.SignatureError`), and the signature is chained after them.
    """
    appender = ChainAppender(session)
    if signature is not None:
        appender.record_seqs = []
        records = signature.watch(records)
    total = IngestResult(0, 0)
    iterator = iter(records)
    while batch := list(itertools.islice(iterator, BATCH_SIZE)):
        total += appender.append_evidence(batch)
    if signature is not None:
        append_signature(session=session, appender=appender, signature=signature, evidence_seqs=appender.record_seqs)
        total = IngestResult(total.added, total.unchanged, signature.key_id)
    appender.finish()
    return total


def ingest_records(*, session: Session, records: Iterable[EvidenceRecord]) -> IngestResult:
    """Append evidence records to the store in the session's transaction.

    Each record is validated against bundle schema v2 and appended to the hash chain in input
    order. A record whose id is already stored with the same content digest is a no-op
    (counted in ``unchanged``); the same id with different content raises
    :class:`~evidence_db.errors.RecordConflict`, and a bad record raises
    :class:`~evidence_db.errors.BundleError`. Callers roll back on those (``open_session``
    does), so a failed call stores nothing.
    """
    prepare = Preparer()
    prepared = (prepare(_json_dict(record), f"record {index + 1}") for index, record in enumerate(records))
    return ingest_prepared(session=session, records=prepared)


def _json_dict(record: EvidenceRecord) -> dict[str, Any]:
    """``record.to_json_dict()`` without its deep copy (nothing downstream mutates it)."""
    if not isinstance(record, EvidenceRecord):
        raise TypeError(f"ingest_records takes EvidenceRecord objects, not {type(record).__name__}")
    p, d = record.producer, record.deployment
    return {
        "schema": SCHEMA_ID, "id": record.id, "category": record.category, "obligation": record.obligation,
        "status": record.status, "summary": record.summary,
        "producer": {"tool": p.tool, "version": p.version, "command": p.command, "host": p.host,
                     "accelerator": p.accelerator, "started_at": p.started_at, "finished_at": p.finished_at},
        "deployment": {"fields": d.fields, "digest": d.digest},
        "subjects": [{"uri": s.uri, "sha256": s.sha256} for s in record.subjects],
        "details": record.details, "produced_at": record.produced_at,
    }


def load_evidence(*, session: Session, deployment_digest: str | None = None,
                  with_details: bool | DetailsFilter = True) -> list[EvidenceView]:
    """Every stored evidence item in chain (ingest) order, optionally only those of one deployment.

    Only rows the chain covers are read (:func:`evidence_db.coverage.in_chain`); this read does
    not verify them: verdicts read through :func:`evidence_db.verified_read.read_verified`.

    ``with_details`` says whose ``details`` are decoded: everyone's (``True``), no one's
    (``False``: every view gets ``{}``), or only the items a :class:`DetailsFilter` selects,
    chosen in the query so the rest are neither sent nor decoded. Fetch the details of other
    items later with :func:`load_details`.
    """
    conn = session.connection()  # Core execution: plain tuples, no ORM objects, for 100,000s of rows
    query = (select(EvidenceItem.record_id, EvidenceItem.category, EvidenceItem.obligation, EvidenceItem.status,
                    EvidenceItem.summary, EvidenceItem.produced_at, EvidenceItem.content_digest, EvidenceItem.seq,
                    ProducerRun.tool, ProducerRun.version,
                    _details_column(with_details, is_sqlite=conn.dialect.name == "sqlite"))
             .join(ProducerRun, EvidenceItem.producer_id == ProducerRun.id)
             .where(in_chain(EvidenceItem.seq))
             .order_by(EvidenceItem.seq))
    subject_query = (select(Subject.evidence_seq, Subject.uri, Subject.sha256).where(in_chain(Subject.evidence_seq))
                     .order_by(Subject.evidence_seq, Subject.position))
    if deployment_digest is None:
        query = query.add_columns(Deployment.digest).join(Deployment, EvidenceItem.deployment_id == Deployment.id)
    else:
        in_d = EvidenceItem.deployment_id == (select(Deployment.id).where(Deployment.digest == deployment_digest)
                                              .scalar_subquery())
        query = query.add_columns(null()).where(in_d)  # every row's is deployment_digest
        subject_query = subject_query.where(Subject.evidence_seq.in_(select(EvidenceItem.seq).where(in_d)))
    rows = conn.execute(query).all()  # items first: subjects committed later belong to items not read
    subjects = _subjects_by_seq(conn.execute(subject_query).all())
    no_subjects = ()
    return [EvidenceView(record_id, category, obligation, status, summary, deployment or deployment_digest,
                         produced_at, content_digest, tool, version, subjects.get(seq, no_subjects),
                         _decoded(details, record_id, seq) if details else {}, seq)
            for (record_id, category, obligation, status, summary, produced_at, content_digest, seq, tool, version,
                 details, deployment) in rows]


def _decoded(details: str | bytes, record_id: str, seq: int) -> dict[str, Any]:
    """Stored ``details`` as a dict; :class:`StoreDamaged` naming the row when no ingest could have written it."""
    try:
        value = json.loads(details.decode("utf-8") if isinstance(details, bytes) else details)
    except ValueError:  # UnicodeDecodeError included
        value = None
    if not isinstance(value, dict):
        kind = "a blob of bytes" if isinstance(details, bytes) else "text"
        raise StoreDamaged(f"evidence item {record_id!r} (chain seq {seq}): its details column holds {kind} that is "
                           "not a JSON object, which no bitcase ingest writes",
                           hint="run `bitcase audit verify` and restore the store from a backup")
    return value


def _details_column(with_details: bool | DetailsFilter, *, is_sqlite: bool) -> Any:
    """The stored ``details`` where ``with_details`` wants it, else NULL.

    On SQLite they are read as bytes (``CAST AS BLOB``): a blob written there by raw SQL that is
    not UTF-8 would otherwise fail the whole read inside the driver, without naming the row.
    Keys are matched as ``"key"`` in the stored JSON text: the same SQL on SQLite and
    PostgreSQL, without either's JSON functions.
    """
    text = cast(EvidenceItem.details, Text)
    stored = cast(EvidenceItem.details, LargeBinary) if is_sqlite else text
    if isinstance(with_details, bool):
        return stored if with_details else null()
    wanted = [EvidenceItem.status.in_(sorted(with_details.statuses))] if with_details.statuses else []
    wanted += [text.contains(f'"{key}"', autoescape=True) for key in with_details.keys]
    return case((or_(*wanted), stored), else_=null()) if wanted else null()


def _subjects_by_seq(rows: Iterable[tuple[int, str, str]]) -> dict[int, tuple[SubjectView, ...]]:
    """Subject rows (ordered by item, then position) as one tuple per item.

    Items mostly name the same few subjects, so equal subjects share one view.
    """
    shared: dict[tuple[str, str], SubjectView] = {}
    by_seq: dict[int, tuple[SubjectView, ...]] = {}
    for seq, uri, sha in rows:
        view = shared.get((uri, sha))
        if view is None:
            view = shared[(uri, sha)] = SubjectView(uri=uri, sha256=sha)
        held = by_seq.get(seq)
        by_seq[seq] = (view,) if held is None else held + (view,)
    return by_seq


def count_elsewhere(*, session: Session, deployment_digest: str) -> dict[str, int]:
    """How many stored items each obligation has under deployment configurations other than this one."""
    rows = session.connection().execute(
        select(EvidenceItem.obligation, func.count())
        .join(Deployment, EvidenceItem.deployment_id == Deployment.id)
        .where(Deployment.digest != deployment_digest, in_chain(EvidenceItem.seq))
        .group_by(EvidenceItem.obligation))
    return {obligation: count for obligation, count in rows}


def load_details(*, session: Session, item_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The ``details`` of the given evidence items, by record id (ids not stored are left out)."""
    found: dict[str, dict[str, Any]] = {}
    ids = sorted(set(item_ids))
    for start in range(0, len(ids), LOOKUP_CHUNK):
        conn = session.connection()
        rows = conn.execute(select(EvidenceItem.record_id, EvidenceItem.seq,
                                   _details_column(True, is_sqlite=conn.dialect.name == "sqlite"))
                            .where(EvidenceItem.record_id.in_(ids[start:start + LOOKUP_CHUNK]))
                            .where(in_chain(EvidenceItem.seq)))
        found.update((record_id, _decoded(details, record_id, seq)) for record_id, seq, details in rows)
    return found


def list_deployments(*, session: Session) -> list[DeploymentView]:
    """Every deployment configuration evidence was ingested under, oldest first."""
    rows = session.execute(select(Deployment.digest, Deployment.fields, Deployment.first_seen)
                           .order_by(Deployment.first_seen, Deployment.digest))
    return [DeploymentView(digest=digest, fields=fields, first_seen=iso_utc(first_seen))
            for digest, fields, first_seen in rows]
