"""The evidence producers ``bitcase assure`` runs, and which obligations each one discharges.

Each stage returns evidence records; the pipeline writes them as a bundle and ingests it. A
stage runs only for its obligations that are stale or missing under D (or all, when forced).
torch, triton and z3 are imported inside the stage bodies.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from evidence_db.bundle import Deployment, EvidenceRecord, Producer, utc_now

__all__ = ["StageContext", "stage_obligations", "run_stage", "PROPERTY_TESTS", "Progress"]

Progress = Callable[[str, int, int], None]  # (message, done, total)

# Engine property tests whose JUnit results discharge the engine obligations of the default case.
PROPERTY_TESTS: dict[str, tuple[str, ...]] = {
    "engine.sampler": ("tests/engine/test_sampler.py",),
    "engine.cache.provenance": ("tests/engine/test_block_manager.py", "tests/engine/test_block_manager_stateful.py"),
    "engine.cache.publication": ("tests/engine/test_scheduler.py", "tests/engine/test_scheduler_stateful.py"),
    "engine.invariants": ("tests/engine/test_check_mode.py",),
    "engine.overlap": ("tests/engine/test_overlap.py",),
    "serving.http": ("tests/serving/test_openai_client.py",),
}
# The code a property test's evidence covers (its staleness subjects), by obligation; default: engine/.
PROPERTY_CODE: dict[str, tuple[str, ...]] = {"serving.http": ("engine/", "serving/")}


@dataclass(frozen=True)
class StageContext:
    """What every stage needs: the model, D, the device and scale, and a progress callback."""

    model_dir: Path
    deployment: Deployment
    device: str
    scale: str
    label: str  # mixed into record ids on a forced re-run
    command: tuple[str, ...]
    progress: Progress
    db_url: str = ""
    devices: tuple[str, ...] = ()  # split the comparison suites over these cuda:N devices

    def stored_evidence(self) -> list:
        """Every evidence view in the store (all configurations), for carrying proofs over."""
        from evidence_db.session import open_session
        from evidence_db.store import load_evidence

        with open_session(self.db_url) as session:
            return load_evidence(session=session)


def stage_obligations(stage: str, all_obligations: Sequence[str], d_fields: Mapping[str, Any] | None = None
                      ) -> list[str]:
    """The obligations (among the case's, under D of fields ``d_fields``) that ``stage`` produces evidence for."""
    if stage == "verify":
        return sorted(o for o in all_obligations if o.startswith("kernel.") and o.endswith(".contract"))
    if stage == "runtime":
        from engine.compare.protocol import FINITENESS_OBLIGATION, RUNTIME_OBLIGATIONS

        # the finiteness premise is checked only under a D that runs the check (engine.check_finite)
        finiteness = (FINITENESS_OBLIGATION,) if (d_fields or {}).get("engine", {}).get("check_finite") else ()
        return [o for o in RUNTIME_OBLIGATIONS + finiteness if o in all_obligations]
    if stage == "properties":
        return [o for o in PROPERTY_TESTS if o in all_obligations]
    if stage == "compare":
        from engine.compare.protocol import OBLIGATIONS

        return [o for o in OBLIGATIONS.values() if o in all_obligations]
    raise ValueError(f"unknown stage {stage!r}")


def run_stage(stage: str, ctx: StageContext, obligations: Sequence[str]) -> Iterator[tuple[str, list[EvidenceRecord]]]:
    """Run ``stage`` for ``obligations``; yield ``(part, records)`` as each part finishes.

    The comparison stage yields one part per suite, so the pipeline can store each suite's
    evidence before the next starts; the other stages yield one part (named ``""``).
    """
    if stage == "compare":
        yield from _compare(ctx, list(obligations))
        return
    yield "", {"verify": _verify, "runtime": _runtime, "properties": _properties}[stage](ctx, list(obligations))


def _verify(ctx: StageContext, obligations: list[str]) -> list[EvidenceRecord]:
    from assurance.pipeline.reuse import carry_proofs
    from proofs.planrun import targets_from_deployment
    from proofs.producer import producer_info, verify_plan_records

    keys = {o.removeprefix("kernel.").removesuffix(".contract") for o in obligations}
    targets = [t for t in targets_from_deployment(ctx.deployment.fields) or [] if t.key in keys]
    carried: list[EvidenceRecord] = []
    if targets and not ctx.label:  # a forced run re-verifies everything
        carried, remaining = carry_proofs(evidence=ctx.stored_evidence(), targets=targets,
                                          deployment=ctx.deployment,
                                          producer=producer_info(" ".join(ctx.command), utc_now()))
        keys = set(remaining)
        ctx.progress(f"{len(carried)} proofs carried over unchanged", len(carried), len(targets))
    if not keys:
        return carried
    return carried + verify_plan_records(deployment=ctx.deployment, keys=keys, progress=ctx.progress,
                                         command=" ".join(ctx.command))


def _runtime(ctx: StageContext, obligations: list[str]) -> list[EvidenceRecord]:
    from engine.compare.api import runtime_checks

    ctx.progress("runtime configuration checks", 0, 1)
    records = runtime_checks(ctx.model_dir, ctx.device, ctx.scale, deployment=ctx.deployment,
                             command=list(ctx.command), source="bitcase assure")
    ctx.progress("runtime configuration checks", 1, 1)
    return [r for r in records if r.obligation in obligations]


def _compare(ctx: StageContext, obligations: list[str]) -> Iterator[tuple[str, list[EvidenceRecord]]]:
    from engine.compare.api import run_suites
    from engine.compare.devices import run_on_devices
    from engine.compare.protocol import OBLIGATIONS

    suites = [name for name, obligation in OBLIGATIONS.items() if obligation in obligations]
    for number, suite in enumerate(suites, 1):
        def on_event(event, suite=suite, number=number) -> None:
            if event.kind in ("start", "unit"):
                ctx.progress(f"suite {number}/{len(suites)} {suite}: {event.message}", event.done, event.total)

        if len(ctx.devices) > 1:
            records = run_on_devices(ctx.model_dir, [suite], ctx.scale, devices=ctx.devices,
                                     deployment=ctx.deployment, label=ctx.label, command=list(ctx.command),
                                     progress=on_event)
        else:
            records = run_suites(ctx.model_dir, [suite], ctx.scale, ctx.devices[0] if ctx.devices else ctx.device,
                                 progress=on_event, deployment=ctx.deployment, label=ctx.label,
                                 command=list(ctx.command), runtime=False)
        yield suite, records


def _properties(ctx: StageContext, obligations: list[str]) -> list[EvidenceRecord]:
    """Run the engine's property tests under pytest and turn each test case into a ``test_result``."""
    from assurance.subjects import project_root
    from engine.compare.identity import code_subjects
    from evidence_db.bundle import Subject
    from evidence_db.canonical import file_digest
    from evidence_db.junit import junit_records

    root = project_root()
    files = [f for o in obligations for f in PROPERTY_TESTS[o]]
    missing = [f for f in files if not (root / f).is_file()]
    if missing:
        raise FileNotFoundError(f"property tests not found ({', '.join(missing)}): they ship with the source "
                                f"checkout; run bitcase from a clone of the repository")
    mapping = [(f"{Path(f).with_suffix('').as_posix().replace('/', '.')}.*", o) for o in obligations
               for f in PROPERTY_TESTS[o]]
    engine_subjects = tuple(s for s in code_subjects(root) if s.uri.startswith("code:engine/"))
    serving_subjects = tuple(Subject(f"code:{p.relative_to(root).as_posix()}", file_digest(p))
                             for p in sorted((root / "serving").glob("*.py")))

    def subjects_of(obligation: str) -> tuple[Subject, ...]:
        dirs = PROPERTY_CODE.get(obligation, ("engine/",))
        return engine_subjects + (serving_subjects if "serving/" in dirs else ())
    started = utc_now()
    ctx.progress("engine property tests", 0, 1)
    with tempfile.TemporaryDirectory(prefix="bitcase-junit-") as tmp:
        xml = Path(tmp) / "junit.xml"
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
                               *files], cwd=root, env=env, capture_output=True, text=True)
        if not xml.is_file():
            raise RuntimeError(f"pytest wrote no JUnit report (exit {proc.returncode}): {proc.stderr[-2000:]}")
        dicts = [d for _, d in junit_records(xml, obligation_map=mapping,
                                             deployment={"fields": ctx.deployment.fields})]
    ctx.progress("engine property tests", 1, 1)
    producer = Producer(tool="bitcase assure (engine property tests)", version=_version(),
                        command=" ".join(ctx.command), host=os.uname().nodename, accelerator="cpu",
                        started_at=started, finished_at=utc_now())
    return [EvidenceRecord(id=f"{d['id']}{':' + ctx.label if ctx.label else ''}", category="test_result",
                           obligation=d["obligation"], status=d["status"], summary=d["summary"], producer=producer,
                           deployment=ctx.deployment, subjects=subjects_of(d["obligation"]), details=d["details"],
                           produced_at=d["produced_at"]) for d in dicts]


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("bitcase")
    except metadata.PackageNotFoundError:
        return "0+unknown"

