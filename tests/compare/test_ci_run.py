"""One full ci-scale run of every suite on the real engine (CPU), for the tiny preset of each model family
(Llama, Qwen3, Mistral, Gemma3): exact counts, all pass, the negative control detects the non-invariant engine,
fidelity within tolerance, runtime checks pass."""

import time
from collections import Counter

import pytest

from engine.compare.api import run_suites
from engine.compare.protocol import EXPECTED_COMPARISONS, OBLIGATIONS
from evidence_db.validate import validate_evidence


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["tiny", "qwen3-tiny", "mistral-tiny", "gemma3-tiny"])
def test_every_suite_at_ci_scale(request, tmp_path_factory, preset):
    from engine.checkpoint import make_checkpoint

    model_dir = request.getfixturevalue("tiny_model_dir") if preset == "tiny" else \
        make_checkpoint(preset, tmp_path_factory.mktemp(preset), seed=0)
    events = []
    start = time.perf_counter()
    records = run_suites(model_dir, "all", scale="ci", device="cpu", progress=events.append, command=["test"])
    seconds = time.perf_counter() - start
    for r in records:
        validate_evidence(r.to_json_dict())
    failing = [(r.summary, r.details.get("problems"), r.details.get("findings", [])[:2])
               for r in records if r.status != "pass"]
    assert not failing, failing
    units = [r for r in records if r.category == "test_result"]
    assert len(units) == 34, "one record per unit and no finding records"
    counts = Counter()
    for r in units:
        counts[r.obligation] += r.details["num_comparisons"]
        assert sorted(r.details["suite_units"]) == sorted(
            u.details["unit"] for u in units if u.obligation == r.obligation)
    assert counts == {OBLIGATIONS[s]: n for s, n in EXPECTED_COMPARISONS.items()}
    control = [r for r in units if r.obligation == "suite.negative_control"]
    assert len(control) == 5 and all(r.details["num_failed"] > 0 for r in control)
    assert {r.obligation for r in records if r.category == "runtime_config_check"} == {
        "runtime.plan", "runtime.no_autotune", "runtime.deployment", "trusted.attention-finiteness"}
    assert [e.kind for e in events].count("unit") == 34
    print(f"ci scale, every suite, {preset}: {seconds:.0f} s")  # docs/performance.md records the measured figure
