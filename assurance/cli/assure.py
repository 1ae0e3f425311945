"""`bitcase assure` and `bitcase refresh`: run the producers, ingest, evaluate, render."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from assurance.cli._aliases import deprecated_alias, either
from assurance.cli._choices import STAGES, choice_enum
from assurance.cli._common import EXIT_FINDINGS, BitcaseError, DbOption, JsonOption, err_console, fail
from assurance.cli._signing import SignKeyOption, load_signing_key

SUPPORTED = ("supported", "supported-under-trust")

ModelOption = Annotated[Path | None, typer.Option(
    "--model", metavar="DIR", help="Hugging Face-format checkpoint directory (default: a random tiny model made on first use; "
                    "with --gpu the llama-1b preset).", file_okay=False)]
OutDirOption = Annotated[Path | None, typer.Option(
    "--out-dir", metavar="DIR", help="Directory for the report and diagram (default: $BITCASE_OUT or ./bitcase-out).",
    file_okay=False)]
OutAlias = Annotated[Path | None, deprecated_alias("--out", "--out-dir", metavar="DIR", file_okay=False)]
GpuOption = Annotated[bool, typer.Option("--gpu", help="Run the full-scale producers on CUDA (llama-1b, bf16).")]
GpusOption = Annotated[int | None, typer.Option(
    "--gpus", metavar="N", min=1, help="With --gpu: split the comparison suites over this many GPUs, one shard process each "
                          "(default: every visible GPU).")]
ForceOption = Annotated[bool, typer.Option("--force", help="Recompute all evidence, fresh or not.")]
Stage = choice_enum("Stage", STAGES)
StageOption = Annotated[list[Stage] | None, typer.Option("--stage", help="Only this producer stage (repeatable).")]
CaseFileOption = Annotated[Path | None, typer.Option(
    "--case", metavar="FILE", help="Case TOML file (default: $BITCASE_CASE, the copy `bitcase init` made, else the bundled case).",
    dir_okay=False)]


def _devices(gpu: bool, gpus: int | None) -> tuple[str, ...]:
    """cuda:0..N-1 for --gpus N (default: every visible GPU); () on the CPU or with one GPU."""
    if not gpu:
        if gpus is not None:
            fail("--gpus needs --gpu", hint="add --gpu, or leave --gpus out for a CPU run")
        return ()
    import torch

    visible = torch.cuda.device_count()
    if visible == 0:
        fail("--gpu: no CUDA device is visible to torch", hint="run on a CUDA machine, or leave --gpu out")
    count = visible if gpus is None else gpus
    if count > visible:
        fail(f"--gpus {count}: only {visible} CUDA device(s) are visible", hint=f"pass --gpus {visible} or fewer")
    return tuple(f"cuda:{i}" for i in range(count)) if count > 1 else ()


def _options(*, model, db, out, gpu, force, stage, case, rendering, gpus=None, sign_key=None):
    from assurance.pipeline.options import AssureOptions
    from assurance.scope import default_case_path
    from assurance.settings import load_settings

    settings = load_settings(db=db)
    case_path = case or default_case_path(home=settings.home)
    if not case_path.is_file():
        fail(f"case file {case_path} does not exist", hint="pass --case FILE or leave it out for the bundled case")
    try:
        signer = load_signing_key(sign_key)
    except BitcaseError as exc:
        fail(str(exc), hint=exc.hint)
    try:
        return AssureOptions(db_url=settings.db_url, home=settings.home, out_dir=out or settings.out_dir,
                             case_path=case_path, model_dir=model, device="cuda" if gpu else "cpu",
                             scale="full" if gpu else "ci", devices=_devices(gpu, gpus), is_forced=force, stages=tuple(s.value for s in stage) if stage else STAGES,
                             is_rendering=rendering, signing_key=signer)
    except ValueError as exc:
        fail(str(exc))


def _run(options, json_out: bool) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from assurance.cli._case_options import user_errors
    from assurance.pipeline.run import run_pipeline

    tasks: dict[str, int] = {}
    with Progress(TextColumn("{task.fields[stage]:>10}"), TextColumn("{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err_console, transient=False) as bar:
        last_tenth: dict[str, int] = {}

        def progress(stage: str, message: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(message, total=max(total, 1), stage=stage)
            bar.update(tasks[stage], description=message[:60], completed=done, total=max(total, 1))
            if not err_console.is_terminal:  # logs get a line per stage start and per tenth done
                tenth = (10 * done) // max(total, 1)
                if last_tenth.get(stage) != tenth:
                    last_tenth[stage] = tenth
                    err_console.print(f"{stage}: {done}/{total} {message}", highlight=False, soft_wrap=True)

        try:
            with user_errors():
                result = run_pipeline(options, command=tuple(sys.argv), say=lambda m: bar.console.print(m),
                                      progress=progress)
        except KeyboardInterrupt:
            err_console.print("interrupted: the evidence of every finished stage is in the store; "
                              "run the same command again to resume", style="yellow", soft_wrap=True)
            raise typer.Exit(code=130) from None
        except FileNotFoundError as exc:
            fail(str(exc))
    _summary(result)
    primary = next(iter(result.top_claims))
    if json_out:
        typer.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        for claim, status in result.top_claims.items():
            typer.echo(f"{claim}: {status}")
        if result.report:
            typer.echo(f"report: {result.report}")
            typer.echo(f"diagram: {result.diagram}")
    if result.top_claims[primary] not in SUPPORTED or any(s.action == "error" for s in result.stages):
        raise typer.Exit(code=EXIT_FINDINGS)


def _summary(result) -> None:
    from rich.table import Table

    table = Table(title=f"bitcase assure · D {result.deployment_digest[:23]}", title_justify="left")
    for column in ("stage", "action", "obligations", "records", "added", "seconds", "note"):
        table.add_column(column)
    for s in result.stages:
        style = {"error": "red", "ran": "green", "reused": "cyan"}.get(s.action, "")
        table.add_row(s.stage, f"[{style}]{s.action}[/]" if style else s.action, str(len(s.obligations)),
                      str(s.num_records), str(s.num_added), f"{s.seconds:.1f}",
                      "see below" if s.action == "error" else s.message)
    err_console.print(table)
    for s in result.stages:
        if s.action == "error":
            err_console.print(f"[red]stage {s.stage} failed:[/] {s.message}", highlight=False, soft_wrap=True)
    for note in result.notes:
        err_console.print(f"note: {note}", style="yellow", highlight=False)


def assure(model: ModelOption = None, db: DbOption = None, out_dir: OutDirOption = None, out: OutAlias = None, gpu: GpuOption = False,
           gpus: GpusOption = None, force: ForceOption = False, stage: StageOption = None, case: CaseFileOption = None,
           sign_key: SignKeyOption = None, json_out: JsonOption = False) -> None:
    """Run every evidence producer, ingest, evaluate the case under D, write the report and diagram.

    Incremental: a producer runs only for obligations whose evidence under D is stale or missing.
    Interrupting loses no ingested evidence; run again to resume. Ends with the verdict of each top
    claim and the report's path; exits 1 when the determinism claim is not supported.
    """
    try:
        out = either(out_dir, out, new="--out-dir", old="--out")
    except BitcaseError as exc:
        fail(str(exc), hint=exc.hint)
    _run(_options(model=model, db=db, out=out, gpu=gpu, force=force, stage=stage, case=case, rendering=True,
                  gpus=gpus, sign_key=sign_key), json_out)


def refresh(model: ModelOption = None, db: DbOption = None, gpu: GpuOption = False, gpus: GpusOption = None,
            stage: StageOption = None, case: CaseFileOption = None, sign_key: SignKeyOption = None,
            json_out: JsonOption = False) -> None:
    """Recompute only stale or missing evidence under D and ingest it (no report)."""
    _run(_options(model=model, db=db, out=None, gpu=gpu, force=False, stage=stage, case=case, rendering=False,
                  gpus=gpus, sign_key=sign_key), json_out)


def register(app: typer.Typer) -> None:
    """Add `assure` and `refresh` to the main app."""
    app.command("assure")(assure)
    app.command("refresh")(refresh)
