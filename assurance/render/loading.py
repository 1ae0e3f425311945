"""Load what a report, a diagram or a diff needs: the store's views and one evaluation per D.

Evaluation goes through :func:`assurance.scope.evaluate_under`, the same path the claim
commands use, so the report never disagrees with ``bitcase status``. Without ``--config``
every deployment configuration in the store gets its own evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assurance.evaluation import Evaluation
from assurance.scope import DeploymentChoice, choose_deployment, evaluate_under
from evidence_db.canonical import file_digest
from evidence_db.views import DeploymentView, EvidenceView, ReviewView

__all__ = ["ScopeInput", "StoreState", "display_path", "load_state"]

_PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ScopeInput:
    """One evaluation, the fields of its D, and notes for the reader (e.g. plan not found)."""

    evaluation: Evaluation
    fields: dict[str, Any]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class StoreState:
    """A case evaluated against a store under each selected D, plus the raw views."""

    case_ref: str  # the case file as people see it
    case_digest: str
    store_ref: str
    deployments: tuple[DeploymentView, ...]
    scopes: tuple[ScopeInput, ...]
    evidence: tuple[EvidenceView, ...]
    reviews: tuple[ReviewView, ...]


def display_path(path: Path) -> str:
    """``path`` relative to the working directory, else to the project root, else absolute."""
    path = Path(path).resolve()
    for base in (Path.cwd().resolve(), _PROJECT_ROOT):
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    return str(path)


def load_state(*, db: str | None, case_path: Path, config: str | None = None,
               plan: str | None = None, root: Path | None = None) -> StoreState:
    """Read the store and evaluate the case at ``case_path`` under each selected D.

    Raises :class:`~assurance.cli._common.BitcaseError` for a bad store or ``--config`` and
    :class:`~assurance.issues.CaseError` for an invalid case.
    """
    from evidence_db.reviews import list_reviews
    from evidence_db.session import open_session, store_label
    from evidence_db.store import list_deployments, load_evidence

    with open_session(db) as session:
        deployments = list_deployments(session=session)
        evidence = load_evidence(session=session)
        reviews = list_reviews(session=session)
    if config is None and deployments:
        choices = [DeploymentChoice(d.digest, dict(d.fields), "the store") for d in deployments]
    else:
        choices = [choose_deployment(config, deployments)]
    scopes = []
    for choice in choices:
        evaluation, notes = evaluate_under(case_path, choice, evidence=evidence, reviews=reviews, plan=plan, root=root)
        scopes.append(ScopeInput(evaluation, dict(choice.fields or {}), tuple(notes)))
    return StoreState(case_ref=display_path(case_path), case_digest=file_digest(case_path),
                      store_ref=store_label(db), deployments=tuple(deployments), scopes=tuple(scopes),
                      evidence=tuple(evidence), reviews=tuple(reviews))
