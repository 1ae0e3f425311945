"""Scenarios under load: concurrent companions, prompts longer than the chunk, seeded sampling."""

from __future__ import annotations

from typing import Any

from probing.client import Call
from probing.scenario_base import ORDERS, Context, Scenario, UnitResult, judge, not_exercised

__all__ = ["CONCURRENT", "LONG", "SEEDED"]

_LONG_ORDERS = ("first", "last")
_SEEDED_ORDERS = ("first", "last")


def _overlap(target: Call, companions: list[Call], server: dict[str, Any]) -> dict[str, Any]:
    """Client-side overlap (which gates the unit) and the server's own running count (recorded beside it)."""
    return {"companions": len(companions), "overlapping": sum(target.overlaps(c) for c in companions),
            "seen_from": "the client (request send and answer times)", "server": server}


def _as_server_saw(server: dict[str, Any]) -> str:
    """What the server's running count adds to a unit's summary ("" when it reports none)."""
    most = server.get("max_running")
    if most is None:
        return ""
    if server["batched"]:
        return f" (the server reported up to {most} running at once)"
    # a group shorter than the sampling interval may be sampled only before the server took it up
    if most == 0:
        return f" (the server's {server['samples']} sample(s) saw no request running)"
    return f" (the server's {server['samples']} sample(s) never saw more than 1 running)"


def _companions(ctx: Context, k: int, length: int, **body: Any) -> list[dict[str, Any]]:
    # longer than the target, so they are still decoding while it runs
    return [ctx.body(ctx.prompts.make(length + 3 * j), max_tokens=ctx.settings.max_tokens + 8, **body)
            for j in range(k)]


def _concurrent_units(ctx: Context) -> list[str]:
    return [f"c{k}.{order}.p{i}" for i in range(ctx.settings.requests) for k in ctx.settings.companions
            for order in ORDERS.get(k, ("first", "last"))]


async def _concurrent(ctx: Context) -> list[UnitResult]:
    results = []
    for i in range(ctx.settings.requests):
        prompt = ctx.prompts.make(ctx.settings.prompt_len)
        reference = await ctx.alone(ctx.body(prompt), f"concurrent.p{i}.alone")
        for k in ctx.settings.companions:
            units = [f"c{k}.{order}.p{i}" for order in ORDERS.get(k, ("first", "last"))]
            if k + 1 > ctx.settings.concurrency:
                results += not_exercised("concurrent", units, f"--concurrency {ctx.settings.concurrency} allows at "
                                                              f"most {ctx.settings.concurrency - 1} companions")
                continue
            for order, unit in zip(ORDERS.get(k, ("first", "last")), units):
                target, others, server = await ctx.group(ctx.body(prompt), _companions(ctx, k, ctx.settings.prompt_len),
                                                 order, f"concurrent.{unit}")
                witness = {**_overlap(target, others, server), "order": order}
                results.append(judge("concurrent", unit, reference, [target], witness=witness,
                                     exercised=witness["overlapping"] > 0,
                                     why_not="no companion was in flight with the request",
                                     what=f"the request with {k} concurrent companion(s), submitted {order}"
                                          f"{_as_server_saw(server)},"))
    return results


def _long_length(ctx: Context) -> tuple[int | None, str]:
    chunk, limit = ctx.features.chunk_size, ctx.features.max_model_len
    if chunk is None:
        return None, "the server's prefill chunk size is unknown (pass --chunk-size or declare chunk_size)"
    length = chunk + chunk // 2 + 1
    if limit is not None:
        length = min(length, limit - ctx.settings.max_tokens - 9)
    if length <= chunk:
        return None, f"a prompt longer than the chunk ({chunk}) does not fit the context ({limit})"
    return length, ""


def _long_units(ctx: Context) -> list[str]:
    return [f"{u}.p{i}" for i in range(ctx.settings.requests) for u in ("alone", *(f"c3.{o}" for o in _LONG_ORDERS))]


