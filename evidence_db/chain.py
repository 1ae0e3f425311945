"""The store's hash chain: content digests of rows and the links between them.

One chain runs over evidence items, reviews and bundle signatures together, in ``seq`` order (1, 2, 3, …). Each
row stores

* ``content_digest``: ``sha256:`` of the canonical JSON of what the row says. For an evidence
  item that is exactly :meth:`evidence_db.bundle.EvidenceRecord.content_digest` of the record
  it was ingested from; for a review it is the digest of :func:`review_content`.
* ``prev_chain_digest``: the ``chain_digest`` of row ``seq - 1`` (:data:`GENESIS_DIGEST` for
  seq 1), and
* ``chain_digest = sha256("<prev_chain_digest>\\n<seq>\\n<kind>\\n<content_digest>")`` with
  ``kind`` ``evidence``, ``review`` or ``signature``.

The ``chain_heads`` row holds the last seq and its chain digest, so deleting the newest rows
is detected too. The chain is versioned row by row: every row names its schema (``schema_id``
of evidence items and of reviews), and the schema's version fixes the canonical JSON of its
content digest (v1: Python's sorted ``json``; v2: RFC 8785). The schema id is itself part of
the hashed content, so a row's version cannot be changed without breaking its digest; the
link formula is the same for both (it hashes ASCII text, not JSON).

The canonical JSON of an evidence item is assembled from pre-encoded parts (producer and
deployment once per distinct value) because that is what makes ingesting and verifying 100,000
items take seconds; it is byte-identical to the canonical JSON of the record under its
version's rule (``encoder_for_version``), tested against the ``rfc8785`` package for v2.
"""

from __future__ import annotations

import hashlib
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from datetime import date, datetime, timezone
from typing import Any, Iterable

from evidence_db.canonical import DIGEST_PREFIX, canonical_json, encoder_for_version
from evidence_db.models import GENESIS_DIGEST

__all__ = ["GENESIS_DIGEST", "KIND_EVIDENCE", "KIND_REVIEW", "KIND_SIGNATURE", "REVIEW_SCHEMA_ID",
           "REVIEW_SCHEMA_ID_V1", "REVIEW_SCHEMA_VERSIONS", "review_digest", "chain_link",
           "evidence_content_json", "ContentHasher", "producer_json", "deployment_json", "subjects_json",
           "review_content", "content_digest_of_text", "iso_utc"]

KIND_EVIDENCE = "evidence"
KIND_REVIEW = "review"
KIND_SIGNATURE = "signature"  # a bundle signature (evidence_db.signatures)
REVIEW_SCHEMA_ID = "bitcase.review/v2"
REVIEW_SCHEMA_ID_V1 = "bitcase.review/v1"
REVIEW_SCHEMA_VERSIONS = {REVIEW_SCHEMA_ID_V1: 1, REVIEW_SCHEMA_ID: 2}  # schema id -> canonical JSON version


def chain_link(prev_chain_digest: str, seq: int, kind: str, content_digest: str) -> str:
    """The chain digest of row ``seq`` given the previous row's chain digest."""
    data = f"{prev_chain_digest}\n{seq}\n{kind}\n{content_digest}".encode("ascii")
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def content_digest_of_text(canonical_text: str) -> str:
    """``sha256:`` of an already canonical JSON text."""
    return DIGEST_PREFIX + hashlib.sha256(canonical_text.encode("utf-8")).hexdigest()


def producer_json(producer: dict[str, str]) -> str:
    """Canonical JSON of a producer object (the seven fields of :class:`bundle.Producer`)."""
    return canonical_json(producer)


def deployment_json(fields_json: str, digest: str) -> str:
    """Canonical JSON of ``{"digest": …, "fields": …}`` given the canonical JSON of the fields."""
    return f'{{"digest":{canonical_json(digest)},"fields":{fields_json}}}'


def subjects_json(subjects: Iterable[tuple[str, str]]) -> str:
    """Canonical JSON of the subjects list, from ``(uri, sha256)`` pairs in record order."""
    enc = encode_basestring
    parts = [f'{{"sha256":{enc(sha)},"uri":{enc(uri)}}}' for uri, sha in subjects]
    return "[" + ",".join(parts) + "]"


