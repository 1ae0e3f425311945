"""`bitcase compare` and `bitcase check-config`: run the comparison protocol and the runtime checks as evidence."""

from __future__ import annotations

import json
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator, Literal, Optional

import typer

from assurance.cli._choices import SCALES, SUITES, choice_enum
from assurance.cli._common import EXIT_FINDINGS, JsonOption, err_console, fail, out_console
from assurance.cli._signing import SignKeyOption, load_signing_key
from evidence_db.unique_keys import loads_unique

Suite = choice_enum("Suite", SUITES)

ModelOption = Annotated[Path, typer.Option("--model", metavar="DIR", help="Checkpoint directory (config.json + *.safetensors).",
                                           show_default=False)]
OutOption = Annotated[Path, typer.Option("--out", metavar="FILE", help="Evidence bundle to write (JSONL, for `bitcase ingest`).",
                                         show_default=False)]
DeviceOption = Annotated[str, typer.Option("--device", metavar="DEVICE", help="cpu, cuda or cuda:N.")]
ScaleOption = Annotated[Literal[SCALES], typer.Option(
    "--scale", help="ci (tiny model, CPU, minutes) or full (8K prompts, GPU).")]
DeploymentOption = Annotated[Optional[Path], typer.Option(
    "--deployment", metavar="FILE", dir_okay=False,
    help='Expected deployment configuration D, {"fields": {...}} (see check-config --write-deployment); '
         "default: D as computed on this machine.")]


def _load_deployment(path: Path | None):
    if path is None:
        return None
    from evidence_db.bundle import Deployment

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Deployment(fields=data["fields"], digest=data.get("digest", ""))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"--deployment {path}: not a deployment file ({exc})",
             hint="write one with `bitcase check-config --write-deployment FILE.json`")


def _signer(spec: str | None):
    """The signing key, loaded before the run so a bad key fails fast (exit 2)."""
    from evidence_db.errors import KeyringError

    try:
        return load_signing_key(spec)
    except KeyringError as exc:
        fail(str(exc), hint=exc.hint)


def _finish(records, out: Path, json_output: bool, extra: dict, signer=None) -> None:
    from engine.compare.summary import is_clean, summarize
    from evidence_db.bundle import write_bundle

    try:
        count = write_bundle(out, records, signer=signer)
    except OSError as exc:
        fail(f"cannot write the bundle {out}: {exc}")
    summary = summarize(records)
    signed = f", signed by {signer.key_id}" if signer is not None else ""
    err_console.print(f"wrote {count} records to {out}{signed}", highlight=False)
    if json_output:
        typer.echo(json.dumps({"bundle": str(out), "records": count, **extra, "obligations": summary,
                               "signed_by": None if signer is None else signer.key_id}, sort_keys=True))
    else:
        from rich.table import Table

        # only the count columns some obligation uses (check-config has none)
        columns = [c for c in ("units", "comparisons", "passed", "failed", "detected", "errors")
                   if any(s[c] for s in summary.values())]
        table = Table("status", *columns)
        table.add_column("obligation", no_wrap=True)
        for name, s in summary.items():
            colour = "green" if s["status"] == "pass" else "red"
            table.add_row(f"[{colour}]{s['status']}[/]", *(str(s[c] or "-") for c in columns), name)
        out_console.print(table)
    if not is_clean(records):
        raise typer.Exit(EXIT_FINDINGS)


