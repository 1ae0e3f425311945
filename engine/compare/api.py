"""The comparison protocol's Python API, called by ``bitcase compare`` / ``check-config`` and ``bitcase assure``.

>>> records = run_suites("models/tiny", "all", scale="ci", device="cpu", shard="1/1")   # doctest: +SKIP
>>> records += runtime_checks("models/tiny", device="cpu")                             # doctest: +SKIP
>>> write_bundle(Path("evidence.jsonl"), records)                                      # doctest: +SKIP
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Sequence

from engine.compare.identity import RunIdentity, code_subjects, core_digest, model_subject, producer, run_key
from engine.compare.progress import ProgressCallback
from engine.compare.protocol import PROTOCOL_SEED, PROTOCOL_VERSION, SUITES, suite_names
from engine.compare.records import record_id, unit_records
from engine.compare.reference_worker import DEFAULT_FACTORY, load_factory
from engine.compare.runner import RunInterrupted, plan_units, run_units
from engine.compare.scales import ScaleSpec, scale_spec
from engine.compare.sharding import Shard, parse_shard, select
from engine.compare.units import Unit
from engine.compare.worker_client import resolve_timeout
from engine.model_config import read_model_spec
from evidence_db.bundle import Deployment, EvidenceRecord, Subject, utc_now

if TYPE_CHECKING:
    from engine.config import EngineConfig

__all__ = ["run_suites", "runtime_checks", "plan", "deployment_for", "run_key_for", "selected_suites",
           "CompareInputError", "CompareInterrupted"]


class CompareInputError(ValueError):
    """Bad input to a compare run (unknown suite, scale or shard; a model the scale cannot run)."""


class CompareInterrupted(KeyboardInterrupt):
    """A run stopped by KeyboardInterrupt: ``records`` of the units that finished, ``remaining`` unit ids.

    Still a KeyboardInterrupt, so a caller that does not keep partial runs (``bitcase assure``,
    which stores whole suites) stops as before."""

    def __init__(self, records: list[EvidenceRecord], finished: Sequence[str], remaining: Sequence[str]) -> None:
        super().__init__(f"interrupted after {len(finished)} of {len(finished) + len(remaining)} units")
        self.records, self.finished, self.remaining = records, list(finished), list(remaining)


def selected_suites(suites: str | Sequence[str]) -> tuple[str, ...]:
    """Suite names (``"all"`` expanded), each once, in protocol order; unknown names raise."""
    names: list[str] = []
    for item in ([suites] if isinstance(suites, str) else list(suites)):
        try:
            names.extend(n for n in suite_names(item) if n not in names)
        except ValueError as exc:
            raise CompareInputError(str(exc)) from None
    return tuple(n for n in SUITES if n in names)


def _inputs(model_dir: Path, scale: str, shard: str | Shard, device: str) -> tuple[ScaleSpec, Shard, int]:
    try:
        spec = scale_spec(scale)
        shard_obj = shard if isinstance(shard, Shard) else parse_shard(shard)
        model = read_model_spec(model_dir)
    except ValueError as exc:
        raise CompareInputError(str(exc)) from None
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise CompareInputError(f"device {device!r} is not cpu, cuda or cuda:N")
    if model.max_position_embeddings < spec.max_model_len:
        raise CompareInputError(
            f"{model_dir}: max_position_embeddings {model.max_position_embeddings} is below the {spec.name} "
            f"scale's {spec.max_model_len} positions; use --scale ci or a larger model")
    return spec, shard_obj, model.vocab_size


def deployment_for(model_dir: str | Path, scale: str = "ci", device: str = "cpu") -> Deployment:
    """The deployment configuration D a compare run of ``scale`` on ``device`` names (and runs under).

    At ``ci`` scale this is the engine's default configuration, the D ``bitcase assure`` evaluates.
    """
    from engine.deployment import current_deployment

    try:
        return current_deployment(Path(model_dir), device=device, **dict(scale_spec(scale).deployment))
    except ValueError as exc:  # unreadable checkpoint or configuration: the message names it
        raise CompareInputError(str(exc)) from None


def _subjects(deployment: Deployment) -> tuple[Subject, ...]:
    return (Subject(f"deployment:{deployment.digest}", deployment.digest),
            model_subject(deployment.fields["weights_digest"]), *code_subjects())


def run_key_for(deployment: Deployment, scale: str = "ci", *, label: str = "", seed: int = PROTOCOL_SEED) -> str:
    """The run key a compare run would use (to look for its records in a store before running)."""
    return run_key(deployment=deployment, subjects=_subjects(deployment), scale=scale, seed=seed,
                   protocol=PROTOCOL_VERSION, label=label)


def plan(model_dir: str | Path, suites: str | Sequence[str] = "all", scale: str = "ci", *,
         shard: str | Shard = "1/1", device: str = "cpu", seed: int = PROTOCOL_SEED) -> list[Unit]:
    """The units a shard would run, without running anything (dry runs, input validation, docs).

    Raises :class:`CompareInputError` exactly when :func:`run_suites` would refuse the same input.
    """
    spec, shard_obj, vocab_size = _inputs(Path(model_dir), scale, shard, device)
    return select(plan_units(selected_suites(suites), spec, vocab_size, seed), shard_obj)


def run_suites(model_dir: str | Path, suites: str | Sequence[str] = "all", scale: str = "ci",
               device: str = "cpu", shard: str | Shard = "1/1", progress: ProgressCallback | None = None, *,
               deployment: Deployment | None = None, factory: str = DEFAULT_FACTORY, label: str = "",
               command: Sequence[str] | None = None, seed: int = PROTOCOL_SEED,
               runtime: bool = True, worker_timeout: float | None = None,
               done: Collection[str] = ()) -> list[EvidenceRecord]:
    """Run the comparison protocol on the engine and return evidence records.

    Parameters
    ----------
    model_dir : checkpoint directory (config.json + safetensors).
    suites : ``"all"``, a suite name, or a list of them (``engine.compare.protocol.SUITES``).
    scale : ``"ci"`` (tiny model, CPU, minutes) or ``"full"`` (8K prompts, GPU).
    device : ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    shard : ``"i/n"``: only shard ``i`` of ``n``; units are assigned deterministically, so the ``n``
        shards together are exactly the full run, and their records share one run key.
    progress : called with :class:`~engine.compare.progress.ProgressEvent` values.
    deployment : the D to run under and name; default :func:`deployment_for`. Every engine the
        suites start must match it up to the engine limits a suite varies, or the unit errors.
    factory : ``"module:attribute"`` of the engine factory (tests pass a fake engine).
    label : mixed into the run key to record a deliberate re-run of identical code, weights and D
        under new ids (without it such a re-run collides with the first at ingest, by design).
    runtime : also run :func:`runtime_checks` and append its records.
    worker_timeout : seconds a cold-reference worker may stay silent before its pending references
        fail (default ``$BITCASE_WORKER_TIMEOUT``, else 900); see ``engine/compare/worker_client.py``.
    done : record ids already written by an interrupted run of the same shard (its bundle); units
        whose record is among them are not run again, so the two bundles together are the shard.

    Returns ``test_result`` records (one per unit, one per failing or erroring comparison; see
    ``engine/compare/records.py``) and, with ``runtime``, ``runtime_config_check`` records.
    Raises :class:`CompareInputError` for bad input before anything runs, and
    :class:`CompareInterrupted` (the finished units' records, no runtime checks) on KeyboardInterrupt.
    """
    model_dir = Path(model_dir)
    spec, shard_obj, vocab_size = _inputs(model_dir, scale, shard, device)
    try:
        worker_timeout = resolve_timeout(worker_timeout)
    except ValueError as exc:
        raise CompareInputError(str(exc)) from None
    names = selected_suites(suites)
    deployment = deployment or deployment_for(model_dir, spec.name, device)
    subjects = _subjects(deployment)
    key = run_key_for(deployment, spec.name, label=label, seed=seed)
    all_units = plan_units(names, spec, vocab_size, seed)
    started = utc_now()
    todo = [u for u in select(all_units, shard_obj) if record_id(key, u.unit_id) not in done]
    interrupted = False
    try:
        outcomes = run_units(todo, model_dir=model_dir, scale=spec, vocab_size=vocab_size, seed=seed, device=device,
                             factory=load_factory(factory), factory_spec=factory,
                             expected_core=core_digest(deployment), progress=progress, worker_timeout=worker_timeout)
    except RunInterrupted as exc:
        outcomes, interrupted = exc.outcomes, True
    identity = RunIdentity(key=key, deployment=deployment, subjects=subjects, scale=spec.name, seed=seed,
                           shard=str(shard_obj), producer=producer("bitcase compare", command or sys.argv,
                                                                   _accelerator(device), started, utc_now()))
    suite_units: dict[str, list[str]] = {}
    for u in all_units:
        suite_units.setdefault(u.suite, []).append(u.unit_id)
    records = [r for o in outcomes for r in unit_records(o, identity, suite_units[o.unit.suite])]
    if interrupted:
        raise CompareInterrupted(records, [o.unit.unit_id for o in outcomes],
                                 [u.unit_id for u in todo[len(outcomes):]])
    if runtime:
        records += runtime_checks(model_dir, device, spec.name, deployment=deployment, command=command,
                                  source=f"bitcase compare, shard {shard_obj}")
    return records


def runtime_checks(model_dir: str | Path, device: str = "cpu", scale: str = "ci", *,
                   deployment: Deployment | None = None, command: Sequence[str] | None = None,
                   source: str = "bitcase check-config", config: "EngineConfig | None" = None) -> list[EvidenceRecord]:
    """Run the runtime configuration checks and return one ``runtime_config_check`` record each.

    ``deployment`` is the expected D (for example one sealed on another machine and loaded from a
    bundle); default :func:`deployment_for`. Checks: ``runtime.plan``, ``runtime.no_autotune``,
    ``runtime.deployment`` and, under a D with the finiteness check on, ``trusted.attention-finiteness``
    (see ``engine/compare/runtime_checks.py``). ``config`` checks an engine
    of that configuration (a server's) instead of the scale's; ``deployment`` must then be its D.
    """
    from engine.compare.runtime_checks import (FINITENESS_OBLIGATION, autotune_check, check_records,
                                               deployment_check, finiteness_check, plan_check)
    from engine.compare.runtime_probe import probe_engine
    from kernels.plan import plan_for

    model_dir = Path(model_dir)
    spec, _, _ = _inputs(model_dir, scale, "1/1", device)
    deployment = deployment or deployment_for(model_dir, spec.name, device)
    started = utc_now()
    config = spec.engine_config(device=device) if config is None else config
    model = read_model_spec(model_dir)
    recomputed = plan_for(model.shape(page_size=config.page_size, dtype=model.serving_dtype(config.dtype),
                                      check_finite=config.check_finite)).digest
    from engine.deployment import DeploymentMismatch

    probe, refusal, crash = None, None, None
    try:
        probe = probe_engine(model_dir, config, deployment)
    except DeploymentMismatch as exc:  # the engine refused D: the finding runtime.deployment exists for
        refusal = str(exc)
    except Exception as exc:  # the engine failed otherwise: nothing was checked, so no verdict
        crash = f"the probe run failed: {type(exc).__name__}: {exc}"
    if crash is None:
        deployment_result = deployment_check(probe, deployment.fields, deployment.digest, device, refusal)
    else:
        deployment_result = ("error", [crash], {})
    results = {"runtime.deployment": deployment_result}
    if probe is not None:
        results["runtime.plan"] = plan_check(probe, recomputed, deployment.fields)
    else:
        results["runtime.plan"] = ("error", [f"no probe run: {refusal or crash}"], {"plan_digest": recomputed})
    results["runtime.no_autotune"] = autotune_check()
    if deployment.fields.get("engine", {}).get("check_finite"):  # off: the premise stays trusted
        results[FINITENESS_OBLIGATION] = finiteness_check(probe, deployment.fields) if probe is not None else \
            ("error", [f"no probe run: {refusal or crash}"], {})
    subjects = _subjects(deployment)
    identity = RunIdentity(key=run_key(deployment=deployment, subjects=subjects, scale=spec.name, seed=0,
                                       protocol=PROTOCOL_VERSION),
                           deployment=deployment, subjects=subjects, scale=spec.name, seed=0, shard="1/1",
                           producer=producer(source.split(",")[0], command or sys.argv, _accelerator(device),
                                             started, utc_now()))
    return check_records(identity, results, source)


def _accelerator(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(torch.device(device))
    return "cpu"
