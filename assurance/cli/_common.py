"""Shared CLI plumbing: consoles, the user-error type and exit codes.

Data goes to stdout; diagnostics and progress go to ``err_console`` (stderr).
Exit codes: 0 ok, 1 findings (claim not supported, verification refuted), 2 usage or input error;
141 (128 + SIGPIPE) when the reader of stdout left early, as a Unix tool that SIGPIPE stopped.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

__all__ = ["err_console", "out_console", "PipeWideConsole", "BitcaseError", "fail", "stdout_closed", "EXIT_OK",
           "EXIT_FINDINGS", "EXIT_USAGE", "EXIT_STDOUT_CLOSED", "DbOption", "JsonOption"]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_STDOUT_CLOSED = 128 + signal.SIGPIPE


def stdout_closed() -> NoReturn:
    """End the run whose stdout reader left (``bitcase status | head``): click and rich would exit 1,
    which here means "claim not supported". Later writes and the final flush go to /dev/null."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(EXIT_STDOUT_CLOSED)

# Width of output that is not a terminal: wide enough that no table or message is cut or wrapped.
_PIPED_WIDTH = 4096


class PipeWideConsole(Console):
    """A console that takes the terminal's width on a terminal and never wraps anything else.

    Rich would otherwise wrap piped output at $COLUMNS or 80, so what a script or a test reads
    would depend on the width of a terminal that is not there.
    """

    @property
    def size(self) -> ConsoleDimensions:
        if not self.is_terminal:
            return ConsoleDimensions(_PIPED_WIDTH, 25)
        return super().size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        stdout_closed()


err_console = PipeWideConsole(stderr=True)
out_console = PipeWideConsole(soft_wrap=True)


class BitcaseError(Exception):
    """A user or input error: what went wrong, where, and how to fix it. Exits with ``exit_code`` (2)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def fail(message: str, *, hint: str | None = None, code: int = EXIT_USAGE) -> NoReturn:
    """Print an error to stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False, soft_wrap=True)
    if hint:
        err_console.print(f"[dim]hint:[/] {escape(hint)}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(code=code)


DbOption = Annotated[
    str | None,
    typer.Option("--db", metavar="URL", help="Database URL or SQLite file path (default: $BITCASE_DB, $DATABASE_URL, ./bitcase.db)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON to stdout.")]
