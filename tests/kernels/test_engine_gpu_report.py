"""bench/engine_gpu.py without a GPU: the decode-step profile, the summary, the collector watch, the baselines."""

from __future__ import annotations

from bench.engine_gpu_profile import _family, profile_markdown
from bench.engine_gpu_report import markdown
from kernels.shapes import preset


def test_profiler_events_group_by_plan_kernel():
    assert _family("matmul_kernel") == "matmul"
    assert _family("matmul_split_kernel") == "matmul_split" and _family("matmul_combine_kernel") == "matmul_combine"
    assert _family("attention_partial_kernel") == "paged_attention"
    assert _family("void at::native::vectorized_elementwise_kernel<4, ...>") == "torch"
    assert _family("part_argmax_kernel") == _family("pick_part_kernel") == "greedy"  # kernels/greedy.py
    assert _family("take_tokens_kernel") == _family("put_outputs_kernel") == "step_io"  # kernels/step_io.py


def _profile() -> dict:
    split = [{"kernel": "matmul_split", "calls_per_step": 48, "us_per_step": 300.0, "share": 0.75},
             {"kernel": "matmul_combine", "calls_per_step": 48, "us_per_step": 100.0, "share": 0.25}]
    return {"0": {"context": 0, "batch": 4, "plan_launches_per_step": 227,
                  "plan_launches_by_kernel": {"matmul_combine": 48, "matmul_split": 48},
                  "cuda_kernels_per_step": 230, "kernel_us_per_step": 400.0, "graph_gpu_ms": 0.9, "split": split,
                  "kernels": []},
            "4096": {"skipped": "time budget (3 s left)"}}


def test_profile_markdown_reports_launches_and_the_split_per_context():
    text = "\n".join(profile_markdown(_profile()))
    assert "227 plan launches a step (matmul_combine 48, matmul_split 48)" in text
    assert "230 CUDA kernels a step" in text and "graph replay 0.900 ms" in text
    assert "| matmul_split | 48 | 300.0 | 75% |" in text
    assert "context 4096: time budget (3 s left)" in text
    assert profile_markdown(None) == ["not run"]
    skipped = "the engine runs without CUDA graphs"
    assert profile_markdown({"skipped": skipped}) == [skipped]


def test_the_benchmark_summary_has_the_profile_section():
    results = {"environment": {"torch": "2", "triton": "3"}, "parts": {"decode_profile": {"result": _profile()}},
               "config": {"quick": True, "contexts": [0], "batch": 4, "new_tokens": 8, "hf_new_tokens": 3,
                          "repeats": 1}}
    text = markdown(results, preset("llama-1b"))
    assert "## Decode step: launches and GPU time by kernel" in text and "227 plan launches a step" in text


def test_the_compiled_baseline_model_is_the_eager_loops_model(tmp_path):
    """The static-cache step (what torch.compile compiles) gives the eager loop's greedy tokens from position 0."""
    import torch

    from bench.engine_gpu_baselines import _TorchLlama
    from bench.engine_gpu_compiled import _StaticCacheLlama
    from engine.checkpoint import make_checkpoint

    model_dir = make_checkpoint("tiny", tmp_path, seed=0)
    eager = _TorchLlama(model_dir, batch=3, max_len=16, device="cpu")
    static = _StaticCacheLlama(model_dir, batch=3, max_len=16, device="cpu")
    ours = theirs = torch.tensor([5, 17, 200])
    with torch.inference_mode():
        for pos in range(6):
            theirs = eager.step(theirs, pos)
            ours = static(ours, torch.tensor([pos]))
            assert torch.equal(ours, theirs), pos


