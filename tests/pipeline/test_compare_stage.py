"""The comparison stage: one part per wanted suite, in protocol order, split over the GPUs when there are several."""

from pathlib import Path

import pytest

from assurance.pipeline.stages import StageContext, run_stage
from engine.compare import api, devices
from engine.compare.protocol import OBLIGATIONS
from evidence_db.bundle import Deployment

D = Deployment(fields={"n": 1})


def _ctx(tmp_path: Path, devices_: tuple[str, ...]) -> StageContext:
    return StageContext(model_dir=tmp_path, deployment=D, device="cuda" if devices_ else "cpu", scale="full",
                        label="", command=("bitcase", "assure"), progress=lambda *a: None, devices=devices_)


@pytest.mark.parametrize("devices_", [(), ("cuda:0",), ("cuda:0", "cuda:1")])
def test_each_wanted_suite_is_its_own_part_on_the_right_devices(tmp_path, monkeypatch, devices_):
    calls = []

    def one_device(model_dir, suites, scale, device, **kwargs):
        calls.append(("run_suites", tuple(suites), device, kwargs["deployment"], kwargs["runtime"]))
        return [f"record of {suites[0]}"]

    def many_devices(model_dir, suites, scale, *, devices, deployment, **kwargs):
        calls.append(("run_on_devices", tuple(suites), tuple(devices), deployment, False))
        return [f"record of {suites[0]}"]

    monkeypatch.setattr(api, "run_suites", one_device)
    monkeypatch.setattr(devices, "run_on_devices", many_devices)
    wanted = [OBLIGATIONS["prefix"], OBLIGATIONS["batch"]]  # given out of order
    parts = list(run_stage("compare", _ctx(tmp_path, devices_), wanted))
    assert [name for name, _ in parts] == ["batch", "prefix"]  # protocol order, one part per suite
    assert [records for _, records in parts] == [["record of batch"], ["record of prefix"]]
    if len(devices_) > 1:
        assert calls == [("run_on_devices", ("batch",), devices_, D, False),
                         ("run_on_devices", ("prefix",), devices_, D, False)]
    else:
        device = devices_[0] if devices_ else "cpu"
        assert calls == [("run_suites", ("batch",), device, D, False), ("run_suites", ("prefix",), device, D, False)]
