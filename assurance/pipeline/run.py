"""Produce → ingest → evaluate → render, incrementally and safely interruptible.

Each stage's records are written as one bundle (atomically) and ingested in one transaction,
so an interruption loses at most the stage in flight and the next run resumes from the store:
a stage runs only for obligations whose evidence under D is stale or missing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from assurance.evaluation import TRUSTED_STATUSES
from assurance.pipeline.options import AssureOptions
from assurance.pipeline.stages import StageContext, run_stage, stage_obligations

__all__ = ["StageOutcome", "AssureResult", "prepare_model", "run_pipeline", "NEEDS_RUN"]

# Obligation statuses a producer can change by running again.
NEEDS_RUN = ("stale", "missing")


@dataclass
class StageOutcome:
    """What one stage did: ran (with counts) or reused fresh evidence, or failed to run."""

    stage: str
    action: str  # "ran" | "reused" | "error" | "skipped"
    obligations: list[str] = field(default_factory=list)
    num_records: int = 0
    num_added: int = 0
    seconds: float = 0.0
    bundle: str = ""
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AssureResult:
    """The verdict and where everything went."""

    deployment_digest: str
    model_dir: str
    stages: list[StageOutcome]
    top_claims: dict[str, str]  # claim id -> derived status
    report: str = ""
    diagram: str = ""
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"deployment": self.deployment_digest, "model": self.model_dir, "top_claims": self.top_claims,
                "report": self.report, "diagram": self.diagram, "notes": self.notes,
                "stages": [s.to_json() for s in self.stages]}


def prepare_model(options: AssureOptions, say: Callable[[str], None]) -> Path:
    """The model directory: ``--model``, or the preset made once under the home directory."""
    from engine.checkpoint import make_checkpoint

    if options.model_dir is not None:
        if not (options.model_dir / "config.json").is_file():
            raise FileNotFoundError(f"{options.model_dir}: no config.json; pass a Hugging Face-format checkpoint "
                                    f"directory, or leave --model out to use the {options.preset} preset")
        return options.model_dir.resolve()
    target = (options.home / "models" / options.preset).resolve()
    if not (target / "config.json").is_file():
        say(f"making the {options.preset} preset model (random weights, seed 0) in {target}")
        make_checkpoint(options.preset, target, seed=0)
    return target


def _obligation_statuses(options: AssureOptions, deployment) -> tuple[dict[str, str], Any, list[str]]:
    """Evaluate the case under D from the store; map every obligation id to its derived status.

    The store is read through its verified chain: a broken chain stops the run (exit 1) naming the first bad row.
    """
    from assurance.scope import DeploymentChoice, evaluate_under, paused_gc
    from evidence_db.errors import StoreDamaged
    from evidence_db.session import open_session
    from evidence_db.verified_read import chain_summary, read_verified

    with paused_gc(), open_session(options.db_url) as session:
        store = read_verified(session=session, deployment_digest=deployment.digest)
    if not store.chain.is_intact:
        raise StoreDamaged(f"the store fails verification: {chain_summary(store.chain_json())}",
                           hint="`bitcase audit verify` lists every bad row; restore the store from a backup")
    choice = DeploymentChoice(deployment.digest, dict(deployment.fields), "bitcase assure")
    evaluation, notes = evaluate_under(options.case_path, choice, evidence=store.evidence, reviews=store.reviews,
                                       elsewhere=store.elsewhere)
    statuses = {o.id: o.status for n in evaluation.nodes.values() for o in n.obligations}
    return statuses, evaluation, notes


def _ingest(options: AssureOptions, bundle: Path) -> int:
    from evidence_db.ingest import ingest_paths
    from evidence_db.session import open_session

    with open_session(options.db_url, write=True) as session:
        results = ingest_paths(session=session, paths=[bundle])
    return sum(r.added for _, r in results)


def run_pipeline(options: AssureOptions, *, command: tuple[str, ...], say: Callable[[str], None],
                 progress: Callable[[str, str, int, int], None]) -> AssureResult:
    """Run the stages that have stale or missing obligations under D, ingest each, then render."""
    from engine.compare.api import deployment_for
    from evidence_db.migrate import ensure_store

    ensure_store(options.db_url)
    model_dir = prepare_model(options, say)
    deployment = deployment_for(model_dir, options.scale, options.device)
    say(f"deployment configuration D {deployment.digest}")
    label = datetime.now(timezone.utc).strftime("forced-%Y%m%dT%H%M%S") if options.is_forced else ""
    bundle_dir = options.home / "bundles" / deployment.digest.removeprefix("sha256:")[:16]
    outcomes: list[StageOutcome] = []
    for stage in options.stages:
        statuses, _, _ = _obligation_statuses(options, deployment)
        owned = stage_obligations(stage, list(statuses), deployment.fields)
        # a trusted obligation a stage owns (the finiteness premise) is run until evidence discharges it
        wanted = owned if options.is_forced else [o for o in owned if statuses[o] in NEEDS_RUN + TRUSTED_STATUSES]
        if not owned:
            outcomes.append(StageOutcome(stage, "skipped", message="the case has no obligation for this stage"))
            continue
        if not wanted:
            outcomes.append(StageOutcome(stage, "reused", owned, message="evidence under D is fresh"))
            continue
        ctx = StageContext(model_dir=model_dir, deployment=deployment, device=options.device, scale=options.scale,
                           label=label, command=command, progress=lambda m, d, t, s=stage: progress(s, m, d, t),
                           db_url=options.db_url, devices=options.devices)
        outcomes.append(_run_stage(options, stage, ctx, wanted, bundle_dir, label))
    _, evaluation, notes = _obligation_statuses(options, deployment)
    result = AssureResult(deployment.digest, str(model_dir), outcomes,
                          {t: evaluation.node(t).status for t in evaluation.tops}, notes=notes)
    if options.is_rendering:
        result.report, result.diagram = _render(options, result, say)
    return result


def _run_stage(options: AssureOptions, stage: str, ctx: StageContext, wanted: list[str], bundle_dir: Path,
               label: str) -> StageOutcome:
    """Run one stage, storing each part's records (one bundle, one transaction) as soon as it is done."""
    from evidence_db.bundle import write_bundle

    outcome = StageOutcome(stage, "ran", wanted)
    started = time.perf_counter()
    bundles: list[str] = []
    try:
        for part, records in run_stage(stage, ctx, wanted):
            name = "-".join(x for x in (stage, part, label) if x)
            bundle = bundle_dir / f"{name}.jsonl"
            write_bundle(bundle, records, signer=options.signing_key)
            outcome.num_added += _ingest(options, bundle)
            outcome.num_records += len(records)
            bundles.append(str(bundle))
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # a producer that cannot run is reported, the others still run
        outcome.action = "error"
        outcome.message = f"{type(exc).__name__}: {exc}"
        if bundles:
            outcome.message += f" (the {len(bundles)} part(s) finished before it are stored)"
    outcome.seconds = time.perf_counter() - started
    outcome.bundle = ", ".join(bundles)
    return outcome


def _render(options: AssureOptions, result: AssureResult, say: Callable[[str], None]) -> tuple[str, str]:
    from assurance.pipeline.outputs import render_outputs

    return render_outputs(db_url=options.db_url, case_path=options.case_path, out_dir=options.out_dir,
                          deployment_digest=result.deployment_digest, say=say)