def compare(
    model: ModelOption,
    out: OutOption,
    suite: Annotated[Optional[list[Suite]], typer.Option("--suite", help="Suite to run (repeatable; default: all).")]
    = None,
    scale: ScaleOption = "ci",
    shard: Annotated[str, typer.Option("--shard", metavar="I/N", help="Run shard i of n (e.g. 2/4); the n shards make one run.")] = "1/1",
    device: DeviceOption = "cpu",
    deployment: DeploymentOption = None,
    label: Annotated[str, typer.Option(
        "--label", metavar="LABEL", help="Mark a deliberate re-run of identical code, weights and D (new record ids).")] = "",
    gpus: Annotated[int, typer.Option(
        "--gpus", metavar="N", min=1, help="Split the run over GPUs cuda:0..N-1, one shard process each (needs --device cuda; "
                              "not with --shard).")] = 1,
    sign_key: SignKeyOption = None,
    worker_timeout: Annotated[Optional[float], typer.Option(
        "--worker-timeout", metavar="SECONDS",
        help="Seconds a reference worker or shard process may stay silent before its comparisons fail "
             "(default: $BITCASE_WORKER_TIMEOUT, else 900).", show_default=False)] = None,
    resume: Annotated[Optional[Path], typer.Option(
        "--resume", metavar="FILE", dir_okay=False,
        help="The bundle an interrupted run of the same command wrote: its units are not run again and "
             "--out (another file) gets the rest; ingest both.", show_default=False)] = None,
    json_output: JsonOption = False,
) -> None:
    """Run the bitwise comparison suites on the engine and write test_result evidence.

    Every determinism comparison is bitwise on full float32 logit rows, tokens and sampler states,
    against cold references; missing witnesses (no chunking, no cache hit, no eviction) are errors.
    The fidelity suite is the one tolerance claim: logits within a stated distance of transformers.
    The runtime configuration checks run too. Exit 1 if any record is not a pass.

    Interrupted (Ctrl-C, or SIGTERM as a time limit sends), a run writes the units that finished
    (with --gpus, every shard's) to --out and exits 1; --resume with that bundle runs the rest.
    """
    import sys

    from engine.compare.api import CompareInputError, CompareInterrupted, plan, run_suites
    from engine.compare.progress import ProgressEvent
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from engine.compare.worker_client import resolve_timeout

    suites = [s.value for s in suite] if suite else ["all"]
    expected = _load_deployment(deployment)
    signer = _signer(sign_key)
    done, has_runtime = _written(resume, out) if resume is not None else (set(), False)
    try:
        plan(model, suites, scale, shard=shard, device=device)
        worker_timeout = resolve_timeout(worker_timeout)
    except ValueError as exc:  # CompareInputError, or a bad --worker-timeout / $BITCASE_WORKER_TIMEOUT
        fail(str(exc), hint="see `bitcase compare --help`")
    if gpus > 1:
        _check_gpus(gpus, device, shard)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=False) as bar:
        task = bar.add_task("compare", total=None)

        def progress(event: ProgressEvent) -> None:
            if event.kind == "start":
                bar.update(task, total=event.total)
            elif event.kind == "unit":
                bar.update(task, completed=event.done, description=event.message)
            else:
                bar.update(task, description=event.message)
        command = ["bitcase", *sys.argv[1:]]
        from engine.compare.devices import DevicesInterrupted

        try:
            with _sigterm_interrupts():
                if gpus > 1:
                    records = _run_on_gpus(model, suites, scale, gpus, expected, label, command, progress,
                                           worker_timeout, done, runtime=not has_runtime)
                else:
                    records = run_suites(model, suites, scale=scale, device=device, shard=shard, progress=progress,
                                         deployment=expected, label=label, command=command,
                                         worker_timeout=worker_timeout, done=done, runtime=not has_runtime)
        except CompareInterrupted as exc:
            bar.stop()
            _interrupted(exc.records, len(exc.finished), len(exc.finished) + len(exc.remaining), out, signer)
        except DevicesInterrupted as exc:
            bar.stop()
            _interrupted(exc.records, exc.num_finished, exc.num_units, out, signer)
    _finish(records, out, json_output, {"scale": scale, "shard": shard, "device": device, "gpus": gpus}, signer)


