"""CLI conventions: plain outputs say what their help promises, `init`'s copy is where its help
says, and renamed options keep their old spelling with a one-line notice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app
from assurance.scope import BUNDLED_CASE

FIXTURE = Path(__file__).parent.parent / "fixtures" / "ledger"
runner = CliRunner()


def invoke(*args: object, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The ledger project (a user's own, not bitcase) as the working directory, with a store."""
    root = tmp_path / "ledger"
    shutil.copytree(FIXTURE, root)
    monkeypatch.chdir(root)
    for name in ("BITCASE_CASE", "BITCASE_HOME", "BITCASE_DB", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert invoke("db", "upgrade", "--db", "bitcase.db").exit_code == 0
    return root


def test_trusted_base_plain_output_has_the_rationale(ledger: Path) -> None:
    result = invoke("trusted-base", "--case", "case.toml", "--db", "bitcase.db")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "trusted.decimal\tunreviewed\t" + json.loads(invoke("trusted-base", "--case", "case.toml", "--db",
                                                              "bitcase.db", "--json").stdout)["items"][0]["text"]
        + "\trationale: The standard library's decimal module implements the General Decimal Arithmetic "
          "specification."]


def test_case_obligations_plain_output_has_the_subjects(ledger: Path) -> None:
    rows = {r["obligation"]: r for r in json.loads(invoke("case", "obligations", "case.toml", "--json").stdout)}
    lines = invoke("case", "obligations", "case.toml").stdout.splitlines()
    assert len(lines) == len(rows)
    for line in lines:
        obligation, *_rest, subjects = line.split("\t")
        assert subjects == "subjects: " + (", ".join(rows[obligation]["subjects"]) or "(none)")
    assert any("code:" in line for line in lines)


def test_init_puts_the_case_where_its_help_says(ledger: Path) -> None:
    help_text = " ".join(invoke("init", "--help", env={"COLUMNS": "300"}).stdout.split())
    assert ".bitcase/case.toml" in help_text
    result = invoke("init", "--db", "bitcase.db", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["case"] == str(Path(".bitcase") / "case.toml")
    assert (ledger / ".bitcase" / "case.toml").read_bytes() == BUNDLED_CASE.read_bytes()
    status = invoke("case", "obligations", ".bitcase/case.toml")  # the copy is a valid case where it lies
    assert status.exit_code == 0, status.output
    judged = invoke("trusted-base", "--db", "bitcase.db", "--config", "sha256:" + "0" * 64)
    assert "case .bitcase/case.toml" in judged.stderr  # the claim commands find the copy by default


def test_deprecated_spellings_still_work_with_a_notice(ledger: Path, tmp_path: Path) -> None:
    old = invoke("report", "--db", "bitcase.db", "--case", "case.toml", "--out", tmp_path / "r", "--no-diagram")
    new = invoke("report", "--db", "bitcase.db", "--case", "case.toml", "--out-dir", tmp_path / "n", "--no-diagram")
    assert old.exit_code == new.exit_code and (tmp_path / "r" / "report.html").is_file()
    notice = [line for line in old.stderr.splitlines() if "deprecated" in line]
    assert notice == ["warning: --out is deprecated here; spell it --out-dir"]
    assert "deprecated" not in new.stderr
    both = invoke("report", "--db", "bitcase.db", "--out", tmp_path / "a", "--out-dir", tmp_path / "b")
    assert both.exit_code == 2 and "--out-dir and --out are the same option" in both.stderr
    missing = invoke("report", "--db", "bitcase.db")
    assert missing.exit_code == 2 and "--out-dir DIR" in missing.stderr


@pytest.mark.parametrize("args, old", [
    (["review", "add", "trusted.decimal", "--decision", "accept", "--rationale", "r", "--key", "nobody"], "--key"),
    (["audit", "head", "--out", "h.json", "--key", "nobody"], "--key"),
    (["probe", "http://127.0.0.1:9/v1", "--model", "m", "--out", "p.jsonl", "--timeout", "1"], "--model"),
])
def test_each_old_spelling_is_accepted_with_a_notice(ledger: Path, args: list[str], old: str) -> None:
    result = invoke(*args, "--db", "bitcase.db", env={"BITCASE_KEYS": str(ledger / "keys")})
    assert f"warning: {old} is deprecated here" in result.stderr, result.output
    assert "No such option" not in result.stderr


def test_one_meaning_per_option_name() -> None:
    """--out is a file, --out-dir a directory, --config a stored D, --deployment a JSON file, in every command."""
    import typer

    from assurance.cli.docgen import iter_commands

    meanings: dict[str, set[str]] = {}
    for path, cmd in iter_commands(typer.main.get_command(app)):
        for param in cmd.params:
            if param.param_type_name == "option" and not param.hidden and not param.is_flag:
                for name in param.opts:
                    meanings.setdefault(name, set()).add(param.metavar or "")
    assert meanings["--out"] == {"FILE"} and meanings["--out-dir"] == {"DIR"}
    assert meanings["--config"] == {"DIGEST"} and meanings["--deployment"] == {"FILE"}
    assert meanings["--sign-key"] == {"KEY"} and "--expect-deployment" not in meanings
    assert meanings["--model"] == {"DIR"}


@pytest.mark.parametrize("kind", ["echo", "rich"])
def test_a_reader_that_closes_stdout_early_is_not_a_finding(tmp_path, kind):
    """`bitcase ... | head` whose reader is gone: the exit of a tool stopped by SIGPIPE (141), not
    1 ("claim not supported"), and no traceback. `case export` writes with typer.echo; `status`
    through a rich console, and on an empty store would otherwise exit 1 for its finding."""
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    store = tmp_path / "empty.db"
    base = [sys.executable, "-m", "assurance.cli"]
    if kind == "rich":
        subprocess.run([*base, "db", "upgrade", "--db", str(store)], cwd=root, check=True, capture_output=True,
                       timeout=120)
        command = [*base, "status", "--db", str(store)]
    else:
        command = [*base, "case", "export", str(BUNDLED_CASE), "--format", "graphml"]
    proc = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader leaves before the command writes
    try:
        code = proc.wait(timeout=120)
    finally:
        proc.kill()
    err = proc.stderr.read().decode()
    assert code == 128 + signal.SIGPIPE, err
    assert "Traceback" not in err


@pytest.mark.parametrize("module", ["assurance.cli", "assurance.cli.main"])
def test_python_dash_m_runs_the_command(module):
    """Both module forms run ``bitcase`` (the second did nothing at all before)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout and "status" in done.stdout
