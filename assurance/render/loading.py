"""Load what a report, a diagram, a review or a diff needs: the case, the store, the evaluations.

Evaluates the case once per deployment configuration D found in the store (or only the D
named by ``--config``), exactly as the status engine defines it; nothing here derives a
status itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assurance.case_loader import load_case
from assurance.case_model import Case
from assurance.cli._common import BitcaseError
from assurance.evaluation import Evaluation
from assurance.issues import CaseError
from assurance.status import evaluate
from assurance.subjects import code_digests
from evidence_db.canonical import file_digest
from evidence_db.reviews import list_reviews
from evidence_db.session import open_session, store_label
from evidence_db.store import list_deployments, load_evidence
from evidence_db.views import DeploymentView, EvidenceView, ReviewView

__all__ = ["DEFAULT_CASE", "StoreState", "display_path", "resolve_case", "pick_deployments", "load_state"]

DEFAULT_CASE = Path(__file__).resolve().parents[1] / "cases" / "determinism.toml"


@dataclass(frozen=True)
class StoreState:
    """A case evaluated against a store: one evaluation per selected D, plus the raw views."""

    case: Case
    case_ref: str  # the case file as people see it: relative to the working directory or the project
    case_digest: str
    store_ref: str
    deployments: tuple[DeploymentView, ...]
    evaluations: tuple[tuple[Evaluation, dict[str, Any]], ...]
    evidence: tuple[EvidenceView, ...]
    reviews: tuple[ReviewView, ...]


def display_path(path: Path) -> str:
    """``path`` relative to the working directory, else to the project root, else absolute."""
    path = path.resolve()
    for base in (Path.cwd(), DEFAULT_CASE.parents[2]):
        if path.is_relative_to(base.resolve()):
            return path.relative_to(base.resolve()).as_posix()
    return str(path)


def resolve_case(case_path: Path | None) -> Path:
    """The case file to use: the given one, else the packaged default case."""
    path = Path(case_path) if case_path is not None else DEFAULT_CASE
    if not path.is_file():
        raise BitcaseError(f"no case file at {path}",
                           hint="pass --case PATH to a case .toml file" if case_path else
                           "the default case is missing from this installation; pass --case PATH")
    return path


def pick_deployments(deployments: list[DeploymentView], config: str | None) -> list[DeploymentView]:
    """Every D, or the one whose digest (with or without ``sha256:``) starts with ``config``."""
    if config is None:
        return deployments
    wanted = config.strip().lower().removeprefix("sha256:")
    hits = [d for d in deployments if d.digest.lower().removeprefix("sha256:").startswith(wanted)]
    known = ", ".join(d.digest for d in deployments[:10]) or "none: the store holds no evidence yet"
    if not wanted or not hits:
        raise BitcaseError(f"no deployment configuration matches --config {config!r}",
                           hint=f"deployment configurations in the store: {known}")
    if len(hits) > 1:
        raise BitcaseError(f"--config {config!r} matches {len(hits)} deployment configurations",
                           hint="give more digits of the digest: " + ", ".join(d.digest for d in hits[:10]))
    return hits


def load_state(*, db: str | None, case_path: Path | None, config: str | None = None) -> StoreState:
    """Read the store and evaluate the case under each selected D (raises BitcaseError on bad input)."""
    path = resolve_case(case_path)
    try:
        case = load_case(path)
    except CaseError as exc:
        raise BitcaseError(f"the case file {path} cannot be used:\n{exc}",
                           hint="fix the problems listed (`bitcase case check` shows them too)") from None
    with open_session(db) as session:
        deployments = list_deployments(session=session)
        evidence = load_evidence(session=session)
        reviews = list_reviews(session=session)
    chosen = pick_deployments(deployments, config)
    subjects = code_digests(p for n in case.nodes for p in n.subjects)
    evaluations = []
    for d in chosen:
        subjects_here = {**subjects, "deployment": d.digest}
        evaluations.append((evaluate(case, evidence=evidence, reviews=reviews, subjects=subjects_here,
                                     deployment_digest=d.digest, deployment_fields=d.fields), dict(d.fields)))
    if not chosen:  # an empty store: the case with nothing discharged, so the report still says so
        evaluations.append((evaluate(case, evidence=(), reviews=reviews, subjects=subjects,
                                     deployment_digest=""), {}))
    return StoreState(case=case, case_ref=display_path(path), case_digest=file_digest(path), store_ref=store_label(db),
                      deployments=tuple(deployments), evaluations=tuple(evaluations),
                      evidence=tuple(evidence), reviews=tuple(reviews))