async def _long(ctx: Context) -> list[UnitResult]:
    length, why = _long_length(ctx)
    if length is None:
        return not_exercised("long", _long_units(ctx), why)
    why_load = f"--concurrency {ctx.settings.concurrency} allows fewer than 3 companions"
    results = []
    for i in range(ctx.settings.requests):
        prompt = ctx.prompts.make(length)
        reference = await ctx.alone(ctx.body(prompt), f"long.p{i}.alone.0")
        again = await ctx.alone(ctx.body(prompt), f"long.p{i}.alone.1")

        def seen(call: Call) -> int:
            reported = call.completion.prompt_tokens if call.completion else None
            return reported if reported is not None else (len(prompt) if isinstance(prompt, list) else 0)
        witness = {"prompt_tokens": seen(reference), "chunk_size": ctx.features.chunk_size}
        longer = witness["prompt_tokens"] > ctx.features.chunk_size
        why = f"the prompt came to {witness['prompt_tokens']} tokens, not more than the chunk"
        results.append(judge("long", f"alone.p{i}", reference, [again], witness=witness, exercised=longer,
                             why_not=why, what=f"a {witness['prompt_tokens']}-token prompt alone, twice,"))
        for order in _LONG_ORDERS:
            unit = f"c3.{order}.p{i}"
            if ctx.settings.concurrency < 4:
                results += not_exercised("long", [unit], why_load)
                continue
            target, others, server = await ctx.group(ctx.body(prompt), _companions(ctx, 3, length), order,
                                                     f"long.{unit}")
            w = {**witness, **_overlap(target, others, server), "order": order}
            results.append(judge("long", unit, reference, [target], witness=w,
                                 exercised=longer and w["overlapping"] > 0,
                                 why_not=why if not longer else "no companion was in flight with the request",
                                 what=f"a {witness['prompt_tokens']}-token prompt with 3 long companions, "
                                      f"submitted {order}{_as_server_saw(server)},"))
    return results


def _seeded_units(ctx: Context) -> list[str]:
    return [f"{u}.p{i}" for i in range(ctx.settings.requests) for u in ("alone", *(f"c3.{o}" for o in _SEEDED_ORDERS))]


async def _seeded(ctx: Context) -> list[UnitResult]:
    if not ctx.features.seed:
        return not_exercised("seeded", _seeded_units(ctx), "the server refuses per-request seeds")
    results = []
    for i in range(ctx.settings.requests):
        seed = ctx.settings.seed % 2**31 + 1000 + i
        prompt = ctx.prompts.make(ctx.settings.prompt_len)
        body = lambda: ctx.body(prompt, seed=seed, temperature=1.0)  # noqa: E731
        reference = await ctx.alone(body(), f"seeded.p{i}.alone.0")
        again = await ctx.alone(body(), f"seeded.p{i}.alone.1")
        witness = {"seed": seed, "temperature": 1.0, "semantics": "the server's own seed semantics"}
        results.append(judge("seeded", f"alone.p{i}", reference, [again], witness=witness, exercised=True,
                             what="seeded sampling alone, twice,"))
        for order in _SEEDED_ORDERS:
            unit = f"c3.{order}.p{i}"
            if ctx.settings.concurrency < 4:
                results += not_exercised("seeded", [unit], f"--concurrency {ctx.settings.concurrency} allows fewer "
                                                           "than 3 companions")
                continue
            # companions sample too, some unseeded: a server may then ignore the target's seed
            companions = [ctx.body(ctx.prompts.make(ctx.settings.prompt_len + j), temperature=1.0,
                                   max_tokens=ctx.settings.max_tokens + 8, seed=None if j % 2 == 0 else seed + 7 + j)
                          for j in range(3)]
            target, others, server = await ctx.group(body(), companions, order, f"seeded.{unit}")
            w = {**witness, **_overlap(target, others, server), "order": order}
            results.append(judge("seeded", unit, reference, [target], witness=w, exercised=w["overlapping"] > 0,
                                 why_not="no companion was in flight with the request",
                                 what=f"seeded sampling with 3 sampling companions, submitted {order}"
                                      f"{_as_server_saw(server)},"))
    return results


CONCURRENT = Scenario("concurrent", "probe.batch", "concurrent companions", _concurrent_units, _concurrent)
LONG = Scenario("long", "probe.chunk", "prompts longer than the chunk", _long_units, _long)
SEEDED = Scenario("seeded", "probe.seeded", "seeded sampling alone and concurrent", _seeded_units, _seeded)
