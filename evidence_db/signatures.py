"""Signatures in the store: bundle signatures as chain rows, and re-checking every stored signature.

A signed bundle's ingest appends, after its records, one ``bundle_signatures`` row whose
content is the DSSE envelope (chained as kind ``signature``) and ``signed_evidence`` rows
naming the items it covers. :func:`check_signatures` re-verifies from the store alone: each
envelope against the public key it names, the items linked to it against its records digest,
and each signed review against its key. So a writer of the database without the private key
cannot attach a signature to other records, move one, or forge one; removing a signature row
breaks the chain, and removing a review's signature leaves its chained ``signer`` unmatched.
Whether a key is *trusted* is not the store's to say: see ``evidence_db.keyring``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from cryptography.exceptions import InvalidSignature
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from evidence_db.appender import ChainAppender
from evidence_db.bundle_sig import BundleSignature, records_digest, statement_fields
from evidence_db.canonical import canonical_json, digest_of
from evidence_db.chain import KIND_SIGNATURE, review_content
from evidence_db.coverage import in_chain
from evidence_db.dsse import EnvelopeError, envelope_from_json, pae
from evidence_db.keys import KeyFormatError, PublicKey, parse_public_line
from evidence_db.models import BundleSignature as SignatureRow
from evidence_db.models import EvidenceItem, Review, SignedEvidence
from evidence_db.views import ChainFault

__all__ = ["SIGNATURE_SCHEMA_ID", "REVIEW_PAYLOAD_TYPE", "SignerView", "signature_content", "append_signature",
           "signature_window", "check_signatures", "list_signers", "evidence_signers", "review_payload"]

SIGNATURE_SCHEMA_ID = "bitcase.bundle-signature/v1"
REVIEW_PAYLOAD_TYPE = "application/vnd.bitcase.review+json"


@dataclass(frozen=True, slots=True)
class SignerView:
    """A key that signed stored bundles: how many signatures, and the items they cover (per signature)."""

    key_id: str
    name: str  # as the signer named itself (trust decides the identity that counts)
    num_signatures: int
    num_items: int


def signature_content(envelope_json: dict[str, Any]) -> dict[str, Any]:
    """What a bundle signature row says, as hashed into the chain."""
    return {"schema": SIGNATURE_SCHEMA_ID, "envelope": envelope_json}


def review_payload(content: dict[str, Any]) -> bytes:
    """The bytes a review signature signs: DSSE PAE of the review's canonical content."""
    return pae(REVIEW_PAYLOAD_TYPE, canonical_json(content).encode("utf-8"))


def append_signature(*, session: Session, appender: ChainAppender, signature: BundleSignature,
                     evidence_seqs: Iterable[int]) -> int:
    """Chain the bundle's signature after its records and link the items; return its seq.

    The same envelope already stored (the same signed bundle again) is a no-op.
    """
    envelope_json = signature.envelope.to_json()
    digest = digest_of(signature_content(envelope_json))
    stored = session.scalar(select(SignatureRow.seq).where(SignatureRow.content_digest == digest))
    if stored is not None:
        return stored
    seq, prev, chain = appender.link(KIND_SIGNATURE, digest)
    session.execute(insert(SignatureRow).values(
        seq=seq, key_id=signature.key_id, public_key=signature.signer.openssh, envelope=canonical_json(envelope_json),
        num_records=signature.num_records, records_digest=signature.records_digest, content_digest=digest,
        prev_chain_digest=prev, chain_digest=chain))
    links = [(seq, item) for item in sorted(set(evidence_seqs))]
    if links:  # driver executemany: ORM bulk insert of 100,000 links cost more than the signature check
        conn = session.connection()
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        conn.exec_driver_sql(f"INSERT INTO signed_evidence (signature_seq, evidence_seq) VALUES ({mark}, {mark})",
                             links)
    return seq


def signature_window(session: Session, lo: int, hi: int) -> dict[int, tuple[str, str, str, str, str, str]]:
    """Chain entries of the signature rows with ``lo <= seq < hi``, as ``evidence_db.verify`` walks them."""
    rows = session.execute(select(SignatureRow.seq, SignatureRow.key_id, SignatureRow.envelope,
                                  SignatureRow.content_digest, SignatureRow.prev_chain_digest, SignatureRow.chain_digest)
                           .where((SignatureRow.seq >= lo) & (SignatureRow.seq < hi)))
    window = {}
    for seq, key_id, envelope, content, prev, chain in rows:
        try:
            recomputed = digest_of(signature_content(json.loads(envelope)))
        except ValueError:
            recomputed = "(the stored envelope is not JSON)"
        window[seq] = (KIND_SIGNATURE, key_id, recomputed, content, prev, chain)
    return window


