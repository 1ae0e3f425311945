"""What a review may name, and the digest it is pinned to.

A review names a trusted item of the case (pinned to its trust digest,
:func:`assurance.reviews.trust_digest`) or an evidence item in the store (pinned to its
content digest).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from assurance.case_loader import load_case
from assurance.cli._common import BitcaseError
from assurance.issues import CaseError
from assurance.reviews import trust_digest
from evidence_db.session import open_session
from evidence_db.store import load_evidence

__all__ = ["ReviewTarget", "resolve_target", "current_digests"]


@dataclass(frozen=True, slots=True)
class ReviewTarget:
    kind: str  # "trusted item" | "evidence item"
    digest: str


def _case_digests(case_path: Path | None, *, required: bool) -> tuple[dict[str, str], dict[str, str]]:
    """(trusted node id -> trust digest, other node id -> kind) of the case."""
    from assurance.render.loading import resolve_case

    try:
        case = load_case(resolve_case(case_path))
    except (BitcaseError, CaseError):
        if required:
            raise
        return {}, {}
    trusted = {n.id: trust_digest(n) for n in case.nodes if n.is_trusted}
    others = {n.id: n.kind for n in case.nodes if not n.is_trusted}
    return trusted, others


def current_digests(*, db: str | None, case_path: Path | None) -> dict[str, str]:
    """Every reviewable id with the digest a review of it must carry now."""
    trusted, _ = _case_digests(case_path, required=case_path is not None)
    with open_session(db) as session:
        evidence = {e.item_id: e.content_digest for e in load_evidence(session=session)}
    return {**evidence, **trusted}


def resolve_target(item: str, *, db: str | None, case_path: Path | None) -> ReviewTarget:
    """The review target ``item``; BitcaseError with the reviewable ids when it is not one."""
    try:
        trusted, others = _case_digests(case_path, required=True)
    except CaseError as exc:
        raise BitcaseError(f"the case cannot be used:\n{exc}") from None
    if item in trusted:
        return ReviewTarget("trusted item", trusted[item])
    with open_session(db) as session:
        evidence = {e.item_id: e.content_digest for e in load_evidence(session=session)}
    if item in evidence:
        return ReviewTarget("evidence item", evidence[item])
    close = difflib.get_close_matches(item, [*trusted, *evidence], n=3)
    listed = ", ".join(sorted(trusted)[:30]) or "none in this case"
    why = (f"{item!r} is a {others[item]} of the case, not a trusted item" if item in others
           else f"{item!r} is neither a trusted item of the case nor an evidence item in the store")
    hint = (f"did you mean {', '.join(close)}? " if close else "") + \
        f"trusted items: {listed}; evidence item ids are listed in the report's evidence index"
    raise BitcaseError(why, hint=hint)
