"""`bitcase audit`: check the evidence store's integrity."""

from __future__ import annotations

import json

import typer

from assurance.cli._common import EXIT_FINDINGS, DbOption, JsonOption, err_console
from assurance.cli.db import store_errors
from evidence_db.views import ChainFault

audit_app = typer.Typer(name="audit", help="Audit the evidence store and the assurance case.", no_args_is_help=True)


@audit_app.command("verify")
def verify(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Recompute the store's hash chain; exit 1 naming the first row edited, deleted, reordered or outside it.

    Detects changes made behind bitcase's back (e.g. raw SQL), and names every stray row (seq
    below 1 or beyond the head, two rows at one position). Record the printed head digest
    elsewhere to also detect a store rewritten wholesale.
    """
    from evidence_db.session import open_session, store_label
    from evidence_db.verify import verify_chain

    with store_errors(), open_session(db) as session, err_console.status("verifying the hash chain…"):
        report = verify_chain(session=session)
    if json_output:
        typer.echo(json.dumps({
            "store": store_label(db), "intact": report.is_intact, "rows": report.num_rows,
            "head": {"seq": report.head_seq, "digest": report.head_digest},
            "first_bad": None if report.first_bad is None else _fault_json(report.first_bad),
            "faults": [_fault_json(f) for f in report.faults],
        }))
    elif report.is_intact:
        typer.echo(f"hash chain intact: {report.num_rows} rows, head seq {report.head_seq} {report.head_digest}")
    else:
        first = report.first_bad
        typer.echo(f"hash chain BROKEN: first bad row seq {first.seq} ({_label(first)}): {first.reason}")
        for fault in report.faults[1:]:
            typer.echo(f"  also seq {fault.seq} ({_label(fault)}): {fault.reason}")
    if not report.is_intact:
        raise typer.Exit(EXIT_FINDINGS)


def _label(fault: ChainFault) -> str:
    return f"{fault.kind} {fault.key!r}" if fault.key else fault.kind


def _fault_json(fault: ChainFault) -> dict[str, object]:
    return {"seq": fault.seq, "kind": fault.kind, "key": fault.key, "reason": fault.reason}


def register(app: typer.Typer) -> None:
    """Add the `audit` group (with `verify`) to the main app."""
    app.add_typer(audit_app, name="audit")
