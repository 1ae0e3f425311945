"""bench/engine_ab.py without a GPU: what it reads from each process's results and its summary table."""

from __future__ import annotations

import pytest

from bench.engine_ab import _decode, main, summary


def _results(tokens_per_s: float, graph_ms: float, launches: int) -> dict:
    step_ms = 4 * 127 / tokens_per_s * 1e3 / 127  # batch 4
    return {"parts": {"engine_decode": {"result": {"graphs": {"0": {"tokens_per_s": {"median": tokens_per_s},
                                                                    "step_ms": {"median": step_ms}},
                                                              "1024": {"skipped": "time budget"}}}},
                      "decode_profile": {"result": {"0": {"graph_gpu_ms": graph_ms,
                                                          "plan_launches_per_step": launches}}}}}


def test_each_tree_is_summarised_against_base_by_the_medians_of_its_rounds():
    rounds = [{"new": _decode(_results(3000.0, 1.30, 147)), "base": _decode(_results(2900.0, 1.35, 163))},
              {"new": _decode(_results(3200.0, 1.20, 147)), "base": _decode(_results(3100.0, 1.25, 163))}]
    table = summary(rounds)
    assert "| 1 | new | 3,000, 1.333, 1.300 | —, —, — | 147 |" in table
    assert "| 2 | base | 3,100, 1.290, 1.250 | —, —, — | 163 |" in table
    # medians 3,100 against 3,000 tok/s and 1.250 against 1.300 ms
    assert "| new | 3,100 (1.033), 1.250 (0.962) | —, — |" in table
    assert "| base | 3,000 (1.000), 1.300 (1.000) | —, — |" in table
    # each dash of a decode the process skipped says why
    assert "- round 2, base, context 1,024: decode not run: time budget" in table
    assert "context 0: decode not run" not in table


def test_a_tree_without_the_benchmark_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--base", str(tmp_path), "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "no bench/engine_gpu.py there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--base", str(tmp_path), "--out", str(tmp_path / "out"), "--variant", "base=" + str(tmp_path)])
    assert "a NAME other than new and base" in capsys.readouterr().err
