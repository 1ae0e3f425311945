"""`bitcase ingest`: load evidence bundles and JUnit XML reports into the evidence store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from assurance.cli._case_options import CaseOption, user_errors
from assurance.cli._common import DbOption, JsonOption, err_console
from assurance.cli.db import store_errors

MAX_LISTED_TESTS = 5


def ingest(
    paths: Annotated[list[Path], typer.Argument(
        metavar="PATH", help="Bundles (*.jsonl, *.json), JUnit XML reports (*.xml), directories of them, or - for a JSONL "
             "bundle on standard input.", show_default=False)],
    db: DbOption = None,
    obligation: Annotated[list[str] | None, typer.Option(
        "--obligation", metavar="TESTID_GLOB=OBLIGATION",
        help="JUnit only: obligation for test ids (classname.name) matching the glob; repeatable, first match "
             "wins; a testcase property `obligation` takes precedence.")] = None,
    deployment: Annotated[Path | None, typer.Option(
        "--deployment", metavar="FILE", dir_okay=False,
        help='JUnit only: the deployment configuration the tests ran under, {"fields": {...}}; default: the '
             "testsuite property bitcase.deployment.")] = None,
    require_signed: Annotated[bool, typer.Option(
        "--require-signed", help="Refuse (exit 2, storing nothing) any input not signed by a trusted key "
                                 "(`bitcase key trust`); JUnit reports and standard input cannot be signed.")] = False,
    default_obligation: Annotated[str | None, typer.Option(
        "--default-obligation", metavar="OBLIGATION",
        help="JUnit only: obligation for test cases that neither a property nor --obligation maps.")] = None,
    skip_unmapped: Annotated[bool, typer.Option(
        "--skip-unmapped", help="JUnit only: leave out test cases without an obligation (they are listed on "
                                "stderr) instead of refusing the report.")] = False,
    remap: Annotated[bool, typer.Option(
        "--remap", help="JUnit only: the report was ingested before with another mapping; store its changed test "
                        "cases as new records that supersede the stored ones (both are kept).")] = False,
    case: CaseOption = None,
    any_obligation: Annotated[bool, typer.Option(
        "--any-obligation", help="Do not check --obligation and --default-obligation targets against the case "
                                 "(for evidence of obligations it does not define yet).")] = False,
    json_output: JsonOption = False,
) -> None:
    """Ingest evidence into the store in one transaction: a bad record stores nothing (exit 2).

    Re-ingesting identical records is a no-op; a stored record id with different content is an
    error, except that --remap supersedes a JUnit report's earlier mapping. Obligations named
    by --obligation and --default-obligation must exist in the case. A bundle with a detached
    signature (<bundle>.sig) must match it (else exit 2) and is stored with its signer. The
    summary goes to stderr; --json prints the counts to stdout.
    """
    from assurance.settings import resolve_db_url
    from evidence_db.ingest import (JunitOptions, SignaturePolicy, expand_paths, ingest_paths, load_deployment_file,
                                    parse_obligation_map)
    from evidence_db.junit import unmapped_tests
    from evidence_db.junit_revisions import superseded_record_ids
    from evidence_db.keyring import keyring_from_env
    from evidence_db.reader import sniff_kind
    from evidence_db.session import open_session, store_label

    url = resolve_db_url(db)
    with store_errors():
        files = expand_paths(paths)
        mapping = parse_obligation_map(obligation or [])
        if skip_unmapped and default_obligation:
            raise typer.BadParameter("--skip-unmapped has no effect with --default-obligation; pass one of them",
                                     param_hint="--skip-unmapped")
        if not any_obligation and (mapping or default_obligation):
            _check_targets(case, db, mapping, default_obligation)
        deployment_obj = load_deployment_file(deployment) if deployment is not None else None
        trusted = keyring_from_env().trusted()
        junit_options = bool(mapping or deployment_obj or default_obligation or skip_unmapped or remap)
        reports = [f for f in files if sniff_kind(f) == "junit"] if junit_options else []
        if junit_options and not reports:
            err_console.print("[yellow]note:[/] --obligation, --default-obligation, --skip-unmapped, --remap and "
                              "--deployment apply to JUnit XML only; bundles carry their own")
        skipped = {f: unmapped_tests(f, obligation_map=mapping) for f in reports} if skip_unmapped else {}
        options = JunitOptions(obligation_map=tuple(mapping), deployment=deployment_obj,
                               default_obligation=default_obligation, skip_unmapped=skip_unmapped, remap=remap)
        with open_session(url, write=True) as session, err_console.status("ingesting…"):
            before = superseded_record_ids(session=session)
            results = ingest_paths(session=session, paths=files, junit=options,
                                   signed=SignaturePolicy(trusted, is_signed_required=require_signed))
            superseded = sorted(superseded_record_ids(session=session) - before)
    added = sum(r.added for _, r in results)
    unchanged = sum(r.unchanged for _, r in results)
    for path, result in results:
        err_console.print(f"{escape(str(path))}: {result.added} added, {result.unchanged} unchanged, "
                          f"{escape(_signed_label(result.signed_by, trusted))}", soft_wrap=True, highlight=False)
    for path, tests in skipped.items():
        if tests:
            shown = ", ".join(tests[:MAX_LISTED_TESTS]) + (" …" if len(tests) > MAX_LISTED_TESTS else "")
            err_console.print(f"{escape(str(path))}: {len(tests)} test case(s) without an obligation left out: "
                              f"{escape(shown)}", soft_wrap=True, highlight=False)
    if superseded:
        err_console.print(f"{len(superseded)} stored record(s) superseded by the new mapping (kept in the store, "
                          "no longer counted)", soft_wrap=True, highlight=False)
    err_console.print(f"[bold]ingested[/] {added} added, {unchanged} unchanged into {escape(store_label(url))}",
                      soft_wrap=True, highlight=False)
    if json_output:
        typer.echo(json.dumps({
            "store": store_label(url), "added": added, "unchanged": unchanged, "superseded": superseded,
            "files": [{"path": str(p), "added": r.added, "unchanged": r.unchanged, "signed_by": r.signed_by,
                       "trusted_as": None if r.signed_by is None else trusted.name_of(r.signed_by),
                       **({"skipped_tests": skipped[p]} if p in skipped else {})} for p, r in results],
        }))


def _signed_label(key_id: str | None, trusted) -> str:
    if key_id is None:
        return "unsigned"
    name = trusted.name_of(key_id)
    return f"signed by {key_id} " + (f"(trusted as {name})" if name is not None else "(key not trusted)")


def _check_targets(case: Path | None, db: str | None, mapping: list[tuple[str, str]], default: str | None) -> None:
    """Exit 2 when an obligation the user named is not one the case defines."""
    from assurance.case_loader import load_case
    from assurance.cli._case_options import resolve_case_path
    from assurance.obligation_targets import check_targets

    with user_errors():
        loaded = load_case(resolve_case_path(case, db))
        targets = [(f"--obligation '{glob}={target}'", target) for glob, target in mapping]
        check_targets(loaded, targets + ([(f"--default-obligation {default}", default)] if default else []))


def register(app: typer.Typer) -> None:
    """Add the top-level `ingest` command to the main app."""
    app.command("ingest")(ingest)
