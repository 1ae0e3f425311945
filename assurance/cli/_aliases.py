"""Old option spellings kept working after a rename, each with a one-line notice on stderr.

The convention they serve (README, "CLI conventions"): ``--out FILE`` is always a file and
``--out-dir DIR`` a directory; ``--config DIGEST`` selects a stored D and ``--deployment FILE``
is only ever a declared-deployment JSON file; ``--sign-key KEY`` signs. An alias is a hidden
option: ``--help`` and the README reference show only the new spelling.
"""

from __future__ import annotations

from typing import Any, TypeVar

import typer

from assurance.cli._common import BitcaseError, err_console

__all__ = ["deprecated_alias", "either"]

T = TypeVar("T")


def deprecated_alias(old: str, new: str, **option: Any) -> Any:
    """A hidden option ``old`` that still works and says, when used, to spell it ``new``."""

    def notice(value: Any) -> Any:
        if value is not None:
            err_console.print(f"warning: {old} is deprecated here; spell it {new}", style="yellow",
                              highlight=False, soft_wrap=True)
        return value

    return typer.Option(old, hidden=True, callback=notice, show_default=False, **option)


def either(value: T | None, alias_value: T | None, *, new: str, old: str) -> T | None:
    """The option's value, from its new spelling or its deprecated one; both at once is an error."""
    if alias_value is None:
        return value
    if value is not None:
        raise BitcaseError(f"{new} and {old} are the same option; give it once", hint=f"drop {old}")
    return alias_value
