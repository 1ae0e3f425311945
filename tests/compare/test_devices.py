"""A run split over several devices: one shard process each, together exactly the single-device run."""

from collections import Counter

import pytest

from engine.compare.devices import DeviceRunError, DevicesInterrupted, parse_devices, run_on_devices
from tests.compare.conftest import FAKE_FACTORY


def test_two_device_processes_give_the_single_run_records(run_fake, fake_model_dir, deployment):
    events = []
    split = run_on_devices(fake_model_dir, ["chunk", "prefix"], "ci", devices=["cpu", "cpu"], deployment=deployment,
                           command=["test"], factory=FAKE_FACTORY, progress=events.append)
    whole = run_fake(["chunk", "prefix"])
    assert sorted(r.id for r in split) == sorted(r.id for r in whole)
    assert Counter((r.id, r.status) for r in split) == Counter((r.id, r.status) for r in whole)
    assert {r.details["shard"] for r in split if "shard" in r.details} == {"1/2", "2/2"}
    assert all(r.deployment.digest == deployment.digest for r in split)
    units = [e for e in events if e.kind == "unit"]
    assert units and units[-1].done == units[-1].total == len({r.details["unit"] for r in whole if "unit" in r.details})


def test_a_failing_shard_process_fails_the_run_with_its_log(fake_model_dir, deployment):
    with pytest.raises(DeviceRunError, match="(?s)shard 1/1 on cpu exited.*no_such_module"):
        run_on_devices(fake_model_dir, ["prefix"], "ci", devices=["cpu"], deployment=deployment,
                       factory="no_such_module:open")


@pytest.mark.parametrize("devices, message", [(["cuda:0", "cuda:0"], "named twice"), (["gpu1"], "cuda:N"),
                                              ([], "at least one")])
def test_bad_device_lists_are_refused(devices, message):
    with pytest.raises(ValueError, match=message):
        parse_devices(devices)


def test_a_shard_process_whose_parent_is_gone_stops_and_writes_nothing(fake_model_dir, deployment, tmp_path):
    import json
    import subprocess
    import sys

    from engine.compare.shard_process import PARENT_GONE_EXIT

    out = tmp_path / "shard.jsonl"
    job = {"model": str(fake_model_dir), "suites": ["batch", "chunk", "prefix"], "scale": "ci", "shard": "1/1",
           "device": "cpu", "deployment": {"fields": deployment.fields, "digest": deployment.digest}, "label": "",
           "command": ["test"], "seed": None, "factory": FAKE_FACTORY, "out": str(out)}
    proc = subprocess.Popen([sys.executable, "-m", "engine.compare.shard_process"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    proc.stdin.write(json.dumps(job) + "\n")
    proc.stdin.close()  # as when the parent dies: the job is in, then input ends
    assert proc.wait(timeout=60) == PARENT_GONE_EXIT, proc.stderr.read()
    assert not out.exists()


def test_the_first_failing_shard_stops_the_others():
    import subprocess
    import sys
    import time
    from types import SimpleNamespace

    from engine.compare.devices import _wait_all_or_first_failure

    now = time.monotonic()
    sleeper = SimpleNamespace(proc=subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]),
                              last_heard=now + 3600)
    failing = SimpleNamespace(proc=subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(2)"]),
                              last_heard=now + 3600)
    started = time.monotonic()
    assert _wait_all_or_first_failure([sleeper, failing], 60) == (failing, "exited with code 2")
    assert time.monotonic() - started < 60
    assert sleeper.proc.returncode is not None and sleeper.proc.returncode < 0  # killed, not finished
    done = [SimpleNamespace(proc=subprocess.Popen([sys.executable, "-c", "pass"]), last_heard=now + 3600)
            for _ in range(2)]
    assert _wait_all_or_first_failure(done, 60) is None


def test_an_interrupted_multi_device_run_keeps_every_shards_finished_units(run_fake, fake_model_dir, deployment,
                                                                          monkeypatch):
    import _thread
    import signal

    whole = {r.id for r in run_fake(["chunk", "prefix"])}
    monkeypatch.setenv("BITCASE_FAKE_PROCESS_FAULT", "slow:shard_process")  # every candidate engine takes 0.5 s
    units_seen = []

    def progress(event):
        if event.kind == "unit":
            units_seen.append(event.unit_id)
            if len(units_seen) == 2:
                _thread.interrupt_main()  # as Ctrl-C does

    def run(**kwargs):
        return run_on_devices(fake_model_dir, ["chunk", "prefix"], "ci", devices=["cpu", "cpu"],
                              deployment=deployment, command=["test"], factory=FAKE_FACTORY, **kwargs)
    # a background job runs with SIGINT ignored, where interrupt_main() would do nothing
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(DevicesInterrupted) as caught:
            run(progress=progress)
    finally:
        signal.signal(signal.SIGINT, previous)
    interrupted = caught.value
    first = {r.id for r in interrupted.records}
    assert first and first < whole  # both shards' finished units, not the rest
    assert 2 <= interrupted.num_finished < interrupted.num_units
    assert {r.details["shard"] for r in interrupted.records if "shard" in r.details} <= {"1/2", "2/2"}
    monkeypatch.delenv("BITCASE_FAKE_PROCESS_FAULT")
    rest = {r.id for r in run(done=first)}
    assert not first & rest and first | rest == whole
