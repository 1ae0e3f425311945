"""The ``bitcase`` command line: one module per command group, joined here.

Command modules import torch, triton and z3 only inside command bodies, so ``--help``
works without them.
"""

from __future__ import annotations

import importlib

import typer
from rich.markup import escape

from assurance.cli._common import BitcaseError, EXIT_USAGE, err_console

app = typer.Typer(
    name="bitcase",
    help="Evidence and assurance cases for bitwise-deterministic LLM inference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module exposes ``register(app)``; order here is the order of ``bitcase --help``.
COMMAND_MODULES = (
    "assurance.cli.assure",
    "assurance.cli.db",
    "assurance.cli.ingest",
    "assurance.cli.audit",
    "assurance.cli.case",
    "assurance.cli.claims",
    "assurance.cli.report",
    "assurance.cli.review",
    "assurance.cli.verify",
    "assurance.cli.model",
    "assurance.cli.generate",
    "assurance.cli.compare",
)

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    """Entry point that turns :class:`BitcaseError` into exit code 2 with a clear message."""
    try:
        app()
    except BitcaseError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        if exc.hint:
            err_console.print(f"[dim]hint:[/] {escape(exc.hint)}", highlight=False, soft_wrap=True)
        raise SystemExit(EXIT_USAGE) from None
