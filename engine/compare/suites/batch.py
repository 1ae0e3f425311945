"""Batching/order suite: 296 comparisons.

32 prompts at page- and chunk-boundary lengths. For each group size g in (2, 4, 8) and each order
(forward, reversed, shuffled) the 32 prompts, in that order, are cut into 32/g consecutive groups;
each group runs as one batch in a fresh engine and every member's trace is compared with its cold
singleton reference computed in a fresh process: 3 sizes x 3 orders x 32 = 288. At spots 0, 10, 21
and 31, two more checks (8): a singleton in a fresh engine of this (warm) process against the
reference, and a singleton from a second, independent fresh process against the reference.
"""

from __future__ import annotations

import random
import time

from engine.compare.context import SuiteContext
from engine.compare.execute import judge_unit
from engine.compare.outcomes import UnitOutcome
from engine.compare.prompts import prompt_ids
from engine.compare.scales import ScaleSpec
from engine.compare.units import ComparisonSpec, ReferenceJob, RequestSpec, Unit
from engine.sampling_params import SamplingParams

__all__ = ["plan", "run", "GROUP_SIZES", "ORDERS", "FRESH_SPOTS", "sampling_for"]

GROUP_SIZES = (2, 4, 8)
ORDERS = ("forward", "reversed", "shuffled")
FRESH_SPOTS = (0, 10, 21, 31)


def sampling_for(index: int, max_tokens: int, seed: int) -> SamplingParams:
    """Even prompts decode greedily, odd ones sample with their own seed (so sampler state matters)."""
    if index % 2 == 0:
        return SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    return SamplingParams(max_tokens=max_tokens, temperature=0.8, top_p=0.95, seed=seed + index, ignore_eos=True)


def _order(name: str, seed: int, size: int) -> list[int]:
    idx = list(range(32))
    if name == "reversed":
        idx.reverse()
    elif name == "shuffled":
        random.Random(f"{seed}:batch:shuffle:{size}").shuffle(idx)
    return idx


def plan(scale: ScaleSpec, vocab_size: int, seed: int) -> list[Unit]:
    """The 10 units of the suite: 9 (size, order) units of 32 and one fresh-process unit of 8."""
    requests = {f"p{i:02d}": RequestSpec(f"p{i:02d}", prompt_ids(seed, f"batch.p{i:02d}", n, vocab_size),
                                         sampling_for(i, scale.batch_max_tokens, seed))
                for i, n in enumerate(scale.batch_prompt_lengths)}
    refs = {label: ReferenceJob(req) for label, req in requests.items()}
    cost = sum(len(r.prompt) + r.params.max_tokens for r in requests.values())
    units = []
    for size in GROUP_SIZES:
        for order in ORDERS:
            idx = _order(order, seed, size)
            groups = tuple(tuple(f"p{i:02d}" for i in idx[k:k + size]) for k in range(0, 32, size))
            comparisons = tuple(
                ComparisonSpec(f"batch.g{size}-{order}.{label}", label, refs[label].ref,
                               witnesses=("co_scheduled", "cold_candidate"))
                for group in groups for label in group)
            units.append(Unit(f"batch.g{size}-{order}", "batch", comparisons, tuple(refs.values()),
                              plan=groups, cost=cost, requests=requests))
    fresh: list[ComparisonSpec] = []
    jobs = []
    for spot in FRESH_SPOTS:
        label = f"p{spot:02d}"
        second = ReferenceJob(requests[label], process="second")
        jobs += [refs[label], second]
        fresh.append(ComparisonSpec(f"batch.fresh.{label}.in-process", label, refs[label].ref,
                                    witnesses=("cold_candidate",)))
        fresh.append(ComparisonSpec(f"batch.fresh.{label}.second-process", second.ref, refs[label].ref,
                                    witnesses=("cold_candidate",)))
    spot_requests = {f"p{s:02d}": requests[f"p{s:02d}"] for s in FRESH_SPOTS}
    units.append(Unit("batch.fresh", "batch", tuple(fresh), tuple(jobs), plan=FRESH_SPOTS,
                      cost=2 * sum(len(r.prompt) for r in spot_requests.values()), requests=spot_requests))
    return units


def run(unit: Unit, ctx: SuiteContext) -> UnitOutcome:
    """Run the unit's groups (or singletons), each in a fresh engine, then judge every comparison."""
    start = time.perf_counter()
    runs = {}
    batches = unit.plan if unit.unit_id != "batch.fresh" else tuple((f"p{s:02d}",) for s in unit.plan)
    for group in batches:
        handle = ctx.open_engine()
        try:
            result = handle.run([unit.requests[label] for label in group])
        finally:
            handle.close()
        runs.update(result.requests)
        ctx.note(f"{unit.unit_id}: ran {'+'.join(group)}")
    outcomes = judge_unit(unit, ctx, runs)
    return UnitOutcome(unit, outcomes, engine_configs={"candidate": dict(ctx.engine_config()),
                                                         "reference": dict(ctx.engine_config())},
                       seconds=time.perf_counter() - start)
