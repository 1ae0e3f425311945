"""`bitcase probe URL`: black-box determinism evidence about an OpenAI-compatible deployment."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer

from assurance.cli._case_options import emit_json
from assurance.cli._choices import APIS, SCENARIOS, choice_enum
from assurance.cli._aliases import deprecated_alias, either
from assurance.cli._common import EXIT_FINDINGS, BitcaseError, DbOption, JsonOption, err_console, fail, out_console
from assurance.cli._signing import SignKeyOption, load_signing_key

Scenario = choice_enum("Scenario", SCENARIOS)
KEY_ENVS = ("BITCASE_PROBE_API_KEY", "OPENAI_API_KEY")
EXIT_INTERRUPTED = 130


def _declared(path: Path | None) -> dict[str, Any]:
    """The flags a --deployment file declares: ``{"fields": {...}}`` or a plain JSON object."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        fail(f"--deployment {path}: cannot read a JSON object ({exc})",
             hint='write the server\'s flags as JSON, e.g. {"fields": {"engine": "vllm 0.11", "max_num_seqs": 8}}')
    fields = data.get("fields", data) if isinstance(data, dict) else None
    if not isinstance(fields, dict):
        fail(f"--deployment {path}: expected a JSON object (or {{\"fields\": {{...}}}})",
             hint='e.g. {"fields": {"chunk_size": 512, "enable_prefix_caching": true}}')
    return fields


def _summary(run) -> dict[str, Any]:
    scenarios = {}
    for name, results in run.results.items():
        counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "inconclusive")}
        status = "fail" if counts["fail"] else "not exercised" if counts["inconclusive"] else "pass"
        findings = [r.summary for r in results if r.status != "pass"][:5]
        scenarios[name] = {"status": status, "units": len(results), "passed": counts["pass"], "failed": counts["fail"],
                           "not_exercised": counts["inconclusive"], "seconds": run.seconds[name],
                           "findings": findings}
    total = sum(run.seconds.values())
    return {"api": run.backend.api, "server_version": run.backend.version, "deployment_digest": run.deployment.digest,
            "resolution": run.resolution, "requests": run.num_requests, "retried": run.num_retried,
            "seconds": round(total, 3), "requests_per_s": round(run.num_requests / total, 2) if total else None,
            "logprob_values": run.num_logprobs, "logprob_values_not_float32": run.num_not_float32,
            "notes": list(run.backend.notes), "scenarios": scenarios}


