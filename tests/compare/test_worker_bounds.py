"""Producers never hang: relative paths reach every process, failed references fail comparisons, waits are bounded."""

import json
import shutil
import time

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app
from engine.compare.api import CompareInputError
from engine.compare.devices import DeviceRunError, run_on_devices
from engine.compare.worker_client import DEFAULT_TIMEOUT_S, resolve_timeout
from tests.compare.conftest import FAKE_FACTORY

runner = CliRunner()


@pytest.fixture
def relative_model(fake_model_dir, tmp_path, monkeypatch):
    """The fake checkpoint copied to ``./m`` of a fresh working directory; returns ``"m"``."""
    shutil.copytree(fake_model_dir, tmp_path / "m")
    monkeypatch.chdir(tmp_path)
    return "m"


def _problems(records):
    """One text per comparison record (a unit's record lists its comparison ids; a comparison's does not)."""
    return [" ".join(r.details["problems"]) for r in records if "comparison_ids" not in r.details]


def test_a_relative_model_path_reaches_the_reference_workers(run_fake, relative_model, deployment):
    from engine.compare.api import run_suites

    records = run_suites(relative_model, ["batch"], scale="ci", deployment=deployment, factory=FAKE_FACTORY,
                         command=["test"], runtime=False, worker_timeout=60)
    assert [r.status for r in records] == ["pass"] * len(records)
    assert sorted(r.id for r in records) == sorted(r.id for r in run_fake(["batch"]))


def test_a_refused_reference_fails_every_comparison_that_needs_it(run_fake, monkeypatch):
    # batch references each cold singleton from several units: the second use must not wait again
    monkeypatch.setenv("BITCASE_FAKE_PROCESS_FAULT", "refuse:reference_worker")
    started = time.monotonic()
    records = run_fake(["batch"], worker_timeout=60)
    assert time.monotonic() - started < 50
    assert records and {r.status for r in records} == {"error"}
    problems = _problems(records)
    assert len(problems) == 296
    assert all("the fake engine refuses to open in reference_worker" in p for p in problems)
    assert all("(first process)" in p or "(second process)" in p for p in problems)


def test_a_worker_that_dies_fails_its_comparisons_with_its_log(run_fake, monkeypatch):
    monkeypatch.setenv("BITCASE_FAKE_PROCESS_FAULT", "die:reference_worker")
    records = run_fake(["prefix"], worker_timeout=60)
    assert {r.status for r in records} == {"error"}
    problems = _problems(records)
    assert len(problems) == 14
    assert all("reference process 'first'" in p and "exited with code 7 before answering" in p
               and "fake engine: die in reference_worker" in p for p in problems)


def test_a_worker_that_never_answers_is_stopped_at_the_bound(run_fake, monkeypatch):
    monkeypatch.setenv("BITCASE_FAKE_PROCESS_FAULT", "hang:reference_worker")
    started = time.monotonic()
    records = run_fake(["prefix"], worker_timeout=1.5)
    assert time.monotonic() - started < 30  # one bound, not one per comparison, and never forever
    problems = _problems(records)
    assert len(problems) == 14 and {r.status for r in records} == {"error"}
    assert all("reference process 'first'" in p and "answered nothing for 1.5 s" in p
               and "--worker-timeout" in p for p in problems)


def test_the_bound_comes_from_the_environment_when_not_given(run_fake, monkeypatch):
    monkeypatch.setenv("BITCASE_FAKE_PROCESS_FAULT", "hang:reference_worker")
    monkeypatch.setenv("BITCASE_WORKER_TIMEOUT", "1")
    records = run_fake(["prefix"])
    assert all("answered nothing for 1 s" in p for p in _problems(records))


def test_a_shard_process_that_never_reports_is_stopped_at_the_bound(relative_model, deployment, monkeypatch):
    monkeypatch.setenv("BITCASE_FAKE_PROCESS_FAULT", "hang:shard_process")
    started = time.monotonic()
    # a bound long enough for the spawned shard to start and reach the hang on a loaded machine:
    # its last words are what the message must carry
    with pytest.raises(DeviceRunError, match=r"(?s)shard 1/1 on cpu reported nothing for 10 s.*hang in shard_process"):
        run_on_devices(relative_model, ["prefix"], "ci", devices=["cpu"], deployment=deployment,
                       factory=FAKE_FACTORY, worker_timeout=10)
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("given, env, message", [
    (0, None, "worker timeout 0 must be a positive"), (float("nan"), None, "must be a positive"),
    (None, "soon", r"\$BITCASE_WORKER_TIMEOUT 'soon' is not a number"), (None, "-3", "must be a positive")])
def test_bad_bounds_are_refused_with_their_source(given, env, message):
    with pytest.raises(ValueError, match=message):
        resolve_timeout(given, {} if env is None else {"BITCASE_WORKER_TIMEOUT": env})


def test_the_default_bound(run_fake):
    assert resolve_timeout(None, {}) == DEFAULT_TIMEOUT_S
    assert resolve_timeout(None, {"BITCASE_WORKER_TIMEOUT": "2.5"}) == 2.5
    with pytest.raises(CompareInputError, match="worker timeout"):
        run_fake(["prefix"], worker_timeout=-1)


def test_cli_bad_worker_timeout_exits_2(relative_model, monkeypatch):
    result = runner.invoke(app, ["compare", "--model", relative_model, "--out", "x.jsonl", "--worker-timeout", "0"])
    assert result.exit_code == 2 and "worker timeout 0" in result.stderr
    monkeypatch.setenv("BITCASE_WORKER_TIMEOUT", "later")
    result = runner.invoke(app, ["compare", "--model", relative_model, "--out", "x.jsonl"])
    assert result.exit_code == 2 and "$BITCASE_WORKER_TIMEOUT 'later'" in result.stderr


def test_cli_compare_with_relative_paths_on_the_tiny_model(tmp_path, monkeypatch):
    """The reported case: `model make --preset tiny m`, then compare with `--model m --out x.jsonl`."""
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["model", "make", "--preset", "tiny", "m"]).exit_code == 0
    result = runner.invoke(app, ["compare", "--model", "m", "--suite", "prefix", "--out", "x.jsonl", "--json",
                                 "--worker-timeout", "120"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["bundle"] == "x.jsonl"
    assert summary["obligations"]["suite.prefix"]["passed"] == 14
    assert len((tmp_path / "x.jsonl").read_text().splitlines()) == summary["records"]
