"""The protocol's plan: exact counts, their decomposition, boundary lengths, determinism."""

from collections import Counter

import pytest

from engine.compare.protocol import EXPECTED_COMPARISONS, OBLIGATIONS, SUITES, suite_names
from engine.compare.runner import plan_units
from engine.compare.scales import SCALES
from engine.compare.suites import batch, schedule

PLANNED = [s for s in SUITES if s != "fidelity"]


@pytest.mark.parametrize("scale", sorted(SCALES))
def test_counts_are_exact_at_every_scale(scale):
    units = plan_units(PLANNED, SCALES[scale], 256, 7)
    counts = Counter()
    for u in units:
        counts[u.suite] += u.num_comparisons
    assert dict(counts) == {s: EXPECTED_COMPARISONS[s] for s in PLANNED}
    assert sum(counts[s] for s in ("batch", "chunk", "prefill-decode", "prefix")) == 784
    ids = [c.comparison_id for u in units for c in u.comparisons]
    assert len(ids) == len(set(ids)), "comparison ids must be unique across the whole protocol"


def test_batch_decomposition():
    units = batch.plan(SCALES["ci"], 256, 7)
    groups = [u for u in units if u.unit_id != "batch.fresh"]
    assert len(groups) == 9 and all(u.num_comparisons == 32 for u in groups)
    for u in groups:
        size = int(u.unit_id.split("-")[0][len("batch.g"):])
        assert all(len(g) == size for g in u.plan)
        members = [label for g in u.plan for label in g]
        assert sorted(members) == [f"p{i:02d}" for i in range(32)], "each order partitions the 32 prompts"
    fwd = {u.unit_id: u.plan for u in groups}
    assert fwd["batch.g8-shuffled"] != fwd["batch.g8-forward"]
    assert fwd["batch.g2-reversed"][0] == ("p31", "p30")
    fresh = next(u for u in units if u.unit_id == "batch.fresh")
    assert fresh.num_comparisons == 8
    assert {j.process for j in fresh.references} == {"first", "second"}


@pytest.mark.parametrize("scale", sorted(SCALES))
def test_lengths_sit_on_boundaries(scale):
    s = SCALES[scale]
    for n in s.batch_prompt_lengths[2:]:
        assert min(n % s.page_size, -n % s.page_size) <= 1, n
    assert min(s.chunk_prompt_lengths) > max(s.chunk_budgets)
    for budget in s.chunk_budgets:
        assert any(min(n % budget, -n % budget) <= 1 for n in s.chunk_prompt_lengths), budget


def test_plan_is_deterministic_and_in_vocabulary():
    a = plan_units(PLANNED, SCALES["ci"], 256, 7)
    b = plan_units(PLANNED, SCALES["ci"], 256, 7)
    assert [(u.unit_id, tuple(sorted((k, r.prompt) for k, r in u.requests.items()))) for u in a] == \
           [(u.unit_id, tuple(sorted((k, r.prompt) for k, r in u.requests.items()))) for u in b]
    assert all(0 < t < 256 for u in a for r in u.requests.values() for t in r.prompt)
    other_seed = plan_units(["batch"], SCALES["ci"], 256, 8)
    assert other_seed[0].requests["p05"].prompt != a[0].requests["p05"].prompt


def test_schedule_mixes_sampling_and_witnesses():
    units = {u.unit_id: u for u in schedule.plan(SCALES["ci"], 256, 7)}
    params = [r.params for r in units["schedule.queued"].requests.values()]
    assert any(p.is_greedy for p in params) and any(p.top_k for p in params) and any(p.top_p < 1 for p in params)
    assert len({p.seed for p in params}) == 8
    cancel = units["schedule.cancel"]
    assert sum(c.mode == "prefix" for c in cancel.comparisons) == 3
    assert units["schedule.eviction"].plan[3] == ("evicted",)


def test_suite_names():
    assert suite_names("all") == SUITES
    assert set(OBLIGATIONS.values()) >= {"suite.batch", "suite.negative_control", "fidelity.reference"}
    with pytest.raises(ValueError, match="unknown suite"):
        suite_names("bogus")
