"""Audit reviews: append-only, pinned to the digest of what was reviewed, in the hash chain, optionally signed."""

from __future__ import annotations

import base64
from datetime import date, datetime, timezone

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from evidence_db.appender import ChainAppender
from evidence_db.chain import KIND_REVIEW, REVIEW_SCHEMA_ID, iso_utc, review_content, review_digest
from evidence_db.errors import BundleError
from evidence_db.keys import SigningKey
from evidence_db.models import DECISIONS, Review, utc_now_datetime
from evidence_db.signatures import review_payload
from evidence_db.views import ReviewView

__all__ = ["add_review", "list_reviews", "signer_identity"]

LIMITS = {"target": 512, "target_digest": 200, "reviewer": 255, "rationale": 65536}


def _check_text(name: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise BundleError("must be a non-empty string", field=name, hint=f"give the review a {name.replace('_', ' ')}")
    if len(value) > LIMITS[name]:
        raise BundleError(f"is {len(value)} characters long; at most {LIMITS[name]} allowed", field=name)
    if "\x00" in value or (name != "rationale" and any(ord(ch) < 32 for ch in value)):
        raise BundleError("contains control characters", field=name, hint="use a single line of plain text")


def add_review(*, session: Session, target: str, target_digest: str, decision: str, reviewer: str,
               rationale: str, expires: date | None, created_at: datetime | None = None,
               signer: SigningKey | None = None) -> ReviewView:
    """Append an audit review to the store (in the session's transaction) and return it.

    ``target`` is a case node id or an evidence record id, ``target_digest`` the digest of the
    target as reviewed (a later change to the target makes the review stale), ``decision`` one
    of ``accept``, ``reject``, ``needs-work``. ``expires`` (optional) is the last day the review
    counts; ``created_at`` defaults to now (UTC). Reviews are never edited: a new decision is a
    new review. With ``signer`` the review is signed by that key, ``reviewer`` must be the
    key's identity (:func:`signer_identity`) and the key id joins the chained content.
    Raises :class:`~evidence_db.errors.BundleError` naming the bad field.
    """
    for name, value in (("target", target), ("target_digest", target_digest), ("reviewer", reviewer),
                        ("rationale", rationale)):
        _check_text(name, value)
    if decision not in DECISIONS:
        raise BundleError(f"{decision!r} is not a review decision", field="decision",
                          hint="use one of: " + ", ".join(DECISIONS))
    if expires is not None and (not isinstance(expires, date) or isinstance(expires, datetime)):
        raise BundleError("must be a date (or None)", field="expires", hint="e.g. datetime.date(2026, 12, 31)")
    created = created_at or utc_now_datetime()
    if created.tzinfo is None:
        raise BundleError("must be timezone-aware", field="created_at", hint="use datetime.now(timezone.utc)")
    created = created.astimezone(timezone.utc)  # stored as UTC (SQLite keeps no offset)
    if signer is not None and reviewer != signer_identity(signer):
        raise BundleError(f"a review signed by {signer.key_id} is by {signer_identity(signer)!r}, not {reviewer!r}",
                          field="reviewer", hint="with a signing key the reviewer is the key's identity")
    key_id = None if signer is None else signer.key_id
    content = review_content(target=target, target_digest=target_digest, decision=decision, reviewer=reviewer,
                             rationale=rationale, expires=expires, created_at=created, signer_key_id=key_id)
    digest = review_digest(content)
    signature = None if signer is None else base64.b64encode(signer.sign(review_payload(content))).decode("ascii")
    appender = ChainAppender(session)
    seq, prev, chain = appender.link(KIND_REVIEW, digest)
    session.execute(insert(Review).values(
        schema_id=REVIEW_SCHEMA_ID, target=target, target_digest=target_digest, decision=decision,
        reviewer=reviewer, rationale=rationale, expires=expires, created_at=created, content_digest=digest, seq=seq,
        prev_chain_digest=prev, chain_digest=chain, signer_key_id=key_id,
        signer_public_key=None if signer is None else signer.public.openssh, signature=signature))
    appender.finish()
    return ReviewView(target=target, target_digest=target_digest, decision=decision, reviewer=reviewer,
                      rationale=rationale, created_at=content["created_at"], expires=expires, seq=seq,
                      signer_key_id=key_id)


def signer_identity(signer: SigningKey) -> str:
    """The reviewer a key's reviews are by: the key's name, or its key id when it has none."""
    return signer.name or signer.key_id


def list_reviews(*, session: Session) -> list[ReviewView]:
    """Every review in the order it was recorded (chain order)."""
    rows = session.execute(select(Review.target, Review.target_digest, Review.decision, Review.reviewer,
                                  Review.rationale, Review.created_at, Review.expires, Review.seq, Review.signer_key_id)
                           .order_by(Review.seq))
    return [ReviewView(target=r.target, target_digest=r.target_digest, decision=r.decision, reviewer=r.reviewer,
                       rationale=r.rationale, created_at=iso_utc(r.created_at), expires=r.expires, seq=r.seq,
                       signer_key_id=r.signer_key_id)
            for r in rows]