def test_the_compiled_baseline_sizes_a_cache_per_context_and_loads_the_weights_once(tmp_path, monkeypatch):
    """Each context decodes with a cache of its own size (so a short context does not pay for the
    longest one's cache) and compiles afresh; the weights are loaded once. torch.compile is the
    identity here: what is under test is the bench's loop, not Inductor."""
    import torch

    import bench.engine_gpu_compiled as compiled
    from bench.engine_gpu_common import Budget
    from engine.checkpoint import make_checkpoint

    model_dir = make_checkpoint("tiny", tmp_path, seed=0)
    loads, caches, resets = [], [], []
    real_load = compiled.load_weights
    monkeypatch.setattr(compiled, "load_weights", lambda *a, **k: loads.append(1) or real_load(*a, **k))
    monkeypatch.setattr(torch, "compile", lambda model, **kw: caches.append(model.k_cache.shape[3]) or model)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    out = compiled.torch_compiled_decode(model_dir, contexts=[0, 40], batch=2, new_tokens=4, repeats=1,
                                         budget=Budget(10_000.0), device="cpu")
    assert caches == [5, 45] and len(loads) == 1 and len(resets) == 2
    assert [out[c]["cache_positions"] for c in ("0", "40")] == [5, 45]
    assert all(out[c]["tokens_per_s"]["n"] == 1 for c in ("0", "40"))
    # time for the first compilation and not for another: the later context is skipped with the reason
    class FirstOnly(Budget):
        def allows(self, seconds: float) -> bool:
            return seconds >= compiled.COMPILE_RESERVE_S

    late = compiled.torch_compiled_decode(model_dir, contexts=[0, 40], batch=2, new_tokens=4, repeats=1,
                                          budget=FirstOnly(1.0), device="cpu")
    assert "tokens_per_s" in late["0"] and "time budget" in late["40"]["skipped"]


def test_the_summary_counts_the_collector_passes_inside_timed_decode_runs():
    results = {"environment": {"torch": "2", "triton": "3"},
               "parts": {"engine_decode": {"result": {
                   "graphs": {"0": {"gc_full_passes_ms": [[], [], [109.1]]}, "1024": {"skipped": "time budget"}},
                   "eager": {"0": {"gc_full_passes_ms": [[], [4.2]]}}}}},
               "config": {"quick": True, "contexts": [0], "batch": 4, "new_tokens": 8, "hf_new_tokens": 3,
                          "repeats": 1, "gc_freeze": False}}
    text = markdown(results, preset("llama-1b"))
    assert "collector not frozen)" in text.splitlines()[0]
    assert "inside the 5 timed decode runs (collector not frozen): 2, longest 109 ms." in text
    results["config"]["gc_freeze"] = True
    results["parts"]["engine_decode"]["result"] = {"graphs": {"0": {"gc_full_passes_ms": [[], []]}}}
    assert "inside the 2 timed decode runs (collector frozen first): 0." in markdown(results, preset("llama-1b"))
    results["parts"]["engine_decode"] = {"skipped": "not selected"}
    assert "Full passes" not in markdown(results, preset("llama-1b"))


def test_collector_pauses_times_full_passes_and_freezes_only_inside():
    import gc

    from bench.engine_gpu_common import collector_pauses

    gc.unfreeze()
    with collector_pauses(freeze=True) as pauses:
        assert gc.get_freeze_count() > 0
        gc.collect(1)  # a younger pass is not timed
        gc.collect()
    assert gc.get_freeze_count() == 0 and len(pauses) == 1 and pauses[0] >= 0
    with collector_pauses(freeze=False) as pauses:
        assert gc.get_freeze_count() == 0
    assert pauses == []


def test_bad_decode_contexts_are_a_usage_error_before_anything_runs(tmp_path, capsys):
    import pytest

    from bench import engine_gpu

    for contexts, reason in (("a,b", "comma-separated token counts"), ("-5", "at least 0"), (",", "at least 0")):
        with pytest.raises(SystemExit) as exc:
            engine_gpu.main(["--out", str(tmp_path / "out"), "--contexts", contexts])
        assert exc.value.code == 2 and reason in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_slowest_steps_are_named_by_their_step_number_slowest_first():
    from bench.engine_gpu_workloads import _slowest

    assert _slowest([0.001, 0.003, 0.0011, 0.002]) == [[2, 3.0], [4, 2.0], [3, 1.1]]
    assert _slowest([0.001]) == [[1, 1.0]]
