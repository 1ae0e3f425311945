"""Witnesses: what must be observed for a comparison to count.

A comparison whose witness is missing (no cache hit in the prefix suite, no chunking in the chunk
suite, no eviction in the eviction scenario...) did not exercise what it claims to, so it is an
*error*, never a pass. Every reference must also be cold (no cached tokens): a reference that reused
cached KV is not a cold computation.
"""

from __future__ import annotations

from typing import Callable, Sequence

from engine.compare.runs import RequestRun, RunResult
from engine.compare.units import RequestSpec

__all__ = ["REQUEST_WITNESSES", "RUN_WITNESSES", "missing_request_witnesses", "missing_run_witnesses"]

_Check = Callable[[RequestRun, RequestRun, RequestSpec, int], str | None]


def _require(ok: bool, message: str) -> str | None:
    return None if ok else message


REQUEST_WITNESSES: dict[str, _Check] = {
    "co_scheduled": lambda c, r, q, n: _require(
        c.num_shared_steps >= 1, "the request never shared a step with another request"),
    "chunked": lambda c, r, q, n: _require(
        c.num_prefill_chunks >= 2, f"prefill was not chunked (boundaries {list(c.chunk_boundaries)})"),
    "reference_unchunked": lambda c, r, q, n: _require(
        r.num_prefill_chunks == 1, f"the reference prefill was chunked (boundaries {list(r.chunk_boundaries)})"),
    "cold_candidate": lambda c, r, q, n: _require(
        c.cached_tokens == 0, f"the candidate reused {c.cached_tokens} cached tokens"),
    "cache_hit": lambda c, r, q, n: _require(
        c.cached_tokens > n, f"cached-token count {c.cached_tokens} is not above {n}"),
    "cancelled_midway": lambda c, r, q, n: _require(
        c.cancelled_at_step is not None and 1 <= len(c.trace) < q.params.max_tokens,
        f"the cancellation did not cut the request mid-flight ({len(c.trace)} of {q.params.max_tokens} "
        f"positions, cancelled at step {c.cancelled_at_step})"),
    "joined_running": lambda c, r, q, n: _require(
        c.num_unfinished_at_arrival >= 1, "the request arrived when nothing else was in flight"),
}

RUN_WITNESSES: dict[str, Callable[[RunResult], str | None]] = {
    "evicted": lambda run: _require(run.num_evictions > 0, "no registered page was evicted"),
    "queued": lambda run: _require(run.max_num_waiting_at_capacity > 0,
                                   "no request waited while the running set was full"),
    "preempted": lambda run: _require(sum(r.num_preemptions for r in run.requests.values()) > 0,
                                      "no request was preempted"),
    "padded": lambda run: _require(run.num_padded_steps > 0, "no decode step ran with padding rows"),
    "padded_mixed": lambda run: _require(run.num_padded_mixed_steps > 0,
                                         "no step with prefill rows ran padded to a graph shape"),
}


def _parse(name: str) -> tuple[str, int]:
    # "cache_hit:16" -> ("cache_hit", 16); a bare name has threshold 0
    base, _, arg = name.partition(":")
    return base, int(arg) if arg else 0


def missing_request_witnesses(names: Sequence[str], candidate: RequestRun, reference: RequestRun,
                              request: RequestSpec) -> list[str]:
    """Messages for each named witness that was not observed, plus a warm reference."""
    problems = []
    if reference.cached_tokens:
        problems.append(f"cold_reference: the reference reused {reference.cached_tokens} cached tokens")
    for name in names:
        base, arg = _parse(name)
        if base not in REQUEST_WITNESSES:
            raise ValueError(f"unknown witness {name!r}; known: {', '.join(sorted(REQUEST_WITNESSES))}")
        message = REQUEST_WITNESSES[base](candidate, reference, request, arg)
        if message:
            problems.append(f"{name}: {message}")
    return problems


def missing_run_witnesses(names: Sequence[str], run: RunResult) -> list[str]:
    """Messages for each named engine-wide witness not observed in ``run``."""
    problems = []
    for name in names:
        if name not in RUN_WITNESSES:
            raise ValueError(f"unknown run witness {name!r}; known: {', '.join(sorted(RUN_WITNESSES))}")
        message = RUN_WITNESSES[name](run)
        if message:
            problems.append(f"{name}: {message}")
    return problems
