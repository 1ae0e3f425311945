"""DSSE envelopes: ed25519 signatures over a typed payload (https://github.com/secure-systems-lab/dsse).

An envelope is ``{"payload": base64, "payloadType": str, "signatures": [{"keyid", "sig"}]}``;
the signature is over the pre-authentication encoding ``PAE(payloadType, payload)``, so a
payload cannot be reinterpreted as another type. bitcase signs bundles (an in-toto Statement
naming the bundle file and its records), signed reviews and chain-head checkpoints this way.
Payloads are the bytes of :func:`evidence_db.canonical.canonical_json`: one canonical form
for everything that is hashed or signed.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature

from evidence_db.canonical import canonical_json
from evidence_db.keys import PublicKey, SigningKey

__all__ = ["Envelope", "pae", "sign_payload", "payload_bytes", "envelope_from_json", "envelope_payload", "EnvelopeError"]


class EnvelopeError(ValueError):
    """An envelope that is malformed (not its signature failing: see :meth:`Envelope.verify`)."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding of a payload and its type."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def payload_bytes(value: Any) -> bytes:
    """The bytes signed for a JSON value: its canonical JSON, UTF-8."""
    return canonical_json(value).encode("utf-8")


@dataclass(frozen=True, slots=True)
class Envelope:
    """A DSSE envelope with one ed25519 signature."""

    payload_type: str
    payload: bytes
    key_id: str
    signature: bytes

    def to_json(self) -> dict[str, Any]:
        """The envelope as DSSE's JSON object."""
        return {"payload": base64.b64encode(self.payload).decode("ascii"), "payloadType": self.payload_type,
                "signatures": [{"keyid": self.key_id, "sig": base64.b64encode(self.signature).decode("ascii")}]}

    def verify(self, key: PublicKey) -> bool:
        """Whether ``key`` made this signature over this payload and type (and the key ids agree)."""
        if key.key_id != self.key_id:
            return False
        try:
            key.raw.verify(self.signature, pae(self.payload_type, self.payload))
        except InvalidSignature:
            return False
        return True


def sign_payload(key: SigningKey, payload_type: str, value: Any) -> Envelope:
    """Sign the canonical JSON of ``value`` as a payload of ``payload_type``."""
    body = payload_bytes(value)
    return Envelope(payload_type, body, key.key_id, key.sign(pae(payload_type, body)))


def envelope_from_json(value: Any) -> Envelope:
    """An :class:`Envelope` from DSSE JSON; raises :class:`EnvelopeError` saying what is wrong."""
    if not isinstance(value, dict):
        raise EnvelopeError("a DSSE envelope is a JSON object")
    payload_type, payload, signatures = value.get("payloadType"), value.get("payload"), value.get("signatures")
    if not isinstance(payload_type, str) or not isinstance(payload, str):
        raise EnvelopeError("payloadType and payload must be strings")
    if not isinstance(signatures, list) or len(signatures) != 1 or not isinstance(signatures[0], dict):
        raise EnvelopeError("expected exactly one signature (one signer per envelope)")
    key_id, sig = signatures[0].get("keyid"), signatures[0].get("sig")
    if not isinstance(key_id, str) or not isinstance(sig, str):
        raise EnvelopeError("the signature needs a keyid and a sig string")
    try:
        body, raw_sig = base64.b64decode(payload, validate=True), base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        raise EnvelopeError("payload or sig is not base64") from None
    return Envelope(payload_type, body, key_id, raw_sig)


def envelope_payload(raw: bytes, *, max_bytes: int, payload_type: str) -> tuple[Envelope, Any]:
    """The envelope in a file's bytes and its JSON payload, refusing another type; raises
    :class:`EnvelopeError` (or the ``ValueError`` of bad JSON or UTF-8) saying what is wrong."""
    if len(raw) > max_bytes:
        raise EnvelopeError(f"larger than {max_bytes} bytes")
    envelope = envelope_from_json(json.loads(raw.decode("utf-8")))
    if envelope.payload_type != payload_type:
        raise EnvelopeError(f"payloadType is {envelope.payload_type!r}, not {payload_type!r}")
    return envelope, json.loads(envelope.payload.decode("utf-8"))
