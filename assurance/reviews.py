"""Review state of trusted items.

A trusted item is pinned by its *trust digest* (the digest of its text and rationale). A
review counts only while it is pinned to the current digest: editing the item's wording or
rationale makes earlier reviews stale. Rules are listed in ``docs/status-rules.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, Iterable

from assurance.case_model import Node
from evidence_db.canonical import digest_of
from evidence_db.views import ReviewView

__all__ = ["ReviewState", "REVIEW_STATES", "trust_digest", "review_state", "rejected_evidence"]

# unreviewed: never reviewed · accepted: accept pinned to the current digest, not expired ·
# expired: that accept has passed its expiry date · rejected / needs-work: the latest decision on
# the current digest · stale: reviews exist, but none for the current digest.
REVIEW_STATES = ("unreviewed", "accepted", "expired", "rejected", "needs-work", "stale")


def trust_digest(node: Node) -> str:
    """The digest a review of ``node`` must be pinned to (its text and rationale)."""
    return digest_of({"text": node.text, "rationale": node.rationale})


@dataclass(frozen=True, slots=True)
class ReviewState:
    """The review standing of one trusted item."""

    state: str  # one of REVIEW_STATES
    current_digest: str
    decision: str | None = None  # decision of the review that determined the state
    reviewer: str | None = None
    created_at: str | None = None
    expires: date | None = None
    target_digest: str | None = None
    rationale: str | None = None
    num_reviews: int = 0

    @property
    def is_accepted(self) -> bool:
        """Whether the item counts as trusted-reviewed."""
        return self.state == "accepted"

    def to_json(self) -> dict[str, Any]:
        """The state as a JSON object (dates as ISO strings)."""
        return {"state": self.state, "current_digest": self.current_digest, "decision": self.decision,
                "reviewer": self.reviewer, "created_at": self.created_at,
                "expires": self.expires.isoformat() if self.expires else None,
                "target_digest": self.target_digest, "rationale": self.rationale,
                "num_reviews": self.num_reviews}


def review_state(node: Node, reviews: Iterable[ReviewView], *, today: date) -> ReviewState:
    """The review state of trusted ``node`` from all ``reviews`` of it (any order)."""
    current = trust_digest(node)
    mine = sorted((r for r in reviews if r.target == node.id), key=lambda r: r.seq)
    pinned = [r for r in mine if r.target_digest == current]
    if not pinned:
        if not mine:
            return ReviewState("unreviewed", current)
        last = mine[-1]
        return ReviewState("stale", current, last.decision, last.reviewer, last.created_at, last.expires,
                           last.target_digest, last.rationale, len(mine))
    last = pinned[-1]
    if last.decision == "accept":
        state = "expired" if last.expires is not None and last.expires < today else "accepted"
    elif last.decision == "reject":
        state = "rejected"
    else:
        state = "needs-work"
    return ReviewState(state, current, last.decision, last.reviewer, last.created_at, last.expires,
                       last.target_digest, last.rationale, len(mine))


def rejected_evidence(reviews: Iterable[ReviewView]) -> frozenset[tuple[str, str]]:
    """(item id, content digest) of evidence whose latest review pinned to that digest rejects it."""
    latest: dict[tuple[str, str], ReviewView] = {}
    for r in reviews:
        key = (r.target, r.target_digest)
        if key not in latest or r.seq > latest[key].seq:
            latest[key] = r
    return frozenset(key for key, r in latest.items() if r.decision == "reject")
