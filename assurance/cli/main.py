"""The ``bitcase`` command line: one module per command group, joined here.

Command modules import torch, triton and z3 only inside command bodies, so ``--help``
works without them.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from assurance.cli._common import BitcaseError, err_console, stdout_closed
from assurance.cli._help import humanise

HELP_OPTION_NAMES = ["-h", "--help"]

class _BitcaseGroup(TyperGroup):
    """The root group: help by metavar, and usage errors in rich boxes only on a terminal.

    A boxed error wraps at the console width, so a long path would break across lines when
    stderr is a pipe or a file; there click's plain one-line message is printed instead.
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        humanise(self, HELP_OPTION_NAMES)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        markup_mode = self.rich_markup_mode
        if not sys.stderr.isatty():
            self.rich_markup_mode = None
        try:
            return super().main(*args, **kwargs)
        finally:
            self.rich_markup_mode = markup_mode

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # what typer.echo raises; rich consoles call stdout_closed themselves
            stdout_closed()


app = typer.Typer(
    name="bitcase",
    cls=_BitcaseGroup,
    help="Evidence and assurance cases for bitwise-deterministic LLM inference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": HELP_OPTION_NAMES},
)


def _print_version(value: bool) -> None:
    if value:
        from importlib import metadata

        try:
            version = metadata.version("bitcase")
        except metadata.PackageNotFoundError:  # run from a source tree that was never installed
            version = "unknown (not installed)"
        typer.echo(f"bitcase {version}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print bitcase's version and exit.",
                                          callback=_print_version, is_eager=True)] = False,
) -> None:
    """Evidence and assurance cases for bitwise-deterministic LLM inference."""

# Each module exposes ``register(app)``; order here is the order of ``bitcase --help``.
COMMAND_MODULES = (
    "assurance.cli.assure",
    "assurance.cli.db",
    "assurance.cli.ingest",
    "assurance.cli.evidence",
    "assurance.cli.audit",
    "assurance.cli.key",
    "assurance.cli.case",
    "assurance.cli.claims",
    "assurance.cli.report",
    "assurance.cli.review",
    "assurance.cli.verify",
    "assurance.cli.model",
    "assurance.cli.generate",
    "assurance.cli.serve",
    "assurance.cli.compare",
    "assurance.cli.probe",
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
        raise SystemExit(exc.exit_code) from None


if __name__ == "__main__":  # `python -m assurance.cli.main`, as `python -m assurance.cli`
    main()