def check_signatures(*, session: Session) -> list[ChainFault]:
    """Every stored bundle and review signature that does not verify, in seq order."""
    linked: dict[int, list[str]] = defaultdict(list)
    for sig_seq, content in session.connection().execute(
            select(SignedEvidence.signature_seq, EvidenceItem.content_digest)
            .join(EvidenceItem, EvidenceItem.seq == SignedEvidence.evidence_seq)):
        linked[sig_seq].append(content)
    faults = [ChainFault(row.seq, KIND_SIGNATURE, row.key_id, reason)
              for row in session.execute(select(SignatureRow).order_by(SignatureRow.seq)).scalars()
              if (reason := _bundle_signature_problem(row, linked.get(row.seq, [])))]
    faults += [ChainFault(row.seq, "review", row.target, reason)
               for row in session.execute(select(Review).where(Review.signer_key_id.is_not(None) |
                                                               Review.signature.is_not(None) |
                                                               Review.signer_public_key.is_not(None))
                                          .order_by(Review.seq)).scalars()
               if (reason := _review_signature_problem(row))]
    return sorted(faults, key=lambda f: f.seq)


def _bundle_signature_problem(row: SignatureRow, content_digests: list[str]) -> str | None:
    try:
        envelope = envelope_from_json(json.loads(row.envelope))
        signer, num_records, digest, _ = statement_fields(json.loads(envelope.payload.decode("utf-8")))
    except (EnvelopeError, KeyFormatError, ValueError, UnicodeDecodeError) as exc:
        return f"the stored signature envelope is malformed ({exc})"
    if not envelope.verify(signer):
        return f"the signature by {envelope.key_id} does not verify: its statement was altered"
    if (row.key_id, row.public_key, row.num_records, row.records_digest) != (signer.key_id, signer.openssh,
                                                                              num_records, digest):
        return "the signature row's columns disagree with its signed statement"
    if records_digest(content_digests) != digest:
        return (f"the {len(content_digests)} items linked to it are not the ones {signer.key_id} signed: "
                "items were linked, unlinked or swapped")
    return None


def _review_signature_problem(row: Review) -> str | None:
    if row.signer_key_id is None or row.signature is None or row.signer_public_key is None:
        return "a signed review lost part of its signature (key id, public key or signature missing)"
    try:
        key = parse_public_line(row.signer_public_key)
        signature = base64.b64decode(row.signature, validate=True)
    except (KeyFormatError, ValueError, binascii.Error):
        return "the review's public key or signature is malformed"
    if key.key_id != row.signer_key_id:
        return f"the review's public key is not {row.signer_key_id}: the key was swapped"
    content = review_content(target=row.target, target_digest=row.target_digest, decision=row.decision,
                             reviewer=row.reviewer, rationale=row.rationale, expires=row.expires,
                             created_at=row.created_at, schema_id=row.schema_id, signer_key_id=row.signer_key_id)
    if not _verifies(key, signature, review_payload(content)):
        return f"the review's signature by {row.signer_key_id} does not verify: the review was altered"
    return None


def _verifies(key: PublicKey, signature: bytes, message: bytes) -> bool:
    try:
        key.raw.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def list_signers(*, session: Session) -> list[SignerView]:
    """Every key that signed stored bundles, by key id."""
    rows = session.execute(select(SignatureRow.key_id, SignatureRow.envelope, func.count(SignedEvidence.evidence_seq))
                           .outerjoin(SignedEvidence, SignedEvidence.signature_seq == SignatureRow.seq)
                           .where(in_chain(SignatureRow.seq)).group_by(SignatureRow.seq).order_by(SignatureRow.key_id, SignatureRow.seq))
    by_key: dict[str, list[Any]] = {}
    for key_id, envelope, num_items in rows:
        entry = by_key.setdefault(key_id, [_signer_name(envelope), 0, 0])
        entry[1] += 1
        entry[2] += num_items
    return [SignerView(key_id, name, num_sigs, num_items) for key_id, (name, num_sigs, num_items) in by_key.items()]


def evidence_signers(*, session: Session, evidence_seqs: Iterable[int]) -> dict[int, tuple[str, str]]:
    """``{evidence seq: (key id, signed-as name)}`` for those of these items a stored bundle signature covers."""
    seqs = sorted(set(evidence_seqs))
    found: dict[int, tuple[str, str]] = {}
    for start in range(0, len(seqs), 500):  # bounded IN lists (SQLite's variable limit)
        rows = session.execute(select(SignedEvidence.evidence_seq, SignatureRow.key_id, SignatureRow.envelope)
                               .join(SignatureRow, SignatureRow.seq == SignedEvidence.signature_seq)
                               .where(SignedEvidence.evidence_seq.in_(seqs[start:start + 500]), in_chain(SignatureRow.seq))
                               .order_by(SignedEvidence.evidence_seq, SignatureRow.seq))
        for seq, key_id, envelope in rows:
            found.setdefault(seq, (key_id, _signer_name(envelope)))
    return found


def _signer_name(envelope: str) -> str:
    try:
        payload = envelope_from_json(json.loads(envelope)).payload
        return statement_fields(json.loads(payload.decode("utf-8")))[0].name
    except (EnvelopeError, KeyFormatError, ValueError, UnicodeDecodeError):
        return "(malformed envelope)"
