"""Reading one window of chained rows for the verifier: subjects grouped per item, reviews checked.

Each function reads the rows with ``lo <= seq < hi`` as stored (Core queries, plain tuples) and
turns what a row says into what :mod:`evidence_db.verify` compares: an :data:`Entry` per row,
with the reason a row fails when its content cannot be what it claims. A column no bitcase
write could have stored (an unparsable date) is such a reason, never an exception.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import String, select, type_coerce
from sqlalchemy.orm import Session

from evidence_db.chain import KIND_REVIEW, iso_utc, review_content, review_digest, subjects_json
from evidence_db.models import Review, Subject
from evidence_db.views import ReviewView, SubjectView

__all__ = ["Subjects", "Entry", "subjects_value", "read_subjects", "read_reviews", "parse_moment", "parse_day",
           "unreadable", "edited"]

# An item's subjects: ((uri, sha256), ...) in record order, their canonical JSON, and their views.
Subjects = tuple[tuple[tuple[str, str], ...], str, tuple[SubjectView, ...]]
# How one row checks out: (kind, key, fault reason or None, stored content digest, stored prev, stored chain).
Entry = tuple[str, str, "str | None", str, str, str]


def subjects_value(pairs: tuple[tuple[str, str], ...]) -> Subjects:
    """The :data:`Subjects` of ``pairs``."""
    return pairs, subjects_json(pairs), tuple(SubjectView(uri=uri, sha256=sha) for uri, sha in pairs)


def read_subjects(session: Session, lo: int, hi: int) -> dict[int, Subjects]:
    """Each item's subjects in record order, by seq; equal lists share one value."""
    grouped: dict[int, Subjects] = {}
    shared: dict[tuple[tuple[str, str], ...], Subjects] = {}
    rows = session.connection().execute(
        select(Subject.evidence_seq, Subject.uri, Subject.sha256)
        .where((Subject.evidence_seq >= lo) & (Subject.evidence_seq < hi))
        .order_by(Subject.evidence_seq, Subject.position)).all()
    held: list[tuple[str, str]] = []
    last = None
    for seq, uri, sha in rows:
        if seq != last:
            if held:
                key = tuple(held)
                grouped[last] = shared.get(key) or shared.setdefault(key, subjects_value(key))
            held, last = [], seq
        held.append((uri, sha))
    if held:
        key = tuple(held)
        grouped[last] = shared.get(key) or shared.setdefault(key, subjects_value(key))
    return grouped


def parse_moment(value: Any) -> datetime:
    """A stored timestamp (a datetime from PostgreSQL, text from SQLite); ``ValueError`` when unreadable."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a timestamp")
    return datetime.fromisoformat(value)


def parse_day(value: Any) -> date | None:
    """A stored date or NULL; ``ValueError`` when unreadable."""
    if value is None or (isinstance(value, date) and not isinstance(value, datetime)):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a date")
    return date.fromisoformat(value)


def unreadable(column: str, what: str) -> str:
    """The fault reason for a column no bitcase write could have stored."""
    return f"column {column} is unreadable, {what}: it was written outside bitcase"


def edited(recomputed: str, stored: str) -> str | None:
    """The fault reason when a row's content no longer hashes to its stored digest, else None."""
    return None if recomputed == stored else f"content was edited: it hashes to {recomputed}, the row says {stored}"


def read_reviews(session: Session, lo: int, hi: int, views: list[ReviewView]) -> dict[int, list[Entry]]:
    """The window's reviews as entries by seq; the readable ones are appended to ``views``."""
    rows = session.connection().execute(
        select(Review.seq, Review.target, Review.target_digest, Review.decision, Review.reviewer, Review.rationale,
               type_coerce(Review.expires, String), type_coerce(Review.created_at, String), Review.content_digest,
               Review.prev_chain_digest, Review.chain_digest, Review.schema_id, Review.signer_key_id)
        .where((Review.seq >= lo) & (Review.seq < hi))).all()
    found: dict[int, list[Entry]] = {}
    for (seq, target, target_digest, decision, reviewer, rationale, expires, created, content, prev, chain,
         schema_id, signer_key_id) in rows:
        try:
            created_at = parse_moment(created)
        except ValueError:
            found.setdefault(seq, []).append((KIND_REVIEW, target, unreadable(
                "created_at", f"{created!r} is not a timestamp"), content, prev, chain))
            continue
        try:
            expires_on = parse_day(expires)
        except ValueError:
            found.setdefault(seq, []).append((KIND_REVIEW, target, unreadable(
                "expires", f"{expires!r} is not a date"), content, prev, chain))
            continue
        review = review_content(target=target, target_digest=target_digest, decision=decision, reviewer=reviewer,
                                rationale=rationale, expires=expires_on, created_at=created_at, schema_id=schema_id,
                                signer_key_id=signer_key_id)
        try:
            problem = edited(review_digest(review), content)
        except KeyError:  # a schema id no version defines: the row cannot be verified
            problem = f"its schema {schema_id!r} is no review schema: it was written outside bitcase"
        found.setdefault(seq, []).append((KIND_REVIEW, target, problem, content, prev, chain))
        views.append(ReviewView(target=target, target_digest=target_digest, decision=decision, reviewer=reviewer,
                                rationale=rationale, created_at=iso_utc(created_at), expires=expires_on, seq=seq,
                                signer_key_id=signer_key_id))
    return found
