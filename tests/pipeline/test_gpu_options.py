"""`bitcase assure --gpu --gpus N`: which devices the comparison suites are split over, and usage errors."""

import pytest
from typer.testing import CliRunner

from assurance.cli.assure import _devices
from assurance.cli.main import app
from assurance.pipeline.options import AssureOptions

runner = CliRunner()


def test_gpus_without_gpu_exits_2(tmp_path, monkeypatch):
    monkeypatch.setenv("BITCASE_HOME", str(tmp_path))
    result = runner.invoke(app, ["assure", "--gpus", "2"])
    assert result.exit_code == 2 and result.stdout == ""
    assert "--gpus needs --gpu" in " ".join(result.stderr.split())


@pytest.mark.parametrize("visible, gpus, expected", [(2, None, ("cuda:0", "cuda:1")), (1, None, ()), (4, 1, ()),
                                                      (4, 3, ("cuda:0", "cuda:1", "cuda:2"))])
def test_devices_default_to_every_visible_gpu(monkeypatch, visible, gpus, expected):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    assert _devices(True, gpus) == expected


@pytest.mark.parametrize("visible, gpus, message", [(0, None, "no CUDA device is visible"),
                                                    (2, 3, "only 2 CUDA device(s) are visible")])
def test_missing_gpus_exit_2(tmp_path, monkeypatch, visible, gpus, message):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    monkeypatch.setenv("BITCASE_HOME", str(tmp_path))
    result = runner.invoke(app, ["assure", "--gpu", *(["--gpus", str(gpus)] if gpus else [])])
    assert result.exit_code == 2 and message in " ".join(result.stderr.split())


@pytest.mark.parametrize("device, devices", [("cpu", ("cuda:0", "cuda:1")), ("cuda", ("cuda:0", "cuda:0")),
                                             ("cuda", ("gpu0",))])
def test_options_refuse_bad_device_lists(tmp_path, device, devices):
    with pytest.raises(ValueError, match="distinct cuda:N"):
        AssureOptions(db_url="sqlite://", home=tmp_path, out_dir=tmp_path, case_path=tmp_path / "c.toml",
                      device=device, devices=devices)
