"""The root command: --version and -h."""

from __future__ import annotations

from importlib import metadata

from typer.testing import CliRunner

from assurance.cli.main import app

runner = CliRunner()


def test_version_prints_the_installed_version_and_exits_0():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"bitcase {metadata.version('bitcase')}\n"


def test_dash_h_is_help_for_the_root_and_for_commands():
    assert runner.invoke(app, ["-h"]).stdout == runner.invoke(app, ["--help"]).stdout
    result = runner.invoke(app, ["report", "-h"])
    assert result.exit_code == 0 and "--out" in result.stdout
