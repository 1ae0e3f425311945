"""bench/deep_prefill.py without a GPU: usage errors, its report of a sweep's results, and its prototype
kernels against the plan's matmul under Triton's interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from kernels.plan import REPO_ROOT


@pytest.mark.parametrize("argv, says", [
    (["--tiles", "128x64w8s4"], "'128x64w8s4' is not a tile like 128x64w8s4n"),
    (["--ms", "4096,lots"], "--ms 4096,lots: expected row counts separated by commas"),
    (["--forms", "tiles,fast"], "--forms: unknown fast; known: tiles,pad,flat,tma,one"),
    (["--roles", "gate_up,lm_head"], "no weight of llama-1b with K ranges and a prefill bucket"),
])
def test_bad_arguments_are_usage_errors_that_name_the_argument(tmp_path, capsys, argv, says):
    from bench import deep_prefill

    with pytest.raises(SystemExit) as exc:
        deep_prefill.main(["--out", str(tmp_path / "out"), *argv])
    assert exc.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_without_a_gpu_it_is_a_usage_error(tmp_path, capsys):
    from bench import deep_prefill

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU, so the script would run its sweep instead")
    with pytest.raises(SystemExit) as exc:
        deep_prefill.main(["--out", str(tmp_path / "out"), "--roles", "down,o"])
    assert exc.value.code == 2 and "needs a CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_tiles_parse_with_their_grid_order():
    from bench import deep_prefill

    assert deep_prefill.parse_tiles("128x64w8s4n,64x128w4s3m,") == [(128, 64, 8, 4, True), (64, 128, 4, 3, False)]
    assert len(deep_prefill.parse_tiles(deep_prefill.TILES)) == deep_prefill.TILES.count(",") + 1


def test_the_report_gives_tflops_and_says_which_bits_differ_and_whether_that_was_expected():
    from bench import deep_prefill

    forms = [{"name": "torch (cuBLAS)", "us": {4096: 174.0}},
             {"name": "plan", "us": {4096: 335.0}, "differ": 0, "expected_to_keep_bits": True},
             {"name": "flat s4", "us": {4096: 354.0}, "differ": 12, "expected_to_keep_bits": True},
             {"name": "tile 128x32 w8 s6 n-major", "us": {}, "error": "OutOfResources: shared memory"},
             {"name": "one range (other bits)", "us": {4096: 310.0}, "differ": 79214, "expected_to_keep_bits": False}]
    text = deep_prefill.markdown({"preset": "llama-1b", "ms": [4096], "device": "GPU", "weights": [
        {"role": "down", "n": 2048, "k": 8192, "plan": "matmul.n2048_k8192_p1024", "flops_per_row": 2 * 2048 * 8192,
         "plan_tile": "128x64x128 w8 s4, 4 ranges", "forms": forms}]})
    assert "## down 2048 x 8192 (plan matmul.n2048_k8192_p1024: 128x64x128 w8 s4, 4 ranges)" in text
    assert "| torch (cuBLAS) | 174 (790) |  |" in text  # 2 * 2048 * 8192 * 4096 flops in 174 µs
    assert "| plan | 335 (410) | equal |" in text and "| flat s4 | 354 (388) | 12 differ |" in text
    assert "| tile 128x32 w8 s6 n-major | – | OutOfResources: shared memory |" in text
    assert "| one range (other bits) | 310 (443) | 79214 differ (expected) |" in text


def interpreted_forms() -> dict:
    """Under TRITON_INTERPRET=1: each prototype's float32 output against the plan's kernel with the same
    tile and 4 K ranges (rows past M in the last row tile, 4 steps a range), as elements that differ."""
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    from bench.deep_prefill import flat_kernel, tma_kernel
    from kernels.matmul import matmul_kernel

    m, n, k, bm, bn, bk, splits = 40, 64, 256, 32, 32, 16, 4
    g = torch.Generator().manual_seed(0)
    x = torch.randn(m, k, generator=g) * torch.exp2(torch.randint(-8, 9, (m, k), generator=g).float())
    w = torch.randn(n, k, generator=g)
    outs = {name: torch.full((m, n), float("nan")) for name in ("plan", "flat", "tma", "one range")}
    tiles = dict(N=n, K=k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, N_MAJOR=True)
    grid = (triton.cdiv(n, bn), triton.cdiv(m, bm))
    for name, ranges in (("plan", splits), ("one range", 1)):
        matmul_kernel[grid](x, w, w, outs[name], m, k, k, n, HAS_BIAS=False, OUT_DTYPE=triton.language.float32,
                            SPLITS=ranges, **tiles)
    flat_kernel[grid](x, w, outs["flat"], m, k, k, n, SPLITS=splits, **tiles)
    tma_kernel[grid](TensorDescriptor.from_tensor(x, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk]),
                     outs["tma"], m, n, SPLITS=splits, **tiles)
    want = outs["plan"].view(torch.int32)
    return {name: int((out.view(torch.int32) != want).sum()) for name, out in outs.items()}


@pytest.mark.slow
def test_the_prototypes_keep_the_plan_kernel_s_bits_and_dropping_the_ranges_does_not():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", "import json, tests.kernels.test_deep_prefill as t; "
                           "print(json.dumps(t.interpreted_forms()))"], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    differ = json.loads(done.stdout.strip().splitlines()[-1])
    assert differ["plan"] == differ["flat"] == differ["tma"] == 0, differ
    assert differ["one range"] > 0, "one accumulator over all of K should change some bits (the control)"
