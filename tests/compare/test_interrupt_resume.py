"""An interrupted compare run keeps its finished units; --resume runs exactly the others."""

import json
import os
import signal

import pytest
from typer.testing import CliRunner

import engine.compare.api as api
import engine.compare.runner as runner_module
from assurance.cli.main import app
from engine.compare.api import CompareInterrupted
from tests.compare.conftest import FAKE_FACTORY

SUITES = ["prefix", "chunk"]
cli = CliRunner()


def _interrupt_at(monkeypatch, call: int, action):
    original = runner_module._run_one
    calls = []

    def run_one(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            action()
        return original(*args, **kwargs)
    monkeypatch.setattr(runner_module, "_run_one", run_one)
    return original


def _raise():
    raise KeyboardInterrupt


def test_an_interrupted_run_keeps_the_finished_units_and_done_skips_them(run_fake, monkeypatch):
    full = {r.id for r in run_fake(SUITES)}
    _interrupt_at(monkeypatch, 3, _raise)
    with pytest.raises(CompareInterrupted) as caught:
        run_fake(SUITES)
    interrupted = caught.value
    assert len(interrupted.finished) == 2 and interrupted.remaining
    assert interrupted.finished[0] not in interrupted.remaining
    first = {r.id for r in interrupted.records}
    assert first and first < full
    monkeypatch.undo()
    rest = {r.id for r in run_fake(SUITES, done=first)}
    assert not first & rest
    assert first | rest == full


def _fake_cli(monkeypatch, fake_model_dir, deployment, tmp_path):
    original = api.run_suites
    monkeypatch.setattr(api, "run_suites",
                        lambda *a, **k: original(*a, **{**k, "factory": FAKE_FACTORY, "runtime": False}))
    d = tmp_path / "d.json"
    d.write_text(json.dumps({"fields": deployment.fields}))
    return ["compare", "--model", str(fake_model_dir), *[a for s in SUITES for a in ("--suite", s)],
            "--deployment", str(d)]


def test_sigterm_writes_the_finished_units_and_resume_completes_the_run(monkeypatch, fake_model_dir,
                                                                        deployment, tmp_path, run_fake):
    full = {r.id for r in run_fake(SUITES)}
    args = _fake_cli(monkeypatch, fake_model_dir, deployment, tmp_path)
    original = _interrupt_at(monkeypatch, 2, lambda: os.kill(os.getpid(), signal.SIGTERM))
    first = tmp_path / "first.jsonl"
    result = cli.invoke(app, [*args, "--out", str(first)])
    assert result.exit_code == 1, result.output
    assert "interrupted: 1 of" in result.output and f"--resume {first}" in result.output
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is the command's only
    written = {json.loads(line)["id"] for line in first.read_text().splitlines()}
    assert written and written < full

    monkeypatch.setattr(runner_module, "_run_one", original)
    rest = tmp_path / "rest.jsonl"
    result = cli.invoke(app, [*args, "--out", str(rest), "--resume", str(first)])
    assert result.exit_code == 0, result.output
    remaining = {json.loads(line)["id"] for line in rest.read_text().splitlines()}
    assert not written & remaining and written | remaining == full


@pytest.mark.parametrize("case", ["same-file", "not-a-record", "repeated-key", "missing"])
def test_bad_resume_input_exits_2_naming_it(monkeypatch, fake_model_dir, deployment, tmp_path, case):
    args = _fake_cli(monkeypatch, fake_model_dir, deployment, tmp_path)
    out, resume = tmp_path / "out.jsonl", tmp_path / "resume.jsonl"
    second = {"not-a-record": "[1, 2]\n", "repeated-key": '{"id": "compare.x.z", "id": "compare.x.y"}\n'}
    resume.write_text('{"id": "compare.x.y"}\n' + second.get(case, ""))
    extra = {"same-file": ["--out", str(resume), "--resume", str(resume)],
             "not-a-record": ["--out", str(out), "--resume", str(resume)],
             "repeated-key": ["--out", str(out), "--resume", str(resume)],
             "missing": ["--out", str(out), "--resume", str(tmp_path / "absent.jsonl")]}[case]
    result = cli.invoke(app, [*args, *extra])
    assert result.exit_code == 2, result.output
    expected = {"same-file": "are one file", "not-a-record": f"{resume}:2",
                "repeated-key": f"{resume}:2: not an evidence record (DuplicateKey: duplicate key 'id')",
                "missing": "cannot read --resume"}[case]
    assert expected in " ".join(result.output.split())
    assert not out.exists()


def test_an_interrupted_gpus_run_writes_every_shards_finished_units_and_resumes_with_gpus(
        monkeypatch, run_fake, fake_model_dir, deployment, tmp_path):
    import torch

    import engine.compare.devices as devices

    args = _fake_cli(monkeypatch, fake_model_dir, deployment, tmp_path)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    finished = run_fake(["prefix"])
    calls = []

    def interrupted(*a, done=(), **k):
        calls.append(set(done))
        raise devices.DevicesInterrupted(finished, 4, 9)
    monkeypatch.setattr(devices, "run_on_devices", interrupted)
    first = tmp_path / "first.jsonl"
    gpus = ["--device", "cuda", "--gpus", "2"]
    result = cli.invoke(app, [*args, *gpus, "--out", str(first)])
    assert result.exit_code == 1, result.output
    assert "interrupted: 4 of 9 units finished" in " ".join(result.output.split())
    assert {json.loads(line)["id"] for line in first.read_text().splitlines()} == {r.id for r in finished}

    monkeypatch.setattr(devices, "run_on_devices", lambda *a, done=(), **k: (calls.append(set(done)), [])[1])
    monkeypatch.setattr(api, "runtime_checks", lambda *a, **k: pytest.fail("runtime checks run again"))
    with first.open("a") as f:  # as if the interrupted run had held its runtime checks
        f.write(json.dumps({"id": "compare.k.runtime.plan", "category": "runtime_config_check"}) + "\n")
    result = cli.invoke(app, [*args, *gpus, "--out", str(tmp_path / "rest.jsonl"), "--resume", str(first)])
    assert result.exit_code == 0, result.output
    assert calls == [set(), {r.id for r in finished} | {"compare.k.runtime.plan"}]
