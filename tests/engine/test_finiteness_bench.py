"""bench/finiteness.py runs on the CPU, pairs the two engines, and refuses bad input with exit 2."""

import json
import subprocess
import sys

import pytest

from kernels.plan import REPO_ROOT


def _bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "finiteness.py"), *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_the_bench_pairs_an_engine_with_the_check_and_one_without(tmp_path, tiny_dir):
    out = tmp_path / "finiteness.json"
    done = _bench("--model", str(tiny_dir), "--pairs", "2", "--new-tokens", "3", "--prompt-len", "8",
                  "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result == json.loads(done.stdout)
    assert len(result["ratios_on_over_off"]) == 2 and result["clock"] == "cpu"
    assert result["deployments"]["True"] != result["deployments"]["False"]
    assert result["overhead_percent"] == 100.0 * (1.0 - result["median_ratio"])


def test_bad_input_is_a_usage_error(tmp_path):
    done = _bench("--model", str(tmp_path), timeout=120)
    assert done.returncode == 2 and "holds no config.json" in done.stderr
    done = _bench("--pairs", "0", timeout=120)
    assert done.returncode == 2 and "must be >= 1" in done.stderr


def test_cuda_without_a_gpu_is_a_usage_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: there the bench measures instead")
    done = _bench("--device", "cuda", timeout=120)
    assert done.returncode == 2 and "needs a CUDA GPU" in done.stderr
