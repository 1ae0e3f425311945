"""Scenarios of one request at a time: repeat alone, prefix reuse, prefill against decode."""

from __future__ import annotations

from probing.client import Call
from probing.diff import Difference, compare_positions
from probing.scenario_base import Context, Scenario, UnitResult, judge, not_exercised
from probing.wire import Position

__all__ = ["REPEAT", "PREFIX", "PREFILL_DECODE"]

PREFIX_TOKENS = 64  # a shared prefix of several cache blocks on every server we know (vLLM: 16 a block)


def _units(ctx: Context) -> list[str]:
    return [f"p{i}" for i in range(ctx.settings.requests)]


async def _repeat(ctx: Context) -> list[UnitResult]:
    results = []
    for unit in _units(ctx):
        prompt = ctx.prompts.make(ctx.settings.prompt_len)
        calls = [await ctx.alone(ctx.body(prompt), f"repeat.{unit}.{r}") for r in range(ctx.settings.repeats)]
        isolated = ctx.backend.isolation is not None
        witness = {"runs": len(calls), "serial": True,
                   "prefix_cache": f"bypassed by {ctx.backend.isolation}" if isolated
                   else "not bypassed: later runs may reuse the server's prefix cache"}
        result = judge("repeat", unit, calls[0], calls[1:], witness=witness, exercised=True,
                       what=f"the same request alone, {len(calls)} times one after another,")
        if result.status == "fail":
            result = UnitResult(result.scenario, result.unit, "fail",
                                "not deterministic even serially: " + result.summary, result.witness,
                                result.num_comparisons, result.num_failed, result.difference, result.errors)
        results.append(result)
    return results


async def _prefix(ctx: Context) -> list[UnitResult]:
    results = []
    for unit in _units(ctx):
        shared = ctx.prompts.make(PREFIX_TOKENS)
        target, donor = ctx.prompts.extend(shared, 8), ctx.prompts.extend(shared, 8)
        cold = await ctx.alone(ctx.body(target), f"prefix.{unit}.cold")  # the prefix's first use ever
        await ctx.alone(ctx.body(donor, isolate=False), f"prefix.{unit}.donor")
        warm = await ctx.alone(ctx.body(target, isolate=False), f"prefix.{unit}.warm")
        cached = warm.completion.cached_tokens if warm.completion else None
        witness = {"shared_prefix_tokens": PREFIX_TOKENS, "cached_tokens": cached,
                   "cold_run": "first use of a fresh prefix" + (f", {ctx.backend.isolation}" if ctx.backend.isolation
                                                                 else "")}
        why = "the server reports no cached-token count" if cached is None else "the server reports 0 cached tokens"
        results.append(judge("prefix", unit, cold, [warm], witness=witness, exercised=bool(cached), why_not=why,
                             what="the request with its prefix cached against its cold run"))
    return results


def _by_value(top: tuple[tuple[str, float], ...], k: int) -> tuple[tuple[str, float], ...]:
    """The top-k by logprob: servers may list the chosen token beside its top-k, in either order."""
    return tuple(sorted(top, key=lambda e: (-e[1], e[0]))[:k])


async def _prefill_decode(ctx: Context) -> list[UnitResult]:
    f = ctx.features
    units = _units(ctx)
    if not f.top_logprobs:
        return not_exercised("prefill-decode", units, "the server returns no logprobs")
    if not f.echo:
        return not_exercised("prefill-decode", units, "the server cannot score a prompt (no echo with logprobs)")
    results = []
    for unit in units:
        prompt = ctx.prompts.make(ctx.settings.prompt_len)
        decoded = await ctx.alone(ctx.body(prompt), f"prefill-decode.{unit}.decode")
        if not decoded.is_usable or not decoded.completion.generated:
            results.append(judge("prefill-decode", unit, decoded, [], witness={}, exercised=False,
                                 why_not="the decode request returned no tokens"))
            continue
        gen = decoded.completion.generated
        if isinstance(prompt, list):
            ids = [int(p.token[3:]) for p in gen if p.token.startswith("id:")]
            scored_prompt = prompt + ids if len(ids) == len(gen) else None
        else:
            scored_prompt = prompt + decoded.completion.text
        if scored_prompt is None:
            results.append(judge("prefill-decode", unit, decoded, [], witness={}, exercised=False,
                                 why_not="the server names generated tokens by text: they cannot be sent back as ids"))
            continue
        scored = await ctx.alone(ctx.body(scored_prompt, max_tokens=1, echo=True), f"prefill-decode.{unit}.prefill",
                                 echo=True)
        k, n = f.top_logprobs, len(gen)
        tail = scored.completion.prompt[-n:] if scored.completion and len(scored.completion.prompt) >= n else ()
        matches = [p.token for p in tail] == [p.token for p in gen]
        witness = {"decoded_positions": n, "scored_prompt_positions": len(scored.completion.prompt)
                   if scored.completion else None, "echoed_tokens_match_generated": matches}

        def compare(a: Call, b: Call) -> Difference | None:
            norm = lambda ps: tuple(Position(p.token, p.logprob, _by_value(p.top, k)) for p in ps)  # noqa: E731
            return compare_positions(norm(gen), norm(tail))

        # without the same tokens at the scored positions there is nothing to compare
        results.append(judge("prefill-decode", unit, decoded, [scored] if matches else [], witness=witness,
                             exercised=matches,
                             why_not="the scored prompt did not come back as the generated tokens", compare=compare,
                             what="decode-time logprobs against the same tokens scored as a prompt"))
    return results


REPEAT = Scenario("repeat", "probe.repeat", "repeat alone", _units, _repeat)
PREFIX = Scenario("prefix", "probe.prefix", "prefix reuse against a cold run", _units, _prefix)
PREFILL_DECODE = Scenario("prefill-decode", "probe.prefill_decode", "prefill against decode", _units, _prefill_decode)