def _print_table(summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table("status", "units", "passed", "failed", "not exercised", "seconds", "scenario")
    colours = {"pass": "green", "fail": "red", "not exercised": "yellow"}
    for name, s in summary["scenarios"].items():
        table.add_row(f"[{colours[s['status']]}]{s['status']}[/]", str(s["units"]), str(s["passed"]),
                      str(s["failed"]), str(s["not_exercised"]), f"{s['seconds']:.1f}", name)
    out_console.print(table)
    for name, s in summary["scenarios"].items():
        for finding in s["findings"]:
            out_console.print(f"{name}: {finding}", highlight=False, markup=False)


def _store(records, out: Path | None, db: str | None, signer=None) -> list[str]:
    """Write the bundle (signed with ``signer``) and/or ingest the records; where they went."""
    import tempfile

    from assurance.cli.db import store_errors
    from evidence_db.bundle import write_bundle

    where = []
    with tempfile.TemporaryDirectory(prefix="bitcase-probe-") as tmp:
        bundle = out
        if bundle is None and signer is not None:  # the store records a signer only from a signed bundle
            bundle = Path(tmp) / "probe.jsonl"
        if bundle is not None:
            try:
                write_bundle(bundle, records, signer=signer)
            except OSError as exc:
                fail(f"cannot write the bundle {bundle}: {exc}")
            if out is not None:
                where.append(str(out))
        if db is not None or out is None:
            from assurance.settings import resolve_db_url
            from evidence_db.ingest import SignaturePolicy, ingest_paths
            from evidence_db.keyring import keyring_from_env
            from evidence_db.session import open_session, store_label
            from evidence_db.store import ingest_records

            url = resolve_db_url(db)
            with store_errors():
                with open_session(url, write=True) as session:
                    if signer is None:
                        ingest_records(session=session, records=records)
                    else:  # through the signed bundle: its signature is checked and chained with its signer
                        ingest_paths(session=session, paths=[bundle],
                                     signed=SignaturePolicy(keyring_from_env().trusted()))
            where.append(store_label(url))
    return where


def _signer(spec: str | None):
    """The signing key, loaded before any request is sent, so a bad key fails fast (exit 2)."""
    from evidence_db.errors import KeyringError

    try:
        return load_signing_key(spec)
    except KeyringError as exc:
        fail(str(exc), hint=exc.hint)


def _check_store(out: Path | None, db: str | None) -> None:
    """Fail before probing, not after, when the store the records would go to cannot take them."""
    if db is None and out is not None:
        return
    from assurance.cli.db import store_errors
    from evidence_db.session import open_session

    with store_errors():
        with open_session(db):
            pass


def probe(
    url: Annotated[str, typer.Argument(metavar="URL", help="The server, e.g. http://127.0.0.1:8000/v1 (credentials are never "
                                            "stored).", show_default=False)],
    served_model_name: Annotated[Optional[str], typer.Option(
        "--served-model-name", metavar="NAME", help="Model name the server serves (as in /v1/models); required.",
        show_default=False)] = None,
    model: Annotated[Optional[str], deprecated_alias("--model", "--served-model-name", metavar="NAME")] = None,
    api: Annotated[Literal[APIS], typer.Option("--api", help="Server flavour (auto: detect it).")] = "auto",
    deployment: Annotated[Optional[Path], typer.Option(
        "--deployment", metavar="FILE", dir_okay=False,
        help='Flags of the deployment the server does not report, {"fields": {...}}; they become part of D.')] = None,
    out: Annotated[Optional[Path], typer.Option("--out", metavar="FILE", dir_okay=False, help="Evidence bundle to write (JSONL).")] = None,
    db: DbOption = None,
    concurrency: Annotated[int, typer.Option("--concurrency", metavar="N", min=1, max=64,
                                             help="Most requests in flight at once.")] = 8,
    requests: Annotated[int, typer.Option("--requests", metavar="N", min=1, max=32,
                                          help="Target prompts per scenario.")] = 2,
    max_tokens: Annotated[int, typer.Option("--max-tokens", metavar="N", min=1, max=1024,
                                            help="Tokens generated per target request.")] = 16,
    top_logprobs: Annotated[int, typer.Option("--top-logprobs", metavar="N", min=1, max=100000,
                                              help="Top-k logprobs to ask for (the server may cap it).")] = 20,
    chunk_size: Annotated[Optional[int], typer.Option(
        "--chunk-size", metavar="TOKENS", min=1, help="The server's prefill chunk in tokens (default: chunk_size in --deployment); "
                                    "without it long prompts are not exercised.")] = None,
    vocab: Annotated[int, typer.Option("--vocab", metavar="N", min=16, help="Token-id prompts use ids below this.")] = 256,
    scenario: Annotated[Optional[list[Scenario]], typer.Option(
        "--scenario", help="Scenario to run (repeatable; default: all).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", min=1.0, help="Seconds to wait for each answer.")] = 60.0,
    seed: Annotated[int, typer.Option("--seed", metavar="N", min=0, help="Prompt seed (0: fresh, so every prefix is new to the "
                                                            "server).")] = 0,
    sign_key: SignKeyOption = None,
    json_output: JsonOption = False,
) -> None:
    """Probe an OpenAI-compatible server's determinism from outside and record test_result evidence.

    Each scenario compares a request against itself under one change (repeat, concurrent companions,
    prefix reuse, long prompts, prefill against decode, seeded sampling) and must show the change
    happened, else it is reported as not exercised. Records go to --out and/or --db (default: the
    store) under an external D. Exit 1 if anything differed or was not exercised; 130 when
    interrupted (nothing is stored).
    """
    from probing.client import ProbeInputError, parse_endpoint
    from probing.protocol import run_probe
    from probing.scenario_base import Settings

    try:
        model = either(served_model_name, model, new="--served-model-name", old="--model")
    except BitcaseError as exc:
        fail(str(exc), hint=exc.hint)
    if model is None:
        fail("missing option --served-model-name NAME", hint="the model name the server lists at /v1/models")
    declared = _declared(deployment)
    _check_store(out, db)
    signer = _signer(sign_key)
    api_key = next((os.environ[k] for k in KEY_ENVS if os.environ.get(k)), None)
    settings = Settings(model=model, max_tokens=max_tokens, requests=requests, concurrency=concurrency, seed=seed)
    try:
        endpoint = parse_endpoint(url, api_key=api_key)
        run = _run_with_progress(run_probe, endpoint, settings, api=api, top_k=top_logprobs, vocab=vocab,
                                 chunk_size=chunk_size, declared=declared, scenarios=[s.value for s in scenario] if scenario else None, timeout_s=timeout,
                                 command=["bitcase", "probe", *_redacted(sys.argv[2:])])
    except ProbeInputError as exc:
        fail(str(exc), hint=exc.hint)
    except KeyboardInterrupt:
        err_console.print("interrupted: nothing was written or stored", highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    where = _store(run.records, out, db, signer)
    summary = {"endpoint": endpoint.display, "model": model, **_summary(run), "records": len(run.records),
               "stored": where}
    err_console.print(f"D {run.deployment.digest} (external: {run.backend.api} at {endpoint.display}); compared "
                      f"{run.resolution}; {len(run.records)} records to {', '.join(where)}", highlight=False,
                      soft_wrap=True)
    for note in run.backend.notes:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    if db is not None:  # claims are judged under one pinned D; this run's is the one to name
        err_console.print(f"judge it: bitcase check --case assurance/cases/external.toml --db {db} "
                          f"--config {run.deployment.digest}", highlight=False, soft_wrap=True, markup=False)
    if json_output:
        emit_json(summary)
    else:
        _print_table(summary)
    if not run.is_clean:
        raise typer.Exit(EXIT_FINDINGS)


def _redacted(args: list[str]) -> list[str]:
    """The command line as recorded: URLs without user, password or query."""
    from probing.client import ProbeInputError, parse_endpoint

    out = []
    for arg in args:
        try:
            out.append(parse_endpoint(arg).display if arg.startswith(("http://", "https://")) else arg)
        except ProbeInputError:
            out.append("<url>")
    return out


def _run_with_progress(run_probe, *args, **kwargs):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task("probe", total=None)

        def progress(message: str, done: int, owed: int) -> None:
            bar.update(task, description=message, completed=done, total=owed or None)
        return run_probe(*args, progress=progress, **kwargs)


def register(app: typer.Typer) -> None:
    """Add the top-level `probe` command to the main app."""
    app.command("probe")(probe)
