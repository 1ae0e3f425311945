"""The comparison protocol's Python API, called by ``bitcase compare`` and the ``bitcase assure`` pipeline.

>>> records = run_suites("models/tiny", ["batch"], scale="ci", device="cpu", shard="1/1")  # doctest: +SKIP
>>> write_bundle(Path("compare.jsonl"), records)                                          # doctest: +SKIP
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from engine.compare.identity import RunIdentity, code_subjects, model_subject, producer, run_key
from engine.compare.progress import ProgressCallback
from engine.compare.protocol import PROTOCOL_SEED, PROTOCOL_VERSION, SUITES, suite_names
from engine.compare.records import unit_records
from engine.compare.references import DEFAULT_FACTORY, load_factory
from engine.compare.runner import plan_units, run_units, shard_units
from engine.compare.scales import ScaleSpec, scale_spec
from engine.compare.sharding import Shard, parse_shard
from engine.model_config import read_model_spec
from evidence_db.bundle import Deployment, EvidenceRecord, Subject, utc_now

__all__ = ["run_suites", "plan", "CompareInputError"]


class CompareInputError(ValueError):
    """Bad input to a compare run (unknown suite, scale or shard; a model the scale cannot run)."""


def _suites(suites: str | Sequence[str]) -> tuple[str, ...]:
    names: list[str] = []
    for item in ([suites] if isinstance(suites, str) else list(suites)):
        try:
            names.extend(n for n in suite_names(item) if n not in names)
        except ValueError as exc:
            raise CompareInputError(str(exc)) from None
    return tuple(n for n in SUITES if n in names)


def _check_model(model_dir: Path, scale: ScaleSpec) -> int:
    try:
        spec = read_model_spec(model_dir)
    except ValueError as exc:
        raise CompareInputError(str(exc)) from None
    if spec.max_position_embeddings < scale.max_model_len:
        raise CompareInputError(
            f"{model_dir}: max_position_embeddings {spec.max_position_embeddings} is below the {scale.name} "
            f"scale's longest request ({scale.max_model_len} positions); use --scale ci or a larger model")
    return spec.vocab_size


def plan(suites: str | Sequence[str] = "all", scale: str = "ci", *, vocab_size: int,
         shard: str | Shard = "1/1", seed: int = PROTOCOL_SEED) -> list:
    """The units a shard would run (no engine needed): for dry runs, docs and the sharding tests."""
    try:
        spec = scale_spec(scale)
        shard_obj = shard if isinstance(shard, Shard) else parse_shard(shard)
    except ValueError as exc:
        raise CompareInputError(str(exc)) from None
    return shard_units(plan_units(_suites(suites), spec, vocab_size, seed), shard_obj)


def run_suites(model_dir: str | Path, suites: str | Sequence[str] = "all", scale: str = "ci",
               device: str = "cpu", shard: str | Shard = "1/1", progress: ProgressCallback | None = None, *,
               deployment: Deployment, weights_digest: str, factory: str = DEFAULT_FACTORY, label: str = "",
               command: Sequence[str] | None = None, seed: int = PROTOCOL_SEED) -> list[EvidenceRecord]:
    """Run the comparison protocol on the engine and return ``test_result`` evidence records.

    Parameters
    ----------
    model_dir : checkpoint directory (config.json + safetensors).
    suites : ``"all"``, one suite name, or a list of them (see ``engine.compare.protocol.SUITES``).
    scale : ``"ci"`` (tiny model, CPU, minutes) or ``"full"`` (8K prompts, GPU).
    device : ``"cpu"`` or ``"cuda"``.
    shard : ``"i/n"``: run only shard ``i`` of ``n`` (units are assigned deterministically, so the
        ``n`` shards together are exactly the full run).
    progress : called with :class:`~engine.compare.progress.ProgressEvent` values.
    deployment : the deployment configuration D every record names.
    weights_digest : digest of the checkpoint's weights (the ``model:`` subject).
    factory : ``"module:attribute"`` of the engine factory (tests pass a fake engine).
    label : mixed into the run key, to record a deliberate re-run of identical code and weights
        under new ids (without it, a re-run's records collide with the first run's at ingest).

    Returns one record per unit plus one per failing or erroring comparison; see
    ``engine/compare/records.py`` for the granularity and ``docs/comparison-protocol.md``.
    Raises :class:`CompareInputError` for bad input before anything runs.
    """
    model_dir = Path(model_dir)
    try:
        spec = scale_spec(scale)
        shard_obj = shard if isinstance(shard, Shard) else parse_shard(shard)
    except ValueError as exc:
        raise CompareInputError(str(exc)) from None
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise CompareInputError(f"device {device!r} is not cpu, cuda or cuda:N")
    names = _suites(suites)
    vocab_size = _check_model(model_dir, spec)
    all_units = plan_units(names, spec, vocab_size, seed)
    units = shard_units(all_units, shard_obj)
    subjects: tuple[Subject, ...] = (Subject(f"deployment:{deployment.digest}", deployment.digest),
                                     model_subject(weights_digest), *code_subjects())
    key = run_key(deployment=deployment, subjects=subjects, scale=spec.name, seed=seed,
                  protocol=PROTOCOL_VERSION, label=label)
    started = utc_now()
    outcomes = run_units(units, model_dir=model_dir, scale=spec, vocab_size=vocab_size, seed=seed, device=device,
                         factory=load_factory(factory), factory_spec=factory, progress=progress)
    accelerator = _accelerator(device)
    identity = RunIdentity(key=key, deployment=deployment, subjects=subjects, scale=spec.name, seed=seed,
                           shard=str(shard_obj),
                           producer=producer("bitcase compare", command or sys.argv, accelerator, started, utc_now()))
    suite_units = {}
    for u in all_units:
        suite_units.setdefault(u.suite, []).append(u.unit_id)
    return [r for o in outcomes for r in unit_records(o, identity, suite_units[o.unit.suite])]


def _accelerator(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(torch.device(device))
    return "cpu"