def evidence_content_json(*, schema_id: str, record_id: str, category: str, obligation: str, status: str,
                          summary: str, produced_at: str, producer: str, deployment: str, subjects: str,
                          details: str) -> str:
    """Canonical JSON of an evidence record; ``producer`` … ``details`` are canonical JSON texts."""
    return _content_head(category, deployment) + _content_tail(
        schema_id=schema_id, record_id=record_id, obligation=obligation, status=status, summary=summary,
        produced_at=produced_at, producer=producer, subjects=subjects, details=details)


def _content_head(category: str, deployment: str) -> str:
    """The start of an evidence record's canonical JSON: the keys before ``details`` (sorted order)."""
    return f'{{"category":{encode_basestring(category)},"deployment":{deployment},'


def _content_tail(*, schema_id: str, record_id: str, obligation: str, status: str, summary: str,
                  produced_at: str, producer: str, subjects: str, details: str) -> str:
    enc = encode_basestring  # canonical JSON of a str, without the encoder's per-call overhead
    return (f'"details":{details},"id":{enc(record_id)},"obligation":{enc(obligation)},'
            f'"produced_at":{enc(produced_at)},"producer":{producer},"schema":{enc(schema_id)},'
            f'"status":{enc(status)},"subjects":{subjects},"summary":{enc(summary)}}}')


class ContentHasher:
    """``content_digest_of_text(evidence_content_json(...))``, without hashing the deployment each time.

    The deployment text (several kilobytes with a kernel plan) comes right after the category
    at the start of every record's canonical JSON, so the SHA-256 state after each distinct
    ``{"category":…,"deployment":…,`` start is kept and copied: the same bytes are hashed,
    the shared start only once.
    """

    MAX_HEADS = 64  # distinct (category, deployment) starts kept

    def __init__(self) -> None:
        self._heads: dict[tuple[str, str], Any] = {}  # (category, deployment JSON) -> sha256 state

    def digest(self, *, schema_id: str, record_id: str, category: str, obligation: str, status: str,
               summary: str, produced_at: str, producer: str, deployment: str, subjects: str, details: str) -> str:
        """The content digest of the record these canonical parts make up."""
        head = self._heads.get((category, deployment))
        if head is None:
            if len(self._heads) >= self.MAX_HEADS:
                self._heads.clear()
            head = self._heads[(category, deployment)] = hashlib.sha256(
                _content_head(category, deployment).encode("utf-8"))
        state = head.copy()
        state.update(_content_tail(schema_id=schema_id, record_id=record_id, obligation=obligation, status=status,
                                   summary=summary, produced_at=produced_at, producer=producer, subjects=subjects,
                                   details=details).encode("utf-8"))
        return DIGEST_PREFIX + state.hexdigest()


def iso_utc(moment: datetime) -> str:
    """A timestamp as ISO 8601 UTC with microseconds and ``Z`` (naive means UTC: SQLite)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def review_content(*, target: str, target_digest: str, decision: str, reviewer: str, rationale: str,
                   expires: date | None, created_at: datetime, schema_id: str = REVIEW_SCHEMA_ID,
                   signer_key_id: str | None = None) -> dict[str, Any]:
    """What a review says, as hashed into the chain (and signed, for a signed review).

    A signed review's content also names the signer's key id; an unsigned one's has no
    ``signer`` key, so its digest is what it always was.
    """
    content = {
        "schema": schema_id,
        "target": target,
        "target_digest": target_digest,
        "decision": decision,
        "reviewer": reviewer,
        "rationale": rationale,
        "expires": expires.isoformat() if expires is not None else None,
        "created_at": iso_utc(created_at),
    }
    if signer_key_id is not None:
        content["signer"] = signer_key_id
    return content


def review_digest(content: dict[str, Any]) -> str:
    """The content digest of :func:`review_content`, by the canonical JSON of its schema's version.

    Raises :class:`KeyError` for a schema id that is not a review schema.
    """
    encode = encoder_for_version(REVIEW_SCHEMA_VERSIONS[content["schema"]])
    return content_digest_of_text(encode(content))
