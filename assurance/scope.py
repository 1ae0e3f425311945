"""Assemble an evaluation from the store: which case, which D, which plan, which current digests.

This is the only assurance module that reads the evidence store or the file system; the status
engine itself (:mod:`assurance.status`) stays pure. ``evidence_db``, ``kernels.plan`` and
``engine.deployment`` are imported lazily.
"""

from __future__ import annotations

import gc
import importlib
import os
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any, Iterator, Mapping

from assurance.case_cache import cache_key, load_cached, store_cached
from assurance.case_loader import load_case
from assurance.case_model import Case
from assurance.evaluation import Evaluation
from assurance.generators import expand_case
from assurance.issues import CaseError
from assurance.plan_source import PlanUnavailable, items_for_deployment, preset_items
from assurance.status import evaluate
from assurance.subjects import code_digests, subject_root
from assurance.validate import validate_case

__all__ = ["BUNDLED_CASE", "CASE_ENV", "DeploymentChoice", "Assessment", "default_case_path", "prepare_case",
           "choose_deployment", "engine_deployment", "current_subjects", "evaluate_under", "assess", "paused_gc"]

BUNDLED_CASE = Path(__file__).resolve().parent / "cases" / "determinism.toml"
CASE_ENV = "BITCASE_CASE"
CACHE_MIN_NODES = 1000  # smaller cases parse in milliseconds
_MODEL_FIELDS = ("weights_digest", "model_digest", "model.weights_digest", "model.digest")


def default_case_path(*, home: Path, environ: Mapping[str, str] | None = None) -> Path:
    """``$BITCASE_CASE``, else the copy ``bitcase init`` made (``<home>/case.toml``), else the bundled case."""
    env = os.environ if environ is None else environ
    if env.get(CASE_ENV):
        return Path(env[CASE_ENV]).expanduser()
    copy = home / "case.toml"
    return copy if copy.is_file() else BUNDLED_CASE


def prepare_case(path: Path, *, plan: str | None = None, deployment_fields: Mapping[str, Any] | None = None,
                 cache_dir: Path | None = None) -> tuple[Case, list[str]]:
    """Load, validate and expand the case at ``path``; return it with notes for the user.

    The plan is the preset ``plan`` when given, else the one D records. When neither is at hand the
    case stays unexpanded (its generated goals evaluate as incomplete) and a note says why.
    Cases of at least ``CACHE_MIN_NODES`` nodes are cached under ``cache_dir`` (see
    :mod:`assurance.case_cache`). Raises :class:`CaseError` for an invalid case.
    """
    try:
        items, label = (preset_items(plan), f"preset plan {plan}") if plan else items_for_deployment(deployment_fields)
        note = None
    except PlanUnavailable as exc:
        items, label, note = None, "", f"generated obligations left out: {exc}"
    key = cache_key(path, items)
    case = load_cached(cache_dir, key, path)
    if case is None:
        case = load_case(path)
        issues = validate_case(case)
        if not issues and case.generators and items is not None:
            case = expand_case(case, items, label=label)
            issues = validate_case(case)
        if issues:
            raise CaseError(issues)
        if len(case.nodes) >= CACHE_MIN_NODES:
            store_cached(cache_dir, key, case)
    return case, [note] if note and case.generators else []


@dataclass(frozen=True, slots=True)
class DeploymentChoice:
    """The deployment configuration D a status is evaluated under, and how it was chosen."""

    digest: str
    fields: dict[str, Any] | None
    source: str  # why this D: where its spec came from and how it resolved (see assurance.pinning)


def engine_deployment() -> tuple[DeploymentChoice | None, str]:
    """The configuration the bundled engine would run now, or ``None`` with the reason it cannot say."""
    try:
        module = importlib.import_module("engine.deployment")
        build = getattr(module, "current_deployment")
        deployment = build()
    except Exception as exc:  # noqa: BLE001 - any failure here means "not available", with its reason
        return None, f"{type(exc).__name__}: {exc}"
    return DeploymentChoice(deployment.digest, dict(deployment.fields), "the engine's current configuration"), ""


