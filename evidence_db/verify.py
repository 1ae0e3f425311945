"""Recomputing the hash chain to detect rows edited, deleted, inserted or reordered outside bitcase.

Walks the chain in ``seq`` windows (bounded memory), recomputes every row's content digest
from its stored columns (joined producer, deployment and subjects included) and every link,
and compares the last link with the chain head; then re-verifies every stored signature
(``evidence_db.signatures``). After a fault it resynchronises on the
stored digests, so each damaged row is reported once rather than everything after it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import String, Text, cast, func, select, type_coerce
from sqlalchemy.orm import Session

from evidence_db.bundle import SCHEMA_VERSIONS
from evidence_db.canonical import encoder_for_version
from evidence_db.chain import (GENESIS_DIGEST, KIND_EVIDENCE, KIND_REVIEW, chain_link, content_digest_of_text,
                               deployment_json, evidence_content_json, producer_json, review_content,
                               review_digest, subjects_json)
from evidence_db.engine import PG_LOCK_KEY
from evidence_db.models import (MAIN_CHAIN, BundleSignature, ChainHead, Deployment, EvidenceItem, ProducerRun, Review,
                                Subject)
from evidence_db.signatures import check_signatures, signature_window
from evidence_db.views import ChainFault, ChainReport

__all__ = ["verify_chain", "WINDOW_ROWS", "MAX_FAULTS"]

WINDOW_ROWS = 20_000
MAX_FAULTS = 50

# (kind, key, recomputed content digest, stored content digest, stored prev, stored chain)
Entry = tuple[str, str, str, str, str, str]


def _raw_id(column: Any) -> Any:
    """A UUID column as the driver returns it (no per-row UUID objects: they cost most of a verify)."""
    return type_coerce(column, String)


def verify_chain(*, session: Session) -> ChainReport:
    """Recompute the whole chain; the report lists faults in seq order (empty when intact).

    Reads one consistent state: SQLite reads from one snapshot; on PostgreSQL verification
    holds the write lock in shared mode, so appends wait until it is done.
    """
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock_shared({PG_LOCK_KEY})")
    head = session.execute(select(ChainHead.seq, ChainHead.chain_digest)
                           .where(ChainHead.name == MAIN_CHAIN)).one_or_none()
    if head is None:
        return ChainReport(0, 0, "", (ChainFault(0, "head", "", "the chain head row is missing"),))
    last_seq = max(head.seq, *(session.scalar(select(func.coalesce(func.max(model.seq), 0)))
                               for model in (EvidenceItem, Review, BundleSignature)))
    producers = {pid: producer_json({"tool": t, "version": v, "command": c, "host": h, "accelerator": a,
                                     "started_at": s, "finished_at": f})
                 for pid, t, v, c, h, a, s, f in session.execute(
                     select(_raw_id(ProducerRun.id), ProducerRun.tool, ProducerRun.version, ProducerRun.command,
                            ProducerRun.host, ProducerRun.accelerator, ProducerRun.started_at,
                            ProducerRun.finished_at))}
    deployments = _Deployments(session.execute(select(_raw_id(Deployment.id), Deployment.digest,
                                                      Deployment.fields)).all())
    faults: list[ChainFault] = []
    prev = GENESIS_DIGEST
    num_rows = 0
    for lo in range(1, last_seq + 1, WINDOW_ROWS):
        hi = min(lo + WINDOW_ROWS, last_seq + 1)
        evidence = _evidence_window(session, lo, hi, producers, deployments)
        reviews = _review_window(session, lo, hi)
        signatures = signature_window(session, lo, hi)
        for seq in range(lo, hi):
            found = [e for e in (evidence.get(seq), reviews.get(seq), signatures.get(seq)) if e is not None]
            if not found:
                faults.append(ChainFault(seq, "missing", "", "no row at this chain position: a row was deleted "
                                         "or renumbered"))
                continue
            num_rows += len(found)
            kind, key, recomputed, stored_content, stored_prev, stored_chain = found[0]
            reason = None
            if len(found) > 1:
                reason = f"{' and '.join(e[0] for e in found)} rows share this chain position"
            elif recomputed != stored_content:
                reason = f"content was edited: it hashes to {recomputed}, the row says {stored_content}"
            elif stored_prev != prev:
                reason = ("link to the previous row is broken: a row before it was deleted, inserted or "
                          "reordered, or its digest edited")
            elif chain_link(stored_prev, seq, kind, recomputed) != stored_chain:
                reason = "its chain digest was altered (or the row moved to another position)"
            if reason is not None:
                faults.append(ChainFault(seq, kind, key, reason))
            prev = stored_chain
        if len(faults) >= MAX_FAULTS:
            break
    if not faults and (head.seq != last_seq or head.chain_digest != prev):
        reason = ("rows after the chain head were added outside bitcase" if last_seq > head.seq
                  else "the chain head does not match the last row")
        faults.append(ChainFault(min(head.seq + 1, last_seq), "head", "", reason))
    if len(faults) < MAX_FAULTS:
        faults = sorted(faults + check_signatures(session=session), key=lambda f: f.seq)
    return ChainReport(num_rows=num_rows, head_seq=head.seq, head_digest=head.chain_digest,
                       faults=tuple(faults[:MAX_FAULTS]))


class _Deployments:
    """Canonical JSON of each stored deployment, per schema version (v1 and v2 rows may share one)."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = {did: (digest, fields) for did, digest, fields in rows}
        self._texts: dict[tuple[Any, int], str] = {}

    def text(self, deployment_id: Any, version: int) -> str:
        key = (deployment_id, version)
        if key not in self._texts:
            if deployment_id not in self._rows:
                return "null"  # a dangling reference: the content digest then cannot match
            digest, fields = self._rows[deployment_id]
            try:
                self._texts[key] = deployment_json(encoder_for_version(version)(fields), digest)
            except (ValueError, TypeError):  # fields without a form in this version: cannot match
                self._texts[key] = "null"
        return self._texts[key]


