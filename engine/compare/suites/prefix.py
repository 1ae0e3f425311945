"""Prefix-reuse suite: 14 comparisons, donor and reuser in one engine lifetime.

* ``prefix.partial`` (10): a donor prompt of a boundary length runs first; the reuser is the donor
  prompt plus a fresh suffix and must attach the donor's full pages.
* ``prefix.full`` (2): the reuser repeats the donor prompt exactly (the engine still computes the
  last position itself).
* ``prefix.shared`` (1): donor and reuser share a long prefix and diverge in their suffixes; the
  reuser arrives while the donor is still decoding, so live (referenced) pages are shared.
* ``prefix.generated`` (1): the reuser is the donor's prompt plus the donor's *generated* tokens
  plus a suffix, so it must reuse pages the donor filled while decoding.

Every reuser is compared with its cold reference from a fresh process. Witness: the reuser's
cached-token count is positive (for ``generated``, above the donor prompt's full pages).
"""

from __future__ import annotations

import time

from engine.compare.context import SuiteContext
from engine.compare.execute import judge_unit
from engine.compare.outcomes import UnitOutcome, judge, unavailable
from engine.compare.prompts import extend_ids, prompt_ids
from engine.compare.references import ReferenceError
from engine.compare.scales import ScaleSpec
from engine.compare.units import ComparisonSpec, ReferenceJob, RequestSpec, Unit
from engine.sampling_params import SamplingParams

__all__ = ["plan", "run"]


def _params(scale: ScaleSpec, seed: int, k: int, max_tokens: int | None = None) -> SamplingParams:
    n = scale.prefix_max_tokens if max_tokens is None else max_tokens
    if k % 2:
        return SamplingParams(max_tokens=n, temperature=0.9, top_k=40, seed=seed + 3000 + k, ignore_eos=True)
    return SamplingParams(max_tokens=n, ignore_eos=True)


def _pairs_unit(unit_id: str, pairs: list[tuple[RequestSpec, RequestSpec]], *, arrival: int | None) -> Unit:
    requests = {r.label: r for pair in pairs for r in pair}
    refs = [ReferenceJob(reuser) for _, reuser in pairs]
    comparisons = tuple(ComparisonSpec(f"{unit_id}.{reuser.label}", reuser.label, job.ref,
                                       witnesses=("cache_hit",) + (("joined_running",) if arrival else ()))
                        for (_, reuser), job in zip(pairs, refs))
    donors = tuple(d.label for d, _ in pairs)
    cost = 2 * sum(len(r.prompt) + r.params.max_tokens for r in requests.values())
    return Unit(unit_id, "prefix", comparisons, tuple(refs), plan=(donors, arrival), cost=cost, requests=requests)


def plan(scale: ScaleSpec, vocab_size: int, seed: int) -> list[Unit]:
    """Four units: partial (10), full (2), shared (1), generated (1)."""
    s, v = seed, vocab_size
    partial = []
    for j, n in enumerate(scale.prefix_donor_lengths):
        donor = RequestSpec(f"d{j:02d}", prompt_ids(s, f"prefix.partial.d{j:02d}", n, v), _params(scale, s, j))
        reuser = RequestSpec(f"r{j:02d}", extend_ids(donor.prompt, s, f"prefix.partial.r{j:02d}",
                                                     scale.prefix_suffix_length, v), _params(scale, s, j + 1))
        partial.append((donor, reuser))
    full = []
    for j, n in enumerate(scale.prefix_full_hit_lengths):
        donor = RequestSpec(f"d{j}", prompt_ids(s, f"prefix.full.d{j}", n, v), _params(scale, s, 20 + j))
        full.append((donor, RequestSpec(f"r{j}", donor.prompt, donor.params)))
    shared_prefix = prompt_ids(s, "prefix.shared.prefix", scale.prefix_shared_length, v)
    shared = [(RequestSpec("d0", extend_ids(shared_prefix, s, "prefix.shared.a", scale.prefix_suffix_length, v),
                           _params(scale, s, 30)),
               RequestSpec("r0", extend_ids(shared_prefix, s, "prefix.shared.b", scale.prefix_suffix_length, v),
                           _params(scale, s, 31)))]
    donor = RequestSpec("d0", prompt_ids(s, "prefix.generated.d0", scale.prefix_generated_prompt_length, v),
                        _params(scale, s, 40, scale.prefix_generated_tokens))
    generated = Unit("prefix.generated", "prefix",
                     (ComparisonSpec("prefix.generated.r0", "r0", "cold:r0",
                                     witnesses=(f"cache_hit:{len(donor.prompt) // scale.page_size * scale.page_size}",)),),
                     plan=None, cost=4 * (len(donor.prompt) + scale.prefix_generated_tokens),
                     requests={"d0": donor})
    return [_pairs_unit("prefix.partial", partial, arrival=None), _pairs_unit("prefix.full", full, arrival=None),
            _pairs_unit("prefix.shared", shared, arrival=2), generated]


def _run_generated(unit: Unit, ctx: SuiteContext) -> list:
    (spec,) = unit.comparisons
    donor = unit.requests["d0"]
    suffix_len = ctx.scale.prefix_suffix_length
    handle = ctx.open_engine()
    try:
        donor_run = handle.run([donor]).requests["d0"]
        prompt = extend_ids(donor.prompt + donor_run.trace.tokens, ctx.seed, "prefix.generated.r0", suffix_len,
                            ctx.vocab_size)
        reuser = RequestSpec("r0", prompt, _params(ctx.scale, ctx.seed, 41))
        reuser_run = handle.run([reuser]).requests["r0"]
    finally:
        handle.close()
    try:
        reference = ctx.references.get(ReferenceJob(reuser))
    except ReferenceError as exc:
        return [unavailable(spec, "r0", str(exc))]
    return [judge(spec, reuser, reuser_run, reference)]


def run(unit: Unit, ctx: SuiteContext) -> UnitOutcome:
    """Run donors, then reusers, in one engine lifetime; judge each reuser against its cold reference."""
    start = time.perf_counter()
    if unit.unit_id == "prefix.generated":
        outcomes = _run_generated(unit, ctx)
    else:
        donors, arrival = unit.plan
        reusers = [label for label in unit.requests if label not in donors]
        handle = ctx.open_engine()
        try:
            if arrival is None:
                runs = dict(handle.run([unit.requests[d] for d in donors]).requests)
                runs.update(handle.run([unit.requests[r] for r in reusers]).requests)
            else:
                runs = dict(handle.run([unit.requests[label] for label in (*donors, *reusers)],
                                       arrival_steps={r: arrival for r in reusers}).requests)
        finally:
            handle.close()
        outcomes = judge_unit(unit, ctx, runs)
    ctx.note(f"{unit.unit_id}: done")
    return UnitOutcome(unit, outcomes, seconds=time.perf_counter() - start,
                       engine_configs={"candidate": dict(ctx.engine_config()), "reference": dict(ctx.engine_config())})
