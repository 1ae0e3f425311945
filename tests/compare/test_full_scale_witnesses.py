"""The full scale's schedule scenarios produce their witnesses, checked on the CPU before a GPU run.

Scheduling does not depend on the model's values, so the tiny preset under the full scale's small
pool shows whether the preempt and eviction scenarios really preempt and evict.
"""

import pytest

from engine.compare.engine_port import RealEngine
from engine.compare.scales import scale_spec
from engine.compare.suites import schedule


@pytest.mark.parametrize("unit_id, witness", [("schedule.preempt", "preemptions"),
                                              ("schedule.eviction", "evictions")])
def test_full_scale_schedule_scenario_has_its_witness(tiny_model_dir, unit_id, witness):
    import json

    spec = scale_spec("full")
    vocab_size = json.loads((tiny_model_dir / "config.json").read_text())["vocab_size"]
    unit = next(u for u in schedule.plan(spec, vocab_size, 0) if u.unit_id == unit_id)
    overrides, arrivals, cancels, _ = unit.plan
    engine = RealEngine(tiny_model_dir, {**dict(spec.deployment), **overrides})
    result = engine.run(list(unit.requests.values()), arrival_steps=arrivals, cancel_steps=cancels)
    counts = {"preemptions": sum(r.num_preemptions for r in result.requests.values()),
              "evictions": result.num_evictions}
    assert counts[witness] > 0, counts
