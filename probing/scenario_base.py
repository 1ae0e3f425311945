"""What every scenario shares: the run's settings, request helpers, and the verdict of one unit.

A unit compares one request against its reference under one change. Its verdict is ``fail``
when any usable comparison differs (a counterexample, whether or not the change was witnessed),
``inconclusive`` when the change was not witnessed or nothing usable came back ("not
exercised"), and ``pass`` only with the witness and at least one equal comparison.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

from probing.backend import Backend, isolation_extra
from probing.client import Call, ProbeClient
from probing.diff import Difference, compare_completions
from probing.prompts import PromptMaker
from probing.server_watch import no_watch_witness
from probing.wire import completion_body

__all__ = ["Settings", "Context", "UnitResult", "Scenario", "judge", "not_exercised", "ORDERS"]

ORDERS = {1: ("first", "last"), 3: ("first", "middle", "last"), 7: ("first", "middle", "last")}


@dataclass(frozen=True, slots=True)
class Settings:
    """The protocol's knobs, as the command line set them."""

    model: str
    max_tokens: int = 16
    requests: int = 2  # target prompts per scenario
    prompt_len: int = 24
    concurrency: int = 8
    companions: tuple[int, ...] = (1, 3, 7)
    repeats: int = 3
    seed: int = 0


@dataclass(frozen=True, slots=True)
class UnitResult:
    """The verdict of one unit of a scenario."""

    scenario: str
    unit: str
    status: str  # pass | fail | inconclusive
    summary: str
    witness: dict[str, Any] = field(default_factory=dict)
    num_comparisons: int = 0
    num_failed: int = 0
    difference: Difference | None = None
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Scenario:
    """A scenario of the protocol: its obligation, the units it owes, and how to run them."""

    name: str
    obligation: str
    title: str
    units: Callable[["Context"], list[str]]
    run: Callable[["Context"], Awaitable[list[UnitResult]]]


class Context:
    """The client, the server as found, the settings and the run's prompts, for the scenarios."""

    def __init__(self, client: ProbeClient, backend: Backend, settings: Settings, prompts: PromptMaker) -> None:
        self.client, self.backend, self.settings, self.prompts = client, backend, settings, prompts
        self.features = backend.features
        self._salt = itertools.count()

    def body(self, prompt: list[int] | str, *, max_tokens: int | None = None, echo: bool = False,
             seed: int | None = None, temperature: float = 0.0, isolate: bool = True) -> dict[str, Any]:
        """A completion body; ``isolate`` keeps it out of the prefix cache where the server allows."""
        extra = isolation_extra(self.backend.isolation, f"bitcase-probe-{self.settings.seed}-{next(self._salt)}") \
            if isolate else {}
        return completion_body(model=self.settings.model, prompt=prompt, features=self.features, echo=echo, seed=seed,
                               temperature=temperature, max_tokens=max_tokens or self.settings.max_tokens, extra=extra)

    async def alone(self, body: dict[str, Any], label: str, *, echo: bool = False) -> Call:
        """Send one request with nothing else of the probe's in flight."""
        prompt = body["prompt"]
        return await self.client.complete(body, label=label, echo=echo,
                                          num_prompt=len(prompt) if isinstance(prompt, list) else None)

    async def group(self, target: dict[str, Any], companions: Sequence[dict[str, Any]], order: str,
                    label: str) -> tuple[Call, list[Call], dict[str, Any]]:
        """Send the target with its companions at once, the target first, in the middle or last.

        Returns the target's call, the companions' calls, and the server-side witness: the largest
        running-request count the server reported while they were in flight (:mod:`probing.server_watch`).
        """
        at = {"first": 0, "middle": len(companions) // 2, "last": len(companions)}[order]
        bodies = list(companions[:at]) + [target] + list(companions[at:])
        tasks = [asyncio.ensure_future(self.alone(b, f"{label}.{'target' if i == at else f'c{i}'}"))
                 for i, b in enumerate(bodies)]
        work = asyncio.gather(*tasks)
        watch = self.backend.watch
        server = await watch.sample_during(self.client, work) if watch is not None else no_watch_witness()
        calls = await work
        return calls[at], calls[:at] + calls[at + 1:], server


def not_exercised(scenario: str, units: Sequence[str], why: str) -> list[UnitResult]:
    """Every unit of a scenario the server or the settings do not allow, with the reason."""
    return [UnitResult(scenario, u, "inconclusive", f"not exercised: {why}", {"exercised": False, "reason": why})
            for u in units]


def judge(scenario: str, unit: str, reference: Call, observed: Sequence[Call], *, witness: dict[str, Any],
          exercised: bool, why_not: str = "", compare: Callable[[Call, Call], Difference | None] | None = None,
          what: str = "") -> UnitResult:
    """The unit's verdict from its reference and observed calls (see the module docstring)."""
    errors = tuple(f"{c.label}: {c.error or 'retried, not compared'}" for c in (reference, *observed)
                   if not c.is_usable)
    if not reference.is_usable:
        return UnitResult(scenario, unit, "inconclusive", f"not exercised: the reference request {errors[0]}",
                          {**witness, "exercised": False}, errors=errors)
    usable = [c for c in observed if c.is_usable]
    diffs = [(compare or _generated)(reference, c) for c in usable]
    failed = [d for d in diffs if d is not None]
    if failed:
        first = failed[0]
        return UnitResult(scenario, unit, "fail", f"counterexample: {what or unit} {first.describe()}",
                          {**witness, "exercised": exercised}, len(usable), len(failed), first, errors)
    if not exercised or not usable:
        why = why_not if not exercised else f"no usable comparison ({'; '.join(errors) or 'none sent'})"
        return UnitResult(scenario, unit, "inconclusive", f"not exercised: {why}",
                          {**witness, "exercised": False, "reason": why}, len(usable), 0, None, errors)
    return UnitResult(scenario, unit, "pass", f"equal: {what or unit} ({len(usable)} comparison(s))",
                      {**witness, "exercised": True}, len(usable), 0, None, errors)


def _generated(reference: Call, observed: Call) -> Difference | None:
    assert reference.completion is not None and observed.completion is not None
    return compare_completions(reference.completion, observed.completion)
