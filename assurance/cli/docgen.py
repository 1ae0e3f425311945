"""Generate the README's CLI reference from the commands' own help.

``python -m assurance.cli.docgen --write`` rewrites the section between the markers in
README.md; ``tests/test_docs.py`` fails when it drifts or when a command lacks help text.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import typer

START = "<!-- cli-reference:start -->"
END = "<!-- cli-reference:end -->"


def iter_commands(command: Any, path: tuple[str, ...] = ("bitcase",)) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Yield ``(path, command)`` for every command and group, sorted by name."""
    yield path, command
    for name in sorted(getattr(command, "commands", {}) or {}):
        yield from iter_commands(command.commands[name], path + (name,))


def _param_line(param: Any, ctx: Any) -> str:
    names = ", ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
    if param.param_type_name == "argument":
        names = f"`{(param.metavar or param.name or '').upper()}`"
    elif (shown := param.display_type_rich(ctx)) is not None:
        names += f" `{shown}`"
    help_text = " ".join((getattr(param, "help", None) or "").split())
    required = " (required)" if param.required else ""
    return f"- {names}{required}: {help_text}".rstrip(": ").rstrip()


def render_reference() -> str:
    """The markdown CLI reference for every command, deterministic and width-independent."""
    from assurance.cli.main import app

    from typer._click import Context

    root = typer.main.get_command(app)
    lines: list[str] = []
    for path, cmd in iter_commands(root):
        if len(path) == 1:
            continue
        lines.append(f"### `{' '.join(path)}`")
        lines.append("")
        lines.append(" ".join((cmd.help or "").split("\n\n")[0].split()))
        params = [p for p in cmd.params if p.name != "help" and not p.hidden]  # hidden: deprecated aliases
        if params:
            lines.append("")
            lines.extend(_param_line(p, Context(cmd)) for p in params)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def rewrite_readme(readme: Path) -> bool:
    """Replace the reference section of ``readme``; return whether it changed."""
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{readme}: markers {START} / {END} not found")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{render_reference()}{END}{tail}"
    if new != text:
        readme.write_text(new, encoding="utf-8")
        return True
    return False


if __name__ == "__main__":
    target = Path(__file__).resolve().parents[2] / "README.md"
    if "--write" in sys.argv:
        print("README.md updated" if rewrite_readme(target) else "README.md already current", file=sys.stderr)
    else:
        sys.stdout.write(render_reference())
