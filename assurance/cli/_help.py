"""Help in human words: a metavar (FILE, DIR, URL, N) beside a parameter, never a Python type.

Typer prints the annotation of every parameter in ``--help``: ``<bool>`` beside each flag
(``--help`` included), ``<str>`` beside an argument whatever its metavar, and ``{paths}`` around a
required argument in the usage line. :func:`humanise` fixes that on the built command tree,
once, so every command module declares only its metavars: a flag shows no type at all, a
choice its values (``[json|sarif]``), an argument its metavar, and the usage line reads ``FILE`` (required) or ``[FILE]``.
``tests/cli/test_help_metavars.py`` fails on any parameter left with a Python type.

It also joins the source line breaks of each command's docstring paragraphs, which Typer keeps: a
docstring wrapped at the source's width would otherwise break mid-sentence at every terminal width.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperOption

__all__ = ["humanise", "unwrap"]

_LIST_MARKERS = ("-", "*", "•", "|")


def _is_prose(line: str) -> bool:
    return bool(line) and not line[0].isspace() and not line.startswith(_LIST_MARKERS) and \
        not (line.split(" ", 1)[0].rstrip(".)").isdigit() and line.split(" ", 1)[0][-1:] in ".)")


def unwrap(text: str | None) -> str | None:
    """``text`` with each paragraph's prose lines joined into one line; blank lines, list items and
    indented lines kept as they are."""
    if not text:
        return text
    out: list[str] = []
    for line in text.splitlines():
        if out and _is_prose(out[-1]) and _is_prose(line):
            out[-1] += " " + line
        else:
            out.append(line)
    return "\n".join(out)


class _HumanArgument(TyperArgument):
    """An argument shown by its metavar alone, in the usage line as ``NAME`` or ``[NAME]``."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None if self.metavar else super().display_type_rich(ctx)

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


class _HumanOption(TyperOption):
    """A flag shows no type (it takes no value); a choice shows its values as ``[a|b|c]``."""

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.is_flag:
            return None
        desc = self.type_descriptor
        if self.metavar is None and desc.is_choice and desc.choices:
            return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
        return super().display_type_rich(ctx)


def humanise(command: Any, help_option_names: list[str]) -> None:
    """Show every parameter of ``command`` and the commands under it by metavar (see the module docstring)."""
    from typer._click import Context

    # The help option is made on first use; make it now so it is shown the same way.
    help_option = command.get_help_option(Context(command, help_option_names=help_option_names))
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        # Same fields, other display methods: the subclasses add no state.
        if type(param) is TyperArgument:
            param.__class__ = _HumanArgument
        elif type(param) is TyperOption:
            param.__class__ = _HumanOption
    command.help = unwrap(command.help)
    for sub in (getattr(command, "commands", None) or {}).values():
        humanise(sub, help_option_names)
