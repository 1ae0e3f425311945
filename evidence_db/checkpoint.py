"""Signed chain-head checkpoints, kept outside the store, to detect truncation and wholesale rewrites.

The hash chain alone detects edits, but not a writer who recomputes every digest, nor rows
removed from the end together with the head row set back. A checkpoint is a DSSE envelope
(payload type :data:`CHECKPOINT_TYPE`) over ``{store_id, seq, chain_digest, time, signer}``,
written by ``bitcase audit head``. Later, with the chain verified intact, the store still
vouches for everything the checkpoint saw exactly when its row at ``seq`` has that chain
digest (each chain digest commits to every row before it); a shorter chain means truncation,
another digest a rewrite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from evidence_db.atomic import atomic_file
from evidence_db.dsse import Envelope, EnvelopeError, envelope_payload, sign_payload
from evidence_db.errors import BundleError
from evidence_db.keyring import TrustedKeys
from evidence_db.keys import KeyFormatError, PublicKey, SigningKey, parse_public_line
from evidence_db.models import (GENESIS_DIGEST, MAIN_CHAIN, BundleSignature, ChainHead, EvidenceItem, Review,
                                StoreIdentity)

__all__ = ["CHECKPOINT_TYPE", "Checkpoint", "store_id", "make_checkpoint", "write_checkpoint", "read_checkpoint",
           "checkpoint_problems"]

CHECKPOINT_TYPE = "application/vnd.bitcase.chain-head+json"
CHECKPOINT_SCHEMA = "bitcase.chain-head/v1"
MAX_CHECKPOINT_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A chain head as a checkpoint states it, and the key that signed it."""

    store_id: str
    seq: int
    chain_digest: str
    time: str
    signer: PublicKey
    is_signature_valid: bool
    envelope: Envelope


def store_id(*, session: Session) -> str:
    """The store's random id (made by its migration)."""
    found = session.scalars(select(StoreIdentity.store_id)).all()
    if len(found) != 1:
        raise BundleError(f"the store has {len(found)} identity rows, not one: it was altered outside bitcase",
                          hint="run `bitcase audit verify`; restore the store from a backup")
    return str(found[0])


def make_checkpoint(*, session: Session, key: SigningKey) -> Envelope:
    """A signed checkpoint of the store's current chain head."""
    head = session.execute(select(ChainHead.seq, ChainHead.chain_digest).where(ChainHead.name == MAIN_CHAIN)).one()
    payload = {"schema": CHECKPOINT_SCHEMA, "store_id": store_id(session=session), "seq": head.seq,
               "chain_digest": head.chain_digest,
               "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
               "signer": {"public_key": key.public.openssh, "name": key.name}}
    return sign_payload(key, CHECKPOINT_TYPE, payload)


def write_checkpoint(path: Path, envelope: Envelope) -> None:
    """Write a checkpoint envelope as JSON, atomically (a partial checkpoint never replaces a good one)."""
    with atomic_file(path, mode=0o644) as f:
        f.write(json.dumps(envelope.to_json(), indent=1, sort_keys=True) + "\n")


def read_checkpoint(path: Path) -> Checkpoint:
    """The checkpoint in ``path``, its signature checked; :class:`BundleError` when it is not one."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CHECKPOINT_BYTES + 1)
    except OSError as exc:
        raise BundleError(f"cannot read the checkpoint: {exc.strerror}", where=str(path)) from None
    try:
        envelope, body = envelope_payload(raw, max_bytes=MAX_CHECKPOINT_BYTES, payload_type=CHECKPOINT_TYPE)
        if body.get("schema") != CHECKPOINT_SCHEMA:
            raise EnvelopeError(f"schema is not {CHECKPOINT_SCHEMA}")
        signer = parse_public_line(f"{body['signer']['public_key']} {body['signer']['name']}")
        seq, digest, sid, time = body["seq"], body["chain_digest"], body["store_id"], body["time"]
        if not isinstance(seq, int) or seq < 0 or not all(isinstance(v, str) for v in (digest, sid, time)):
            raise EnvelopeError("seq, chain_digest, store_id or time has the wrong type")
    except (EnvelopeError, KeyFormatError, KeyError, TypeError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BundleError(f"not a bitcase chain-head checkpoint: {exc}", where=str(path),
                          hint="write one with `bitcase audit head --out FILE`") from None
    is_valid = signer.key_id == envelope.key_id and envelope.verify(signer)
    return Checkpoint(sid, seq, digest, time, signer, is_valid, envelope)


def _chain_digest_at(session: Session, seq: int) -> str | None:
    if seq == 0:
        return GENESIS_DIGEST
    for model in (EvidenceItem, Review, BundleSignature):
        found = session.scalar(select(model.chain_digest).where(model.seq == seq))
        if found is not None:
            return found
    return None


def checkpoint_problems(*, session: Session, checkpoint: Checkpoint, trusted: TrustedKeys) -> list[str]:
    """Why the store does not extend the checkpointed chain (empty: it does). Check the chain itself first."""
    if not checkpoint.is_signature_valid:
        return [f"the checkpoint's signature by {checkpoint.envelope.key_id} does not verify: the checkpoint "
                "was altered"]
    problems = []
    if trusted.get(checkpoint.signer.key_id) is None:
        problems.append(f"the checkpoint is signed by {checkpoint.signer.key_id} "
                        f"({checkpoint.signer.name or 'no name'}), a key that is not trusted")
    this_store = store_id(session=session)
    if checkpoint.store_id != this_store:
        problems.append(f"the checkpoint is of store {checkpoint.store_id}, this store is {this_store}")
    head_seq = session.scalar(select(ChainHead.seq).where(ChainHead.name == MAIN_CHAIN)) or 0
    if head_seq < checkpoint.seq:
        problems.append(f"the chain ends at seq {head_seq} but the checkpoint of {checkpoint.time} vouches for seq "
                        f"{checkpoint.seq}: rows were removed from the end (truncation)")
    else:
        stored = _chain_digest_at(session, checkpoint.seq)
        if stored != checkpoint.chain_digest:
            problems.append(f"the chain digest at seq {checkpoint.seq} is {stored}, the checkpoint of "
                            f"{checkpoint.time} says {checkpoint.chain_digest}: the chain up to there was rewritten")
    return problems
