"""Options and helpers shared by the case and claim commands."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterator

import typer
from rich.text import Text

from assurance.cli._common import BitcaseError, err_console, fail
from assurance.issues import CaseError

__all__ = ["CaseOption", "ConfigOption", "PlanOption", "RootOption", "user_errors", "emit_json", "resolve_case_path",
           "report_case_errors"]

CaseOption = Annotated[
    Path | None,
    typer.Option("--case", metavar="FILE", help="Case TOML file (default: $BITCASE_CASE, the copy `bitcase init` made, "
                                "else the bundled determinism case).", dir_okay=False),
]
ConfigOption = Annotated[
    str | None,
    typer.Option("--config", metavar="DIGEST", help="Deployment configuration D to judge: a digest or unique prefix, `current` (what the "
                                  "engine would run now) or `latest` (the newest in the store). Default: the case's "
                                  "[case] deployment, else the project file's (.bitcase/project.toml), else `current` "
                                  "for the bundled case."),
]
RootOption = Annotated[
    Path | None,
    typer.Option("--root", metavar="DIR", file_okay=False,
                 help="Directory the case's code: subjects are relative to (default: the case's `root`, else "
                      "the case file's directory)."),
]
PlanOption = Annotated[
    str | None,
    typer.Option("--plan", metavar="PRESET", help="Expand plan-generated obligations over this preset's sealed plan "
                                "(default: the plan D records)."),
]


def report_case_errors(exc: CaseError) -> None:
    """Print every issue of an invalid case to stderr."""
    for issue in exc.issues:
        err_console.print(Text(issue.format(), style="red"), highlight=False, soft_wrap=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn an invalid case or a store/user error into exit code 2 with a clear message."""
    try:
        yield
    except CaseError as exc:
        report_case_errors(exc)
        fail(f"the case is not valid ({len(exc.issues)} problem(s))",
             hint="run `bitcase case validate FILE` and fix what it lists")
    except BitcaseError as exc:
        fail(str(exc), hint=exc.hint, code=exc.exit_code)


def emit_json(value: Any, *, compact: bool = False) -> None:
    """Write ``value`` to stdout as key-sorted JSON; ``compact`` (one line) for documents that grow with the case."""
    typer.echo(json.dumps(value, indent=None if compact else 2, sort_keys=True, ensure_ascii=False))


def resolve_case_path(case: Path | None, db: str | None) -> Path:
    """The case file a command reads: ``--case``, else the default for these settings."""
    from assurance.scope import default_case_path
    from assurance.settings import load_settings

    path = case if case is not None else default_case_path(home=load_settings(db=db).home)
    if not path.is_file():
        raise BitcaseError(f"case file {path} does not exist", hint="pass --case FILE or run `bitcase init`")
    return path
