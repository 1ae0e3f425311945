"""What the CLI prints must not depend on the width of a terminal that is not there.

The suite itself runs at whatever $COLUMNS the caller has (80 when unset); this re-runs the
tests that drive the CLI at a narrow and a very wide width, so a message or table that wraps
differently fails here. It collects every test module that mentions the CLI, and the plugin
tests/cli_width_selection.py keeps the tests among them whose own code, helpers or fixtures drive
it (in process or as a subprocess) or read captured output: the others (a module's engine and
comparison runs beside its CLI tests, a third of the modules' time) print nothing of the CLI's,
so the width cannot change what they check.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_MARKERS = ("CliRunner", "invoke(app")


def cli_test_modules() -> list[str]:
    """Every test module that drives the CLI through CliRunner, sorted."""
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        text = path.read_text(encoding="utf-8")
        if any(marker in text for marker in _MARKERS):
            found.append(str(path.relative_to(ROOT)))
    return found


def test_the_cli_modules_are_found():
    modules = cli_test_modules()
    assert "tests/render/test_cli.py" in modules and len(modules) >= 8, modules


def test_the_selection_keeps_cli_tests_and_drops_engine_runs():
    modules = ["tests/compare/test_worker_bounds.py", "tests/serving/test_cli_serve.py",
               "tests/cli/test_conventions.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                           "-p", "tests.cli_width_selection", *modules], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    kept = {line.split("[")[0] for line in done.stdout.splitlines() if "::" in line}
    assert {"tests/compare/test_worker_bounds.py::test_cli_bad_worker_timeout_exits_2",  # CliRunner
            "tests/serving/test_cli_serve.py::test_expect_deployment_refuses_another_d",  # a subprocess, in a helper
            "tests/cli/test_conventions.py::test_python_dash_m_runs_the_command",  # the module is a parameter
            } <= kept, sorted(kept)
    assert "tests/compare/test_worker_bounds.py::test_a_shard_process_that_never_reports_is_stopped_at_the_bound" \
        not in kept


@pytest.mark.slow
def test_cli_tests_pass_at_a_narrow_and_a_very_wide_terminal_width():
    # Both widths at once: this test only waits meanwhile.
    runs = {}
    for columns in (40, 300):
        env = {**os.environ, "COLUMNS": str(columns)}
        env.pop("LINES", None)
        runs[columns] = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                          "-p", "tests.cli_width_selection", *cli_test_modules()], cwd=ROOT,
                                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    failures, deadline = {}, time.monotonic() + 900
    try:
        for columns, proc in runs.items():
            try:
                output, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                failures[columns] = "the two runs took more than 900 s"
                continue
            if proc.returncode != 0:
                failures[columns] = output[-4000:]
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert not failures, "\n".join(f"COLUMNS={c}: {text}" for c, text in failures.items())


def test_a_long_path_in_a_usage_error_stays_on_one_line(tmp_path):
    from typer.testing import CliRunner

    from assurance.cli.main import app

    deep = tmp_path / ("a-directory-name-long-enough-to-wrap-" * 3) / "case.toml"
    deep.parent.mkdir(parents=True)
    deep.write_text("", encoding="utf-8")
    result = CliRunner().invoke(app, ["report", "--out", str(deep)], env={"COLUMNS": "40"})
    assert result.exit_code == 2
    assert any(str(deep) in line and "is a file" in line for line in result.stderr.splitlines()), result.stderr
