"""Schedule-stress suite (beyond the paper): 48 comparisons, 6 scenarios x 8 prompts.

Eight boundary-length prompts with mixed sampling (greedy, temperature, top-k, top-p, each with its
own seed) run under five schedules, each in a fresh engine:

* ``queued``: all arrive at once with room for two running requests; witness: requests waited.
* ``staggered``: arrivals at fixed steps while others run; witness: each late arrival joined work
  in flight.
* ``eviction``: a small KV pool and two running requests, so published pages of finished requests
  must be evicted; witness: at least one registered page was evicted.
* ``preempt``: a small KV pool and all requests running, so decode growth preempts (recompute);
  witness: at least one preemption.
* ``cancel``: three requests are cancelled mid-flight; their shortened traces must equal the
  beginning of their references (prefix comparability), the others must match in full.
* ``padded``: staggered arrivals with padded steps (``cuda_graphs``: decode steps run as a batch
  of the next graph size, and steps with prefill rows as a batch of a graph shape, replayed from
  CUDA graphs on a GPU, eagerly on the CPU); witness: at least one decode step ran with padding
  rows and at least one step with prefill rows ran padded. The references run unpadded.

Every trace is compared with the request's cold singleton reference from a fresh process.
"""

from __future__ import annotations

import time

from engine.compare.context import SuiteContext
from engine.compare.execute import judge_unit
from engine.compare.outcomes import UnitOutcome
from engine.compare.prompts import prompt_ids
from engine.compare.scales import ScaleSpec
from engine.compare.units import ComparisonSpec, ReferenceJob, RequestSpec, Unit
from engine.compare.witnesses import missing_run_witnesses
from engine.sampling_params import SamplingParams

__all__ = ["plan", "run", "SCENARIOS", "sampling_mix"]

SCENARIOS = ("queued", "staggered", "eviction", "preempt", "cancel", "padded")


def sampling_mix(index: int, max_tokens: int, seed: int) -> SamplingParams:
    """The eight sampling settings, one per prompt."""
    base = {"max_tokens": max_tokens, "ignore_eos": True, "seed": seed + 4000 + index}
    settings = [{}, {"temperature": 0.8}, {"temperature": 1.0, "top_k": 5}, {"temperature": 0.7, "top_p": 0.9},
                {"temperature": 1.2, "top_k": 20, "top_p": 0.95}, {}, {"temperature": 1.0},
                {"temperature": 0.6, "top_p": 0.5}]
    return SamplingParams(**base, **settings[index % len(settings)])


def _scenario(scale: ScaleSpec, name: str) -> tuple[dict, dict, dict, tuple[str, ...]]:
    """(engine overrides, arrival steps, cancel steps, run witnesses) of one scenario."""
    small = {"num_pages": scale.schedule_small_pool_pages, "max_model_len": scale.schedule_small_pool_max_model_len}
    if name == "queued":
        return {"max_num_seqs": 2}, {}, {}, ("queued",)
    staggered = {f"s{i}": step for i, step in enumerate(scale.schedule_arrival_steps) if step}
    if name == "staggered":
        return {}, staggered, {}, ()
    if name == "padded":
        return {"cuda_graphs": True}, staggered, {}, ("padded", "padded_mixed")
    if name == "eviction":
        return {**small, "max_num_seqs": 2}, {}, {}, ("evicted",)
    if name == "preempt":
        return {**small, "max_num_seqs": 8}, {}, {}, ("preempted",)
    return {}, {}, {f"s{i}": step for i, step in scale.schedule_cancel_steps}, ()


def plan(scale: ScaleSpec, vocab_size: int, seed: int) -> list[Unit]:
    """One unit per scenario, 8 comparisons each."""
    requests = {f"s{i}": RequestSpec(f"s{i}", prompt_ids(seed, f"schedule.s{i}", n, vocab_size),
                                     sampling_mix(i, scale.schedule_max_tokens, seed))
                for i, n in enumerate(scale.schedule_prompt_lengths)}
    refs = {label: ReferenceJob(req) for label, req in requests.items()}
    cost = sum(len(r.prompt) + r.params.max_tokens for r in requests.values())
    units = []
    for name in SCENARIOS:
        overrides, arrivals, cancels, run_witnesses = _scenario(scale, name)
        comparisons = []
        for label in requests:
            witnesses: tuple[str, ...] = ("cold_candidate",) if name == "queued" else ()
            if label in arrivals:
                witnesses += ("joined_running",)
            if label in cancels:
                witnesses += ("cancelled_midway",)
            comparisons.append(ComparisonSpec(f"schedule.{name}.{label}", label, refs[label].ref,
                                              mode="prefix" if label in cancels else "full", witnesses=witnesses))
        units.append(Unit(f"schedule.{name}", "schedule", tuple(comparisons), tuple(refs.values()),
                          plan=(overrides, arrivals, cancels, run_witnesses), cost=cost, requests=requests))
    return units


def run(unit: Unit, ctx: SuiteContext) -> UnitOutcome:
    """Run the scenario's schedule in a fresh engine, check its engine-wide witnesses, judge each trace."""
    start = time.perf_counter()
    overrides, arrivals, cancels, run_witnesses = unit.plan
    handle = ctx.open_engine(**overrides)
    try:
        result = handle.run(list(unit.requests.values()), arrival_steps=arrivals, cancel_steps=cancels)
    finally:
        handle.close()
    ctx.note(f"{unit.unit_id}: {result.num_steps} steps")
    outcomes = judge_unit(unit, ctx, result.requests)
    witnesses = {"num_steps": result.num_steps, "num_evictions": result.num_evictions,
                 "max_num_waiting_at_capacity": result.max_num_waiting_at_capacity,
                 "num_preemptions": sum(r.num_preemptions for r in result.requests.values()),
                 "num_padded_steps": result.num_padded_steps}
    return UnitOutcome(unit, outcomes, problems=missing_run_witnesses(run_witnesses, result),
                       run_witnesses=witnesses, seconds=time.perf_counter() - start,
                       engine_configs={"candidate": dict(ctx.engine_config(**overrides)),
                                       "reference": dict(ctx.engine_config())})
