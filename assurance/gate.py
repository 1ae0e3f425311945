"""The CI gate behind ``bitcase check``: is the claim supported, with nothing stale or failed beneath it?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from assurance.evaluation import Evaluation
from assurance.trusted import SUPPORTED

__all__ = ["Finding", "gate", "waived", "BLOCKING_REVIEW_STATES"]

# A reviewer's explicit objection blocks even with --accept-unreviewed.
BLOCKING_REVIEW_STATES = ("rejected", "needs-work")


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason the gate fails."""

    goal: str  # the top claim being gated
    node: str
    status: str
    message: str

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"goal": self.goal, "node": self.node, "status": self.status, "message": self.message}


def gate(evaluation: Evaluation, *, goals: Iterable[str] | None = None,
         accept_unreviewed: bool = False) -> list[Finding]:
    """Findings that keep ``goals`` (default: the primary claim) from passing; empty means pass.

    A goal passes when it is supported (or supported under trust) and nothing it rests on is
    failed, stale, missing or undeveloped, and every trusted item has an accepted review —
    unreviewed, stale or expired reviews are tolerated with ``accept_unreviewed``, a rejection
    or a needs-work decision never is.
    """
    findings: list[Finding] = []
    for goal in goals or (evaluation.top,):
        top = evaluation.node(goal)
        if top.status not in SUPPORTED:
            why = "; ".join(top.reasons[:3])
            findings.append(Finding(goal, goal, top.status, f"claim is {top.status}" + (f": {why}" if why else "")))
        for r in evaluation.rests_on(goal):
            if r.kind == "solution" and r.status in ("failed", "stale", "missing"):
                findings.append(Finding(goal, r.id, r.status, f"{r.status}: " + "; ".join(r.reasons[:2])))
            elif r.is_claim and r.is_undeveloped:
                findings.append(Finding(goal, r.id, r.status, "goal is undeveloped"))
            elif r.status == "trusted-unreviewed":
                state = r.review.state if r.review else "unreviewed"
                if state in BLOCKING_REVIEW_STATES or not accept_unreviewed:
                    findings.append(Finding(goal, r.id, r.status, f"trusted item review is {state}"))
    return findings


def waived(evaluation: Evaluation, *, goals: Iterable[str] | None = None) -> list[Finding]:
    """The trusted items ``--accept-unreviewed`` lets ``goals`` pass without an accepted, current review.

    One entry per goal and item (unreviewed, stale or expired review), in the order :func:`gate` walks them.
    """
    out: list[Finding] = []
    for goal in goals or (evaluation.top,):
        for r in evaluation.rests_on(goal):
            if r.status == "trusted-unreviewed":
                state = r.review.state if r.review else "unreviewed"
                if state not in BLOCKING_REVIEW_STATES:
                    out.append(Finding(goal, r.id, r.status, f"trusted item review is {state}"))
    return out