def _evidence_window(session: Session, lo: int, hi: int, producers: dict[Any, str],
                     deployments: _Deployments) -> dict[int, Entry]:
    in_window = (EvidenceItem.seq >= lo) & (EvidenceItem.seq < hi)
    subjects: dict[int, list[tuple[str, str]]] = defaultdict(list)
    conn = session.connection()  # Core execution: no ORM row processing for 100,000s of plain rows
    for seq, uri, sha in conn.execute(
            select(Subject.evidence_seq, Subject.uri, Subject.sha256)
            .where((Subject.evidence_seq >= lo) & (Subject.evidence_seq < hi))
            .order_by(Subject.evidence_seq, Subject.position)):
        subjects[seq].append((uri, sha))
    rows = conn.execute(
        select(EvidenceItem.seq, EvidenceItem.record_id, EvidenceItem.schema_id,
               EvidenceItem.category, EvidenceItem.obligation, EvidenceItem.status, EvidenceItem.summary,
               EvidenceItem.produced_at, cast(EvidenceItem.details, Text), _raw_id(EvidenceItem.producer_id),
               _raw_id(EvidenceItem.deployment_id), EvidenceItem.content_digest, EvidenceItem.prev_chain_digest,
               EvidenceItem.chain_digest).where(in_window))
    window: dict[int, Entry] = {}
    for (seq, record_id, schema_id, category, obligation, status, summary, produced_at, details,
         producer_id, deployment_id, content, prev, chain) in rows:
        text = evidence_content_json(
            schema_id=schema_id, record_id=record_id, category=category, obligation=obligation, status=status,
            summary=summary, produced_at=produced_at, producer=producers.get(producer_id, "null"),
            deployment=deployments.text(deployment_id, SCHEMA_VERSIONS.get(schema_id, 2)),
            subjects=subjects_json(subjects.get(seq, ())),
            details=details)
        window[seq] = (KIND_EVIDENCE, record_id, content_digest_of_text(text), content, prev, chain)
    return window


def _review_window(session: Session, lo: int, hi: int) -> dict[int, Entry]:
    rows = session.execute(select(Review).where((Review.seq >= lo) & (Review.seq < hi))).scalars()
    window: dict[int, Entry] = {}
    for r in rows:
        content = review_content(target=r.target, target_digest=r.target_digest, decision=r.decision,
                                 reviewer=r.reviewer, rationale=r.rationale, expires=r.expires,
                                 created_at=r.created_at, schema_id=r.schema_id, signer_key_id=r.signer_key_id)
        try:
            recomputed = review_digest(content)
        except KeyError:  # a schema id no version defines: the row cannot be verified
            recomputed = f"(no digest rule for schema {r.schema_id!r})"
        window[r.seq] = (KIND_REVIEW, r.target, recomputed, r.content_digest, r.prev_chain_digest, r.chain_digest)
    return window
