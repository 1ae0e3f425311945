"""Prefill/decode suite: 384 comparisons (3 prompts x 128 generated positions).

For each prompt the candidate decodes 128 tokens greedily in a fresh engine. Row ``i`` of its trace
(produced by a decode step for ``i >= 1``) is compared with a teacher-forced prefill: the request
``prompt + y[:i]`` *as token ids*, producing one position, computed alone as one unchunked prefill in
an engine with the prefix cache disabled (so it is a cold computation, never a reuse of the
candidate's pages). The teacher-forced request starts with sampler counter 0 where the candidate's
counter is ``i``, so its sampler state is compared after shifting the counter by ``i``; the logit row
and the token are compared as they are.
"""

from __future__ import annotations

import time
from dataclasses import replace

from engine.compare.bitwise import ObservedTrace
from engine.compare.context import SuiteContext
from engine.compare.outcomes import UnitOutcome, judge, unavailable
from engine.compare.prompts import prompt_ids
from engine.compare.runs import RequestRun
from engine.compare.scales import ScaleSpec
from engine.compare.units import ComparisonSpec, RequestSpec, Unit
from engine.sampling_params import SamplingParams

__all__ = ["plan", "run"]

WITNESSES = ("reference_unchunked", "cold_candidate")


def plan(scale: ScaleSpec, vocab_size: int, seed: int) -> list[Unit]:
    """One unit per prompt, ``pd_positions`` comparisons each."""
    units = []
    for k, n in enumerate(scale.pd_prompt_lengths):
        request = RequestSpec(f"d{k}", prompt_ids(seed, f"pd.d{k}", n, vocab_size),
                              SamplingParams(max_tokens=scale.pd_positions, seed=seed + 2000 + k, ignore_eos=True))
        comparisons = tuple(ComparisonSpec(f"pd.d{k}.t{i:03d}", f"d{k}", f"tf{i:03d}", witnesses=WITNESSES)
                            for i in range(scale.pd_positions))
        cost = sum(n + i for i in range(scale.pd_positions)) // 8 + n + scale.pd_positions
        units.append(Unit(f"pd.d{k}", "prefill-decode", comparisons, plan=k, cost=cost,
                          requests={request.label: request}))
    return units


def _position(run: RequestRun, i: int) -> RequestRun:
    t = run.trace
    return replace(run, trace=ObservedTrace(t.tokens[i:i + 1], t.sampler_states[i:i + 1], t.logits[i:i + 1]))


def _shifted(run: RequestRun, offset: int) -> RequestRun:
    t = run.trace
    states = tuple((seed, counter + offset) for seed, counter in t.sampler_states)
    return replace(run, trace=ObservedTrace(t.tokens, states, t.logits))


def run(unit: Unit, ctx: SuiteContext) -> UnitOutcome:
    """Decode the prompt, then teacher-force every prefix of its output and judge row by row."""
    start = time.perf_counter()
    (request,) = unit.requests.values()
    handle = ctx.open_engine()
    try:
        candidate = handle.run([request]).requests[request.label]
    finally:
        handle.close()
    ctx.note(f"{unit.unit_id}: decoded {len(candidate.trace)} positions")
    generated = candidate.trace.tokens
    reference_config = {"enable_prefix_caching": False, "max_num_batched_tokens": ctx.scale.max_model_len}
    forced = {}
    handle = ctx.open_engine(**reference_config)
    try:
        for spec in unit.comparisons:
            i = int(spec.reference[2:])
            if i >= len(generated):
                break
            tf_request = RequestSpec(spec.reference, request.prompt + tuple(generated[:i]),
                                     replace(request.params, max_tokens=1))
            forced[i] = (tf_request, handle.run([tf_request]).requests[spec.reference])
    finally:
        handle.close()
    outcomes = []
    for spec in unit.comparisons:
        i = int(spec.reference[2:])
        if i not in forced:
            outcomes.append(unavailable(spec, request.label, f"the candidate stopped after {len(generated)} positions"))
            continue
        tf_request, tf_run = forced[i]
        outcomes.append(judge(spec, replace(request, label=f"{request.label}@{i}"), _position(candidate, i),
                              _shifted(tf_run, i)))
    return UnitOutcome(unit, outcomes, seconds=time.perf_counter() - start, engine_configs={
        "candidate": dict(ctx.engine_config()), "reference": dict(ctx.engine_config(**reference_config))})
