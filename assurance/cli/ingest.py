"""`bitcase ingest`: load evidence bundles and JUnit XML reports into the evidence store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from assurance.cli._common import DbOption, JsonOption, err_console
from assurance.cli.db import store_errors


def ingest(
    paths: Annotated[list[Path], typer.Argument(
        help="Bundles (*.jsonl, *.json), JUnit XML reports (*.xml), directories of them, or - for a JSONL "
             "bundle on standard input.", show_default=False)],
    db: DbOption = None,
    obligation: Annotated[list[str] | None, typer.Option(
        "--obligation", metavar="TESTID_GLOB=OBLIGATION",
        help="JUnit only: obligation for test ids (classname.name) matching the glob; repeatable, first match "
             "wins; a testcase property `obligation` takes precedence.")] = None,
    deployment: Annotated[Path | None, typer.Option(
        "--deployment", metavar="FILE.json",
        help='JUnit only: the deployment configuration the tests ran under, {"fields": {...}}; default: the '
             "testsuite property bitcase.deployment.")] = None,
    require_signed: Annotated[bool, typer.Option(
        "--require-signed", help="Refuse (exit 2, storing nothing) any input not signed by a trusted key "
                                 "(`bitcase key trust`); JUnit reports and standard input cannot be signed.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Ingest evidence into the store in one transaction: a bad record stores nothing (exit 2).

    Re-ingesting identical records is a no-op; a stored record id with different content is an
    error. A bundle with a detached signature (<bundle>.sig) must match it (else exit 2) and is
    stored with its signer. The summary goes to stderr; --json prints the counts to stdout.
    """
    from assurance.settings import resolve_db_url
    from evidence_db.ingest import SignaturePolicy, expand_paths, ingest_paths, load_deployment_file, parse_obligation_map
    from evidence_db.keyring import keyring_from_env
    from evidence_db.reader import sniff_kind
    from evidence_db.session import open_session, store_label

    url = resolve_db_url(db)
    with store_errors():
        files = expand_paths(paths)
        mapping = parse_obligation_map(obligation or [])
        deployment_obj = load_deployment_file(deployment) if deployment is not None else None
        trusted = keyring_from_env().trusted()
        if (mapping or deployment_obj) and not any(sniff_kind(f) == "junit" for f in files):
            err_console.print("[yellow]note:[/] --obligation and --deployment apply to JUnit XML only; "
                              "bundles carry their own")
        with open_session(url, write=True) as session, err_console.status("ingesting…"):
            results = ingest_paths(session=session, paths=files, obligation_map=mapping, deployment=deployment_obj,
                                   signed=SignaturePolicy(trusted, is_signed_required=require_signed))
    added = sum(r.added for _, r in results)
    unchanged = sum(r.unchanged for _, r in results)
    for path, result in results:
        err_console.print(f"{escape(str(path))}: {result.added} added, {result.unchanged} unchanged, "
                          f"{escape(_signed_label(result.signed_by, trusted))}", soft_wrap=True, highlight=False)
    err_console.print(f"[bold]ingested[/] {added} added, {unchanged} unchanged into {escape(store_label(url))}",
                      soft_wrap=True, highlight=False)
    if json_output:
        typer.echo(json.dumps({
            "store": store_label(url), "added": added, "unchanged": unchanged,
            "files": [{"path": str(p), "added": r.added, "unchanged": r.unchanged, "signed_by": r.signed_by,
                       "trusted_as": None if r.signed_by is None else trusted.name_of(r.signed_by)}
                      for p, r in results],
        }))


def _signed_label(key_id: str | None, trusted) -> str:
    if key_id is None:
        return "unsigned"
    name = trusted.name_of(key_id)
    return f"signed by {key_id} " + (f"(trusted as {name})" if name is not None else "(key not trusted)")


def register(app: typer.Typer) -> None:
    """Add the top-level `ingest` command to the main app."""
    app.command("ingest")(ingest)
