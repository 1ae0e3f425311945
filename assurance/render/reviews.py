"""Review standing of evidence items, and which ids a review may name.

Trusted case items get their review state from the status engine
(:func:`assurance.reviews.review_state`, pinned to the item's trust digest). An evidence item
can be reviewed too; its review is pinned to the item's content digest, by the same rules.
"""

from __future__ import annotations

from datetime import date
from typing import Iterable

from assurance.render.model import ReviewModel
from evidence_db.views import ReviewView

__all__ = ["evidence_review", "review_model"]


def review_model(state: str, last: ReviewView | None) -> ReviewModel:
    """A :class:`ReviewModel` in ``state`` described by the review that decided it."""
    if last is None:
        return ReviewModel(state)
    return ReviewModel(state, reviewer=last.reviewer, decision=last.decision, rationale=last.rationale,
                       reviewed_at=last.created_at, expires=last.expires.isoformat() if last.expires else "")


def evidence_review(item_id: str, content_digest: str, reviews: Iterable[ReviewView], *,
                    today: date) -> ReviewModel | None:
    """The review state of one evidence item, or ``None`` when nobody reviewed it.

    Reviews pinned to another digest make it *stale*; the latest pinned review decides
    otherwise (an accept past its expiry date is *expired*).
    """
    mine = sorted((r for r in reviews if r.target == item_id), key=lambda r: r.seq)
    if not mine:
        return None
    pinned = [r for r in mine if r.target_digest == content_digest]
    if not pinned:
        return review_model("stale", mine[-1])
    last = pinned[-1]
    if last.decision == "accept":
        state = "expired" if last.expires is not None and last.expires < today else "accepted"
    else:
        state = "rejected" if last.decision == "reject" else "needs-work"
    return review_model(state, last)
