"""bench/decode_splits.py without a GPU: a usage error, and its report of a sweep's results."""

from __future__ import annotations

import pytest
import torch


def test_without_a_gpu_it_is_a_usage_error(tmp_path, capsys):
    from bench import decode_splits

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU, so the script would run its sweep instead")
    with pytest.raises(SystemExit) as exc:
        decode_splits.main(["--out", str(tmp_path)])
    assert exc.value.code == 2 and "needs a CUDA GPU" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_report_puts_the_fastest_candidates_first_beside_the_plan_tile():
    from bench import decode_splits

    plan = [16, 16, 256, 4, 5]
    candidates = [{"tiles": plan, "splits": 1, "even": False, "us": 16.8, "hot_us": 15.7, "failures": []},
                  {"tiles": [16, 16, 256, 2, 3], "splits": 4, "even": False, "us": 12.9, "hot_us": 11.3, "failures": []},
                  {"tiles": [16, 16, 256, 2, 3], "splits": 4, "even": True, "us": 13.0, "hot_us": 11.2,
                   "failures": ["lockstep vs prefill tile, rows from 0: 3 elements differ"]},
                  {"tiles": [16, 32, 256, 2, 6], "splits": 4, "even": False, "error": "OutOfResources: shared memory"}]
    text = decode_splits.markdown({"preset": "llama-1b", "m": 4, "device": "GPU", "weights": [
        {"role": "down", "n": 2048, "k": 8192, "weight_bytes": 2 * 2048 * 8192, "plan_tiles": plan, "torch_us": 13.6,
         "candidates": candidates, "prefill_us": {1: 526.0, 4: 540.0}, "splits_change_bits": {4: True}}]})
    rows = [line for line in text.splitlines() if line.startswith("| [")]
    assert rows[0].startswith("| [16, 16, 256, 2, 3] | 4 | False | 12.9 |") and rows[0].endswith("| equal |")
    assert "3 elements differ" in rows[1] and "16.8 µs (hot 15.7)" in text
    assert "1 candidates failed" in text and "OutOfResources" in text
    # a candidate fits when its stages of every range's x and weight tiles fit shared memory
    for tiles, splits in decode_splits.candidates(2048, 8192, "bfloat16", (1, 2, 4)):
        assert tiles[4] * splits * (16 + tiles[1]) * tiles[2] * 2 <= decode_splits.SMEM_BYTES - 4096
