"""bench/host_copy.py without a GPU: bad arguments and a missing GPU are usage errors (exit 2)."""

from __future__ import annotations

import pytest
import torch


def test_bad_arguments_are_refused_with_the_reason(capsys):
    from bench import host_copy

    with pytest.raises(SystemExit) as exc:
        host_copy.main(["--calls", "10"])
    assert exc.value.code == 2 and "--calls at least 100" in capsys.readouterr().err


def test_without_a_gpu_it_is_a_usage_error(tmp_path, capsys):
    from bench import host_copy

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU, so the script would time the copies instead")
    assert host_copy.main(["--out", str(tmp_path / "r.json")]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err and not (tmp_path / "r.json").exists()
