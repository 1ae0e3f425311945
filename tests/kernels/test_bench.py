"""bench/kernels.py runs end to end on CPU at the tiny shape, and records failing cases."""

from __future__ import annotations

import json

import pytest
import torch

from bench import kernels as bench
from bench.kernel_cases import BenchCase

ARGS = ["--device", "cpu", "--preset", "tiny", "--ms", "1,8", "--prefill-m", "8", "--repeats", "1",
        "--kernels", "matmul,rms_norm,paged_attention", "--threads", "1"]


def test_bench_writes_json_and_markdown(tmp_path):
    assert bench.main(["--out", str(tmp_path), *ARGS]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["preset"] == "tiny" and results["plan_digest"].startswith("sha256:")
    assert {"copy_gbps", "cublas_bf16_tflops"} <= set(results["ceilings"])
    kinds = {(r["kernel"], r["m"]) for r in results["cases"]}
    assert ("matmul", 1) in kinds and ("paged_attention", 8) in kinds and ("rms_norm", 8) in kinds
    for row in results["cases"]:
        assert row["ours_us"] > 0 and row["torch_us"] > 0 and "error" not in row
        assert row["max_abs_diff_vs_torch"] < 1e-3, row  # the same math as torch, up to rounding
    table = (tmp_path / "results.md").read_text()
    assert "| kernel | shape | M | ours µs | torch µs |" in table and "paged_attention" in table


def test_a_failing_case_is_recorded_and_the_run_continues(tmp_path, monkeypatch):
    def broken(i):
        raise RuntimeError("deliberately broken case")

    real = bench.all_cases
    monkeypatch.setattr(bench, "all_cases", lambda *a, **k: [BenchCase("matmul", "broken", 1, 1, 0, broken)]
                        + real(*a, **k))
    assert bench.main(["--out", str(tmp_path), *ARGS]) == 1
    rows = json.loads((tmp_path / "results.json").read_text())["cases"]
    assert "deliberately broken case" in rows[0]["error"]
    assert all("error" not in r for r in rows[1:]) and len(rows) > 1
    assert "deliberately broken case" in (tmp_path / "results.md").read_text()


def test_cuda_without_a_gpu_is_a_usage_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--out", str(tmp_path), "--device", "cuda"])
    assert exit_info.value.code == 2
