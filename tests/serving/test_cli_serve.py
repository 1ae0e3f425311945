"""`bitcase serve` as a process: SIGTERM drains with a clear finish reason; --expect-deployment; --db."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

START_TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(model_dir: Path, *args: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-m", "assurance.cli", "serve", "--model", str(model_dir),
                             "--port", str(port), *args], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, f"http://127.0.0.1:{port}"


def _wait_up(proc: subprocess.Popen, url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited ({proc.returncode}): {proc.stderr.read()}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"the server did not answer within {START_TIMEOUT_S} s")


def test_sigterm_drains_then_aborts(model_dir, tmp_path):
    db = tmp_path / "store.db"
    subprocess.run([sys.executable, "-m", "assurance.cli", "db", "upgrade", "--db", str(db)], check=True,
                   capture_output=True, cwd=Path(__file__).resolve().parents[2],
                   env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    proc, url = _start(model_dir, "--drain-timeout", "1", "--db", str(db))
    try:
        _wait_up(proc, url)
        body = {"prompt": [1, 2, 3], "max_tokens": 1000, "temperature": 0, "ignore_eos": True, "stream": True}
        events: list[str] = []
        streaming = threading.Event()

        def read() -> None:
            with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
                for line in r.iter_lines():
                    if line:
                        events.append(line)
                        streaming.set()

        reader = threading.Thread(target=read)
        reader.start()
        # SIGTERM only once the request is in the engine: before that it would be refused, not drained
        assert streaming.wait(30), "the streamed request produced no event within 30 s"
        proc.send_signal(signal.SIGTERM)
        reader.join(20)
        assert proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once drained
    finally:
        if proc.poll() is None:
            proc.kill()
    assert events[-1] == "data: [DONE]"
    last = json.loads(events[-2].removeprefix("data: "))
    assert last["choices"][0]["finish_reason"] == "abort"
    from evidence_db.session import open_session
    from evidence_db.store import load_evidence

    with open_session(str(db)) as session:
        stored = load_evidence(session=session)
    assert {e.obligation for e in stored} == {"runtime.plan", "runtime.deployment", "runtime.no_autotune",
                                              "trusted.attention-finiteness"}  # D runs the finiteness check
    assert {e.category for e in stored} == {"runtime_config_check"}


def test_expect_deployment_refuses_another_d(model_dir):
    proc, _ = _start(model_dir, "--expect-deployment", "sha256:" + "0" * 64)
    assert proc.wait(START_TIMEOUT_S) == 1
    assert "refusing to serve" in proc.stderr.read()


def test_bad_options_exit_2_without_starting(tmp_path):
    from typer.testing import CliRunner

    from assurance.cli.main import app

    runner = CliRunner()
    missing = runner.invoke(app, ["serve", "--model", str(tmp_path)])
    assert missing.exit_code == 2 and "config.json" in missing.stderr
    bad_port = runner.invoke(app, ["serve", "--model", str(tmp_path), "--port", "70000"])
    assert bad_port.exit_code == 2 and "--port" in bad_port.stderr
    no_db = runner.invoke(app, ["serve", "--model", str(tmp_path), "--sign-key", "k"])
    assert no_db.exit_code == 2 and "pass --db too" in no_db.stderr
    db = tmp_path / "s.db"
    unknown_key = runner.invoke(app, ["serve", "--model", str(tmp_path), "--db", str(db), "--sign-key", "nobody"],
                                env={"BITCASE_KEYS": str(tmp_path / "keys")})
    assert unknown_key.exit_code == 2 and "nobody" in unknown_key.stderr


def test_signed_start_up_checks_are_stored_with_their_signer(model_dir, tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "BITCASE_KEYS": str(tmp_path / "keys")}
    monkeypatch.setenv("BITCASE_KEYS", env["BITCASE_KEYS"])
    made = subprocess.run([sys.executable, "-m", "assurance.cli", "key", "generate", "--name", "serve-ci", "--json"],
                          capture_output=True, text=True, cwd=root, env=env, check=True)
    key_id = json.loads(made.stdout)["key_id"]
    db = tmp_path / "store.db"
    subprocess.run([sys.executable, "-m", "assurance.cli", "db", "upgrade", "--db", str(db)], check=True,
                   capture_output=True, cwd=root, env=env)
    monkeypatch.setenv("BITCASE_KEYS", env["BITCASE_KEYS"])  # _start passes os.environ on
    proc, url = _start(model_dir, "--db", str(db), "--sign-key", key_id)
    try:
        _wait_up(proc, url)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    from evidence_db.session import open_session
    from evidence_db.signatures import list_signers

    with open_session(str(db)) as session:
        assert [(s.key_id, s.num_items) for s in list_signers(session=session)] == [(key_id, 4)]
