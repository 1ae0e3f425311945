"""Load what a report, a diagram or a diff needs: the store's views and one evaluation per D.

Evaluation goes through :func:`assurance.scope.evaluate_under`, the same path the claim
commands use, so the report never disagrees with ``bitcase status``. The views come from
:func:`evidence_db.verified_read.read_verified`, which verifies the whole hash chain in the same
read; with a broken chain nothing is evaluated and :class:`~evidence_db.errors.StoreDamaged`
(exit code 1) names the first bad row. D is ``--config``, else (with ``pinned``) the case's or
the project's pin (:mod:`assurance.pinning`), else every deployment configuration in the store,
each with its own evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assurance.evaluation import Evaluation
from assurance.pinning import Pin
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
    chain: dict[str, Any]  # VerifiedStore.chain_json(): the hash chain check the views were read under
    chosen_because: str  # which D (or every D) and why
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


def load_state(*, db: str | None, case_path: Path, config: str | None = None, plan: str | None = None,
               pinned: bool = True, root: Path | None = None) -> StoreState:
    """Read the store (verifying its chain) and evaluate the case at ``case_path`` under each selected D.

    Raises :class:`~assurance.cli._common.BitcaseError` for a bad store or ``--config``,
    :class:`~evidence_db.errors.StoreDamaged` for a broken chain and
    :class:`~assurance.issues.CaseError` for an invalid case.
    """
    from assurance.pinning import case_pin, project_pin
    from assurance.scope import check_deployment_fields
    from assurance.settings import load_settings
    from evidence_db.session import open_session, store_label
    from evidence_db.store import list_deployments
    from evidence_db.errors import StoreDamaged
    from evidence_db.verified_read import chain_summary, read_verified

    pin = Pin(config, "--config") if config else None
    if pin is None and pinned:
        pin = case_pin(case_path) or project_pin(load_settings(db=db).home)
    with open_session(db) as session:
        deployments = list_deployments(session=session)
        store = read_verified(session=session)
    if not store.chain.is_intact:
        raise StoreDamaged(f"nothing is rendered from a store that fails verification: "
                           f"{chain_summary(store.chain_json())}",
                           hint="`bitcase audit verify` lists every bad row; restore the store from a backup")
    if pin is None and deployments:
        choices = [DeploymentChoice(d.digest, dict(d.fields), "every D in the store (no --config, nothing pinned)")
                   for d in deployments]
    else:
        pin = pin or Pin("latest", "nothing pinned and the store holds no D")
        choices = [choose_deployment(pin.spec, deployments, why=pin.why)]
    scopes = []
    for choice in choices:
        check_deployment_fields(choice)
        evaluation, notes = evaluate_under(case_path, choice, evidence=store.evidence, reviews=store.reviews,
                                           plan=plan, root=root)
        scopes.append(ScopeInput(evaluation, dict(choice.fields or {}), tuple(notes)))
    return StoreState(case_ref=display_path(case_path), case_digest=file_digest(case_path),
                      store_ref=store_label(db), chain=store.chain_json(), chosen_because=choices[0].source,
                      deployments=tuple(deployments), scopes=tuple(scopes), evidence=tuple(store.evidence),
                      reviews=tuple(store.reviews))
