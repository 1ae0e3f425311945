"""`bitcase db`: create, migrate and inspect the evidence store's schema."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Annotated, Iterator

import typer

from rich.markup import escape

from assurance.cli._common import EXIT_FINDINGS, BitcaseError, DbOption, JsonOption, err_console

db_app = typer.Typer(name="db", help="Create, migrate and inspect the evidence store's schema.",
                     no_args_is_help=True)


@contextmanager
def store_errors() -> Iterator[None]:
    """Report store and input errors as a clear message with exit code 2 (1: a damaged store; no traceback).

    Printed unwrapped and unstyled inside, so file paths and field names stay copyable.
    """
    try:
        yield
    except BitcaseError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True, highlight=False)
        if exc.hint:
            err_console.print(f"[dim]hint:[/] {escape(exc.hint)}", soft_wrap=True, highlight=False)
        raise typer.Exit(exc.exit_code) from None


@db_app.command("upgrade")
def upgrade(
    db: DbOption = None,
    revision: Annotated[str, typer.Option("--revision", metavar="REVISION", help="Target revision (default: the newest).")] = "head",
    json_output: JsonOption = False,
) -> None:
    """Create the evidence store, or migrate it to the newest schema (safe to re-run)."""
    from assurance.settings import resolve_db_url
    from evidence_db.migrate import upgrade as run_upgrade

    with store_errors():
        state = run_upgrade(resolve_db_url(db), revision=revision)
    err_console.print(f"{state.url}: schema revision {state.current}" + (" (head)" if state.is_current else ""),
                      soft_wrap=True, highlight=False)
    if json_output:
        typer.echo(json.dumps({"store": state.url, "current": state.current, "head": state.head}))


@db_app.command("current")
def current(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Show the store's schema revision; exit 1 when it is missing or behind the newest."""
    from assurance.settings import resolve_db_url
    from evidence_db.engine import create_store_engine, describe_url
    from evidence_db.migrate import SchemaState, head_revision, schema_state
    from evidence_db.session import missing_sqlite_file

    url = resolve_db_url(db)
    with store_errors():
        if missing_sqlite_file(url) is not None:
            state = SchemaState(url=describe_url(url), current=None, head=head_revision())
        else:
            engine = create_store_engine(url)
            try:
                state = schema_state(engine, url)
            finally:
                engine.dispose()
    if json_output:
        typer.echo(json.dumps({"store": state.url, "current": state.current, "head": state.head,
                               "is_current": state.is_current}))
    else:
        typer.echo(f"{state.current or 'none'}" + (" (head)" if state.is_current else f" (head is {state.head})"))
    if not state.is_current:
        err_console.print(f"run `bitcase db upgrade --db '{state.url}'` to bring the store to {state.head}",
                          soft_wrap=True, highlight=False)
        raise typer.Exit(EXIT_FINDINGS)


@db_app.command("check")
def check(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Compare the store's tables with the models; exit 1 when they differ (schema drift)."""
    from assurance.settings import resolve_db_url
    from evidence_db.migrate import schema_drift
    from evidence_db.session import open_session

    url = resolve_db_url(db)
    with store_errors():
        with open_session(url):  # refuses a missing store or one behind head, with the fix
            pass
        diffs = [str(d) for d in schema_drift(url)]
    if json_output:
        typer.echo(json.dumps({"drift": diffs}))
    else:
        typer.echo("schema matches the models" if not diffs else "\n".join(diffs))
    if diffs:
        raise typer.Exit(EXIT_FINDINGS)


def register(app: typer.Typer) -> None:
    """Add the `db` group to the main app."""
    app.add_typer(db_app, name="db")