def choose_deployment(spec: str, deployments: list[Any], *, why: str = "--config") -> DeploymentChoice:
    """Resolve a D spec (see :mod:`assurance.pinning`) against the store's deployments (oldest first).

    ``latest``: the newest in the store, else the engine's current one; ``current``: the
    engine's; otherwise a digest or a unique prefix of one (with or without ``sha256:``).
    ``why`` says where the spec came from; the choice's ``source`` carries it and how it
    resolved. Raises :class:`~assurance.cli._common.BitcaseError` when nothing matches.
    """
    from assurance.cli._common import BitcaseError

    if spec == "latest":
        if deployments:
            last = deployments[-1]
            return DeploymentChoice(last.digest, dict(last.fields), f"{why}: `latest`, the latest in the store")
        current, reason = engine_deployment()
        if current is not None:
            return DeploymentChoice(current.digest, current.fields, f"{why}: `latest`, but the store holds none, so "
                                                                    "the engine's current configuration")
        raise BitcaseError(f"the store holds no deployment configuration yet, and the engine cannot report its "
                           f"current one ({reason})",
                           hint="ingest evidence first (`bitcase assure` or `bitcase ingest`), or pass --config DIGEST")
    if spec == "current":
        current, reason = engine_deployment()
        if current is None:
            raise BitcaseError(f"the engine cannot report its current deployment configuration here ({reason}); "
                               f"D is `current` because of: {why}",
                               hint="pass --config DIGEST (`bitcase status --config latest` shows the newest stored D)")
        stored = next((d for d in deployments if d.digest == current.digest), None)
        fields = current.fields if stored is None else dict(stored.fields)
        return DeploymentChoice(current.digest, fields, f"{why}: `current`, {current.source}")
    wanted = spec if spec.startswith("sha256:") else f"sha256:{spec}"
    matches = [d for d in deployments if d.digest.startswith(wanted)]
    if len(matches) == 1:
        return DeploymentChoice(matches[0].digest, dict(matches[0].fields), why)
    if len(matches) > 1:
        raise BitcaseError(f"{spec} ({why}) matches {len(matches)} deployment configurations",
                           hint="give more digits: " + ", ".join(d.digest[:19] for d in matches[:5]))
    if len(wanted) == len("sha256:") + 64:
        return DeploymentChoice(wanted, None, f"{why} (not in the store)")
    known = ", ".join(d.digest[:19] for d in deployments[-5:]) or "none"
    raise BitcaseError(f"no deployment configuration matches {spec} ({why})",
                       hint=f"known (newest last): {known}; or pass a full sha256 digest, `latest` or `current`")


def _model_digest(fields: Mapping[str, Any] | None) -> str | None:
    for name in _MODEL_FIELDS:
        value: Any = fields or {}
        for part in name.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value:
            return value
    return None


def current_subjects(case: Case, deployment_fields: Mapping[str, Any] | None = None,
                     *, root: Path | None = None) -> dict[str, str]:
    """Current digests of every subject the case's solutions cover (``code:`` files under ``root``,
    by default :func:`~assurance.subjects.subject_root`, and the model)."""
    patterns = {p for node in case.nodes for p in node.subjects}
    subjects = code_digests(patterns, root=root or subject_root(case))
    model = _model_digest(deployment_fields)
    if model:
        subjects["model"] = model
    return subjects


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while large, acyclic view lists are built and walked.

    With 100,000 evidence views alive, every full collection re-traverses them all; the status
    rules create no reference cycles, so pausing saves about a third of the evaluation's CPU time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(frozen=True)
class Assessment:
    """An evaluation with where its inputs came from; ``evaluation`` is None when the chain is broken."""

    evaluation: Evaluation | None
    deployment: DeploymentChoice
    case_path: Path
    store: Any  # the evidence_db.verified_read.VerifiedStore it was evaluated from, its views dropped
    notes: list[str] = field(default_factory=list)


