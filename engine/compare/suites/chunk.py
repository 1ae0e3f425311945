"""Chunked-prefill suite: 90 comparisons (18 prompts x 5 chunk budgets).

Each prompt is longer than every budget and sits at ``base - 1``, ``base`` or ``base + 1`` for bases
that are multiples of the budgets, so the last chunk is one token short, exactly full, or a single
token. One unit per budget: the 18 prompts run one after another in one engine whose token budget is
that chunk budget; each is compared with its cold reference, whose budget covers the whole prompt.
Witnesses: the candidate prefill really was chunked (the boundaries used are recorded), the reference
prefill was not, and neither reused cached KV.
"""

from __future__ import annotations

import time

from engine.compare.context import SuiteContext
from engine.compare.execute import judge_unit
from engine.compare.outcomes import UnitOutcome
from engine.compare.prompts import prompt_ids
from engine.compare.scales import ScaleSpec
from engine.compare.units import ComparisonSpec, ReferenceJob, RequestSpec, Unit, engine_overrides
from engine.sampling_params import SamplingParams

__all__ = ["plan", "run"]

WITNESSES = ("chunked", "reference_unchunked", "cold_candidate")


def plan(scale: ScaleSpec, vocab_size: int, seed: int) -> list[Unit]:
    """One unit per chunk budget, 18 comparisons each."""
    requests = {}
    for i, n in enumerate(scale.chunk_prompt_lengths):
        params = SamplingParams(max_tokens=scale.chunk_max_tokens, temperature=0.7, seed=seed + 1000 + i,
                                ignore_eos=True)
        requests[f"c{i:02d}"] = RequestSpec(f"c{i:02d}", prompt_ids(seed, f"chunk.c{i:02d}", n, vocab_size), params)
    unchunked = engine_overrides(max_num_batched_tokens=scale.max_model_len)
    refs = {label: ReferenceJob(req, unchunked) for label, req in requests.items()}
    cost = sum(len(r.prompt) + r.params.max_tokens for r in requests.values())
    units = []
    for budget in scale.chunk_budgets:
        comparisons = tuple(ComparisonSpec(f"chunk.b{budget}.{label}", label, refs[label].ref, witnesses=WITNESSES)
                            for label in requests)
        units.append(Unit(f"chunk.b{budget}", "chunk", comparisons, tuple(refs.values()), plan=budget,
                          cost=cost, requests=requests))
    return units


def run(unit: Unit, ctx: SuiteContext) -> UnitOutcome:
    """Run each prompt alone under the unit's chunk budget in one engine lifetime, then judge."""
    start = time.perf_counter()
    budget = unit.plan
    handle = ctx.open_engine(max_num_batched_tokens=budget)
    runs = {}
    try:
        for label, request in unit.requests.items():
            runs.update(handle.run([request]).requests)
            ctx.note(f"{unit.unit_id}: ran {label}")
    finally:
        handle.close()
    outcomes = judge_unit(unit, ctx, runs)
    return UnitOutcome(unit, outcomes, seconds=time.perf_counter() - start, engine_configs={
        "candidate": dict(ctx.engine_config(max_num_batched_tokens=budget)),
        "reference": dict(ctx.engine_config(max_num_batched_tokens=ctx.scale.max_model_len))})
