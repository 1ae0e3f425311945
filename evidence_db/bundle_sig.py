"""Signed bundles: a detached DSSE envelope ``<bundle>.sig`` beside an unchanged JSONL bundle.

The envelope's payload is an in-toto Statement v1 (payload type ``application/vnd.in-toto+json``):

* ``subject``: the bundle file's name and the SHA-256 of its bytes, so standard in-toto and
  DSSE tools can check the file too;
* ``predicate``: the number of records, ``records_digest`` (:func:`records_digest` over the
  records' content digests, the same digests the store's hash chain holds, so the store can
  re-check a signature from its own rows) and the signer's public key and name.

Ingest checks, before storing anything: the signature over the statement, the key id against
the public key, the file's bytes against the subject; and, after reading the last record, the
records against ``records_digest`` (:meth:`BundleSignature.watch`). A bundle without a
``.sig`` stays a plain unsigned bundle, read as before.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from evidence_db.atomic import atomic_file
from evidence_db.canonical import digest_of
from evidence_db.dsse import Envelope, EnvelopeError, envelope_payload, sign_payload
from evidence_db.errors import SignatureError
from evidence_db.keys import KeyFormatError, PublicKey, SigningKey, parse_public_line
from evidence_db.prepare import PreparedRecord

__all__ = ["SIG_SUFFIX", "STATEMENT_TYPE", "PREDICATE_TYPE", "BundleSignature", "signature_path", "records_digest",
           "write_signature", "read_signature", "statement_of", "statement_fields"]

SIG_SUFFIX = ".sig"
STATEMENT_TYPE = "application/vnd.in-toto+json"
IN_TOTO_STATEMENT = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:bitcase:evidence-bundle:v1"
MAX_SIG_BYTES = 1 << 20


def signature_path(bundle: Path) -> Path:
    """Where the detached signature of ``bundle`` lives: ``<bundle>.sig``."""
    return bundle.with_name(bundle.name + SIG_SUFFIX)


def records_digest(content_digests: Iterable[str]) -> str:
    """The digest a bundle signature covers: canonical JSON of the sorted, distinct content digests.

    Order and repeats carry no meaning in the store (a repeated identical record is a no-op),
    so the store can recompute this from the rows a signature covers.
    """
    return digest_of(sorted(set(content_digests)))


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def statement_of(*, name: str, file_sha256: str, num_records: int, digest: str, signer: PublicKey) -> dict[str, Any]:
    """The in-toto Statement a bundle signature signs."""
    return {"_type": IN_TOTO_STATEMENT, "subject": [{"name": name, "digest": {"sha256": file_sha256}}],
            "predicateType": PREDICATE_TYPE,
            "predicate": {"records": num_records, "records_digest": digest,
                          "signer": {"public_key": signer.openssh, "name": signer.name}}}


def write_signature(bundle: Path, content_digests: Sequence[str], key: SigningKey) -> Path:
    """Sign the written ``bundle`` whose records have these content digests; write ``<bundle>.sig`` atomically."""
    statement = statement_of(name=bundle.name, file_sha256=_file_sha256(bundle), num_records=len(content_digests),
                             digest=records_digest(content_digests), signer=key.public)
    envelope = sign_payload(key, STATEMENT_TYPE, statement)
    target = signature_path(bundle)
    with atomic_file(target) as f:
        f.write(json.dumps(envelope.to_json(), indent=1, sort_keys=True) + "\n")
    return target


@dataclass(slots=True)
class BundleSignature:
    """A bundle's verified signature; :meth:`watch` checks the records against it while they are stored."""

    envelope: Envelope
    signer: PublicKey
    num_records: int
    records_digest: str
    where: str  # the signature file, for messages
    _seen: list[str] = field(default_factory=list)

    @property
    def key_id(self) -> str:
        return self.signer.key_id

    def watch(self, records: Iterable[PreparedRecord]) -> Iterator[PreparedRecord]:
        """The records unchanged; after the last one, raise :class:`SignatureError` if they are not the signed ones."""
        seen = self._seen
        for record in records:
            seen.append(record.content_digest)
            yield record
        if len(seen) != self.num_records or records_digest(seen) != self.records_digest:
            raise SignatureError(f"the bundle's records are not the ones signed by {self.key_id} ({len(seen)} read, "
                                 f"{self.num_records} signed): it was edited after signing", where=self.where,
                                 hint="re-run the producer, or ingest the original bundle")


def read_signature(bundle: Path) -> BundleSignature | None:
    """The verified signature of ``bundle`` (None when it has no ``.sig``); raises :class:`SignatureError`."""
    path = signature_path(bundle)
    where = str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SIG_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SignatureError(f"cannot read the signature: {exc.strerror}", where=where) from None
    try:
        envelope, statement = envelope_payload(raw, max_bytes=MAX_SIG_BYTES, payload_type=STATEMENT_TYPE)
        signer, num_records, digest, file_sha = statement_fields(statement)
    except (EnvelopeError, KeyFormatError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SignatureError(f"not a bitcase bundle signature: {exc}", where=where,
                             hint=f"delete {path.name} to ingest the bundle as unsigned, or re-sign it") from None
    if signer.key_id != envelope.key_id or not envelope.verify(signer):
        raise SignatureError(f"the signature by {envelope.key_id} does not verify: the statement was changed "
                             "after signing", where=where, hint="re-run the producer with --sign-key")
    if _file_sha256(bundle) != file_sha:
        raise SignatureError(f"the bundle's bytes are not the ones signed by {signer.key_id}: it was edited after "
                             "signing", where=str(bundle), hint="re-run the producer, or ingest the original bundle")
    return BundleSignature(envelope, signer, num_records, digest, where)


def statement_fields(statement: Any) -> tuple[PublicKey, int, str, str]:
    """(signer, number of records, records digest, file sha256) of a bundle statement, or EnvelopeError."""
    try:
        if statement["_type"] != IN_TOTO_STATEMENT or statement["predicateType"] != PREDICATE_TYPE:
            raise EnvelopeError(f"not an in-toto statement of type {PREDICATE_TYPE}")
        (subject,) = statement["subject"]
        predicate = statement["predicate"]
        signer = parse_public_line(f"{predicate['signer']['public_key']} {predicate['signer']['name']}")
        num_records, digest, file_sha = predicate["records"], predicate["records_digest"], subject["digest"]["sha256"]
    except (KeyError, TypeError, ValueError) as exc:
        raise EnvelopeError(f"statement field missing or malformed ({exc})") from None
    if not isinstance(num_records, int) or not isinstance(digest, str) or not isinstance(file_sha, str):
        raise EnvelopeError("records, records_digest or the subject digest has the wrong type")
    return signer, num_records, digest, file_sha
