"""Audit reviews: append-only, pinned to the digest of what was reviewed, in the hash chain, optionally signed."""

from __future__ import annotations

import base64
from datetime import date, datetime, timezone

from sqlalchemy import String, insert, select, type_coerce
from sqlalchemy.orm import Session

from evidence_db.appender import ChainAppender
from evidence_db.chain import KIND_REVIEW, REVIEW_SCHEMA_ID, iso_utc, review_content, review_digest
from evidence_db.chain_rows import parse_day, parse_moment
from evidence_db.coverage import in_chain
from evidence_db.errors import BundleError, StoreDamaged
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
    """Every review the chain covers, in the order it was recorded (chain order).

    A row whose dates no bitcase write could have stored raises :class:`StoreDamaged` naming it.
    """
    rows = session.execute(select(Review.target, Review.target_digest, Review.decision, Review.reviewer,
                                  Review.rationale, type_coerce(Review.created_at, String),
                                  type_coerce(Review.expires, String), Review.seq, Review.signer_key_id)
                           .where(in_chain(Review.seq)).order_by(Review.seq))
    views = []
    for target, target_digest, decision, reviewer, rationale, created, expires, seq, signer_key_id in rows:
        try:
            created_at, expires_on = parse_moment(created), parse_day(expires)
        except ValueError:
            raise StoreDamaged(f"review of {target!r} (chain seq {seq}): created_at {created!r} or expires "
                               f"{expires!r} is not a date, which no bitcase review writes",
                               hint="run `bitcase audit verify` and restore the store from a backup") from None
        views.append(ReviewView(target=target, target_digest=target_digest, decision=decision, reviewer=reviewer,
                                rationale=rationale, created_at=iso_utc(created_at), expires=expires_on, seq=seq,
                                signer_key_id=signer_key_id))
    return views
