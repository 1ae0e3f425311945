"""What a review may name, and the digest it is pinned to.

A review names a trusted item of the case (pinned to its trust digest,
:func:`assurance.reviews.trust_digest`) or an evidence item in the store (pinned to its
content digest). Plan-generated trusted items are reviewable once the newest deployment
configuration in the store names a sealed plan to generate them from.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from assurance.cli._common import BitcaseError
from assurance.reviews import trust_digest
from assurance.scope import prepare_case

__all__ = ["ReviewTarget", "resolve_target", "current_digests"]


@dataclass(frozen=True, slots=True)
class ReviewTarget:
    kind: str  # "trusted item" | "evidence item"
    digest: str


def _reviewables(db: str | None, case_path: Path) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(trusted node id -> trust digest, other node id -> kind, evidence id -> content digest)."""
    from evidence_db.session import open_session
    from evidence_db.store import list_deployments, load_evidence

    with open_session(db) as session:
        deployments = list_deployments(session=session)
        evidence = {e.item_id: e.content_digest for e in load_evidence(session=session)}
    case, _notes = prepare_case(case_path, deployment_fields=deployments[-1].fields if deployments else None)
    trusted = {n.id: trust_digest(n) for n in case.nodes if n.is_trusted}
    others = {n.id: n.kind for n in case.nodes if not n.is_trusted}
    return trusted, others, evidence


def current_digests(*, db: str | None, case_path: Path) -> dict[str, str]:
    """Every reviewable id with the digest a review of it must carry now."""
    trusted, _others, evidence = _reviewables(db, case_path)
    return {**evidence, **trusted}


def resolve_target(item: str, *, db: str | None, case_path: Path) -> ReviewTarget:
    """The review target ``item``; BitcaseError with the reviewable ids when it is not one.

    A case's trusted item wins over an evidence item of the same id.
    """
    trusted, others, evidence = _reviewables(db, case_path)
    if item in trusted:
        return ReviewTarget("trusted item", trusted[item])
    if item in evidence:
        return ReviewTarget("evidence item", evidence[item])
    close = difflib.get_close_matches(item, [*trusted, *evidence], n=3)
    listed = ", ".join(sorted(trusted)[:30]) or "none in this case"
    why = (f"{item!r} is a {others[item]} of the case, not a trusted item" if item in others
           else f"{item!r} is neither a trusted item of the case nor an evidence item in the store")
    hint = (f"did you mean {', '.join(close)}? " if close else "") + \
        f"trusted items: {listed}; evidence items: `bitcase evidence list` finds them, `bitcase evidence show ID` " \
        "reads one"
    raise BitcaseError(why, hint=hint)
