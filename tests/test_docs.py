"""The README stays true: quick start shape, CLI reference in sync, help text everywhere."""

import re
import subprocess
import sys
from pathlib import Path

import typer

from assurance.cli.docgen import END, START, iter_commands, render_reference

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_quick_start_is_two_commands():
    commands = re.findall(r"^    \$ (.+)$", README, flags=re.M)
    assert len(commands) == 2, commands
    assert "bitcase assure" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "sed -n 's/^    \\$ //p' README.md | sed -n 2p" in ci


def test_every_command_has_help_text():
    from assurance.cli.main import app

    missing = [" ".join(path) for path, cmd in iter_commands(typer.main.get_command(app))
               if not (cmd.help or "").strip()]
    assert not missing, f"commands without help text: {missing}"


def test_readme_cli_reference_is_current():
    section = README.split(START, 1)[1].split(END, 1)[0]
    assert section.strip() == render_reference().strip(), (
        "README CLI reference drifted: run `python -m assurance.cli.docgen --write`")


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from assurance.cli.main import app\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "import typer\n"
        "from assurance.cli.docgen import iter_commands\n"
        "for path, cmd in iter_commands(typer.main.get_command(app)):\n"
        "    r = CliRunner().invoke(app, [*path[1:], '--help'])\n"
        "    assert r.exit_code == 0, (path, r.output)\n"
        "heavy = sorted(m for m in ('torch', 'triton', 'z3') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "", f"--help imported {out.stdout.strip()}"
