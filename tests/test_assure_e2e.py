"""End to end: the README's first command on a fresh clone, then an incremental re-run.

Runs ``bitcase assure`` (the last command of the quick start's first line) against a fresh git
clone of this repository, with the clone's own code on the path, a fresh SQLite store and the
tiny model made on first use. Checks the verdict, the report and the trusted base, that a second
run reuses every stage, and that the store's hash chain verifies.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
E2E_LIMIT_S = 15 * 60


def _first_command() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.findall(r"^    \$ (.+)$", readme, flags=re.M)[0]
    last = first.split("&&")[-1].split()
    assert last[:2] == ["bitcase", "assure"], first
    return last[1:]


def _bitcase(clone: Path, workdir: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(clone), "BITCASE_HOME": str(workdir / ".bitcase"),
           "BITCASE_OUT": str(workdir / "bitcase-out"), "COLUMNS": "160"}
    env.pop("BITCASE_DB", None)
    env.pop("DATABASE_URL", None)
    code = "from assurance.cli.main import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout to clone from")
    target = tmp_path_factory.mktemp("clone") / "bitcase"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True)
    return target


@pytest.mark.slow
def test_readme_first_command_on_a_fresh_clone(clone, tmp_path):
    started = time.monotonic()
    first = _bitcase(clone, tmp_path, *_first_command(), timeout=E2E_LIMIT_S)
    elapsed = time.monotonic() - started
    assert first.returncode == 0, first.stderr[-4000:]
    assert elapsed < E2E_LIMIT_S
    assert "G.determinism: supported-under-trust" in first.stdout
    report = tmp_path / "bitcase-out" / "report.html"
    assert f"report: {report.relative_to(tmp_path)}" in first.stdout or f"report: {report}" in first.stdout
    html = report.read_text(encoding="utf-8")
    assert "supported-under-trust" in html
    for trusted in ("trusted.triton-compiler", "trusted.gpu-execution", "trusted.contract-translation"):
        assert trusted in html, f"{trusted} missing from the report's trusted base"
    assert (tmp_path / "bitcase-out" / "trust-boundary.dot").is_file()

    again = _bitcase(clone, tmp_path, "assure", "--json", timeout=300)
    assert again.returncode == 0, again.stderr[-4000:]
    result = json.loads(again.stdout)
    assert {s["stage"]: s["action"] for s in result["stages"]} == {
        "verify": "reused", "runtime": "reused", "properties": "reused", "compare": "reused"}
    assert result["top_claims"]["G.determinism"] == "supported-under-trust"

    audit = _bitcase(clone, tmp_path, "audit", "verify", "--json", timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def _num_items(db: Path) -> int:
    import sqlite3

    if not db.is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM evidence_items").fetchone()[0]
    except sqlite3.OperationalError:  # schema not created yet
        return 0


@pytest.mark.slow
def test_interrupting_keeps_finished_stages_and_the_next_run_resumes(clone, tmp_path):
    import signal

    env = {**os.environ, "PYTHONPATH": str(clone), "BITCASE_HOME": str(tmp_path / ".bitcase"),
           "BITCASE_OUT": str(tmp_path / "bitcase-out")}
    code = "from assurance.cli.main import main; main()"
    # A background CI job may run with SIGINT ignored; the child gets the default disposition, as
    # a command started from a terminal has, so Ctrl-C reaches it.
    proc = subprocess.Popen([sys.executable, "-c", code, "assure", "--stage", "verify", "--stage", "compare"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    db = tmp_path / "bitcase.db"
    deadline = time.monotonic() + 600
    while _num_items(db) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert proc.poll() is None, "assure ended before the interruption: " + proc.stderr.read()[-2000:]
    kept = _num_items(db)
    assert kept > 0
    time.sleep(2)  # inside the compare stage now
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "run the same command again to resume" in " ".join(stderr.split())
    assert _num_items(db) == kept, "nothing of the interrupted stage may land"
    bundles = sorted(p.name for p in (tmp_path / ".bitcase" / "bundles").rglob("*") if p.is_file())
    assert bundles == ["verify.jsonl"], bundles  # no half-written compare bundle, no temp file

    audit = _bitcase(clone, tmp_path, "audit", "verify", timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    resumed = _bitcase(clone, tmp_path, "refresh", "--stage", "verify", "--json", timeout=300)
    assert resumed.returncode in (0, 1), resumed.stderr[-2000:]
    assert [s["action"] for s in json.loads(resumed.stdout)["stages"]] == ["reused"]