def _written(resume: Path, out: Path) -> tuple[set[str], bool]:
    """Record ids in the bundle an interrupted run wrote, and whether it holds runtime checks."""
    if resume.resolve() == out.resolve():
        fail(f"--resume {resume} and --out {out} are one file: the finished units' records would be replaced",
             hint="write the rest to another file, e.g. --out rest.jsonl")
    ids, has_runtime = set(), False
    try:
        with open(resume, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    record = loads_unique(line)  # a repeated key would make parsers disagree on the id
                    ids.add(record["id"])
                except (ValueError, KeyError, TypeError) as exc:
                    fail(f"{resume}:{number}: not an evidence record ({type(exc).__name__}: {exc})",
                         hint="--resume takes the bundle an interrupted `bitcase compare` wrote")
                has_runtime = has_runtime or record.get("category") == "runtime_config_check"
    except OSError as exc:
        fail(f"cannot read --resume {resume}: {exc}")
    return ids, has_runtime


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Inside the block SIGTERM (a time limit's signal) interrupts like Ctrl-C, so finished units are kept."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupted(records, num_finished: int, num_units: int, out: Path, signer) -> None:
    from evidence_db.bundle import write_bundle

    if not records:
        fail(f"interrupted before any unit finished; nothing written ({num_units} units not run)",
             code=EXIT_FINDINGS)
    try:
        count = write_bundle(out, records, signer=signer)
    except OSError as err:
        fail(f"interrupted, and cannot write the bundle {out}: {err}", code=EXIT_FINDINGS)
    fail(f"interrupted: {num_finished} of {num_units} units finished; "
         f"{count} records written to {out} (no runtime checks yet)",
         hint=f"run the same command with --resume {out} --out OTHER.jsonl for the other units, then ingest both",
         code=EXIT_FINDINGS)


def _check_gpus(gpus: int, device: str, shard: str) -> None:
    if device != "cuda":
        fail(f"--gpus {gpus} needs --device cuda (the shards run on cuda:0..{gpus - 1})")
    if shard.replace(" ", "") != "1/1":
        fail("--gpus and --shard cannot be combined", hint="shard across machines with --shard, or across "
                                                            "one machine's GPUs with --gpus")
    import torch

    visible = torch.cuda.device_count()
    if gpus > visible:
        fail(f"--gpus {gpus}: only {visible} CUDA device(s) are visible", hint=f"pass --gpus {visible} or fewer")


def _run_on_gpus(model, suites, scale, gpus, expected, label, command, progress, worker_timeout, done, *,
                 runtime: bool):
    from engine.compare.api import deployment_for, runtime_checks, selected_suites
    from engine.compare.devices import DeviceRunError, run_on_devices

    deployment = expected or deployment_for(model, scale, "cuda")
    try:
        records = run_on_devices(model, selected_suites(suites), scale, devices=[f"cuda:{i}" for i in range(gpus)],
                                 deployment=deployment, label=label, command=command, progress=progress,
                                 worker_timeout=worker_timeout, done=done)
    except DeviceRunError as exc:  # the run did not complete: no bundle, and not a usage error
        fail(str(exc), hint="nothing was written; see the shard's log above", code=EXIT_FINDINGS)
    if not runtime:  # the resumed bundle holds them
        return records
    return records + runtime_checks(model, "cuda", scale, deployment=deployment, command=command,
                                    source=f"bitcase compare, {gpus} GPUs")


def check_config(
    model: ModelOption,
    out: OutOption,
    device: DeviceOption = "cpu",
    scale: Annotated[Literal[SCALES], typer.Option("--scale", help="Which deployment limits to check.")] = "ci",
    deployment: DeploymentOption = None,
    write_deployment: Annotated[Optional[Path], typer.Option(
        "--write-deployment", metavar="FILE", dir_okay=False,
        help="Also write this machine's D, for other machines' --deployment.")] = None,
    sign_key: SignKeyOption = None,
    json_output: JsonOption = False,
) -> None:
    """Run the runtime configuration checks and write runtime_config_check evidence.

    runtime.plan (sealed plan digest; every recorded launch in the plan; outside launches refused),
    runtime.no_autotune (static scan and loaded modules), runtime.deployment (the engine starts
    only under D; versions, accelerator and thread count equal D) and, under a D that runs the
    run-time finiteness check, trusted.attention-finiteness (every rope_store_kv and combine launch
    checked; a cached K/V row made NaN ends its request). Exit 1 if a check fails.
    """
    import sys

    from engine.compare.api import CompareInputError, deployment_for, runtime_checks

    expected = _load_deployment(deployment)
    signer = _signer(sign_key)
    try:
        if write_deployment is not None:
            d = deployment_for(model, scale, device)
            write_deployment.write_text(json.dumps({"fields": d.fields, "digest": d.digest}, indent=1, sort_keys=True))
            err_console.print(f"wrote D {d.digest} to {write_deployment}", highlight=False)
        with err_console.status("running the runtime configuration checks"):
            records = runtime_checks(model, device, scale, deployment=expected,
                                     command=["bitcase", *sys.argv[1:]])
    except CompareInputError as exc:
        fail(str(exc), hint="see `bitcase check-config --help`")
    _finish(records, out, json_output, {"device": device, "scale": scale}, signer)


def register(app: typer.Typer) -> None:
    """Add the top-level `compare` and `check-config` commands to the main app."""
    app.command("compare")(compare)
    app.command("check-config")(check_config)