def evaluate_under(case_path: Path, deployment: DeploymentChoice, *, evidence: list[Any], reviews: list[Any],
                   plan: str | None = None, today: date | None = None, cache_dir: Path | None = None,
                   elsewhere: Mapping[str, int] | None = None, root: Path | None = None
                   ) -> tuple[Evaluation, list[str]]:
    """Evaluate the case at ``case_path`` under one D from already-loaded views.

    Loads, validates and expands the case for D's plan, computes the current subject digests and
    runs the status engine; returns the evaluation and notes for the user. The report and the
    claim commands share this so they evaluate identically. ``evidence`` holds every item, or
    only D's with ``elsewhere`` counting the others per obligation (see :func:`evaluate`).
    ``root`` (``--root DIR``) overrides where the case's ``code:`` subjects resolve.
    """
    case, notes = prepare_case(case_path, plan=plan, deployment_fields=deployment.fields, cache_dir=cache_dir)
    if root is not None:
        case = case.with_nodes(case.nodes, root=str(root.resolve()))
    evaluation = evaluate(case, evidence=evidence, reviews=reviews,
                          subjects=current_subjects(case, deployment.fields), deployment_digest=deployment.digest,
                          deployment_fields=deployment.fields, today=today, elsewhere=elsewhere)
    return evaluation, notes


def check_deployment_fields(choice: DeploymentChoice) -> None:
    """Refuse a stored D whose fields do not hash to its digest (its `when` conditions would lie)."""
    from evidence_db.bundle import Deployment
    from evidence_db.errors import StoreDamaged

    if choice.fields is None:
        return
    try:
        Deployment(fields=choice.fields, digest=choice.digest)
    except ValueError:
        raise StoreDamaged(f"the stored fields of deployment configuration {choice.digest} do not hash to its "
                           "digest: they were edited outside bitcase",
                           hint="run `bitcase audit verify` and restore the store from a backup") from None


def assess(*, db: str | None, case_path: Path, home: Path, config: str | None = None, plan: str | None = None,
           today: date | None = None, cache_dir: Path | None = None, root: Path | None = None) -> Assessment:
    """Evaluate the case at ``case_path`` against the store at ``db`` under the D it should judge.

    D comes from ``config``, else the case's or the project's pin (see :mod:`assurance.pinning`).
    The whole hash chain is verified in the same read (:func:`evidence_db.verified_read.read_verified`);
    with any fault the assessment carries no evaluation. Reads only what the status rules use:
    D's items, with ``details`` decoded only where the rules read them, and a per-obligation
    count of the items under other configurations.
    """
    from assurance.pinning import gate_pin
    from assurance.solution_status import RULE_DETAILS
    from evidence_db.junit_revisions import superseded_record_ids
    from evidence_db.session import open_session
    from evidence_db.store import list_deployments
    from evidence_db.verified_read import read_verified

    pin = gate_pin(config, case_path=case_path, home=home, bundled_case=BUNDLED_CASE)
    with paused_gc(), open_session(db) as session:
        choice = choose_deployment(pin.spec, list_deployments(session=session), why=pin.why)
        store = read_verified(session=session, deployment_digest=choice.digest, with_details=RULE_DETAILS)
        superseded = superseded_record_ids(session=session)  # a re-mapping may have moved records to another D
    checked = replace(store, evidence=[], elsewhere={}, reviews=[])  # 100,000 live views would slow every GC pass
    if not store.chain.is_intact:
        return Assessment(None, choice, case_path, checked)
    check_deployment_fields(choice)
    evidence, num_superseded = store.evidence, 0
    if superseded:
        evidence = [e for e in evidence if e.item_id not in superseded]
        num_superseded = len(store.evidence) - len(evidence)
    with paused_gc():
        evaluation, notes = evaluate_under(case_path, choice, evidence=evidence, reviews=store.reviews,
                                           plan=plan, today=today, cache_dir=cache_dir, elsewhere=store.elsewhere,
                                           root=root)
        del store, evidence
    if num_superseded:
        notes.append(f"{num_superseded} JUnit record(s) under D were superseded by a re-mapping of their report "
                     "and are not counted")
    return Assessment(evaluation, choice, case_path, checked, notes)
