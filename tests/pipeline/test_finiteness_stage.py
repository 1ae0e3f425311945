"""The runtime stage owns the finiteness premise exactly under a D that runs the run-time check."""

from assurance.pipeline.stages import stage_obligations

OBLIGATIONS = ["runtime.plan", "runtime.no_autotune", "runtime.deployment", "trusted.attention-finiteness",
               "trusted.triton-compiler"]


def test_the_runtime_stage_owns_the_finiteness_premise_only_when_d_runs_the_check():
    on = stage_obligations("runtime", OBLIGATIONS, {"engine": {"check_finite": True}})
    off = stage_obligations("runtime", OBLIGATIONS, {"engine": {"check_finite": False}})
    assert on == ["runtime.plan", "runtime.no_autotune", "runtime.deployment", "trusted.attention-finiteness"]
    assert off == ["runtime.plan", "runtime.no_autotune", "runtime.deployment"]
    assert stage_obligations("runtime", OBLIGATIONS) == off
