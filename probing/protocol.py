"""The probe protocol: detect the server, run each scenario, turn the verdicts into evidence.

:func:`run_probe` is what ``bitcase probe`` calls. It stores nothing: the caller writes the
records it returns (bundle, store, or both), so an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import Any, Callable, Sequence

import httpx

from evidence_db.bundle import Deployment, EvidenceRecord, utc_now

from probing.backend import Backend, detect
from probing.client import Call, Endpoint, ProbeClient, ProbeInputError
from probing.diff import resolution_of
from probing.evidence import external_deployment, producer_for, run_id_of, unit_records
from probing.floats import is_float32
from probing.prompts import PromptMaker
from probing.scenario_base import Context, Scenario, Settings, UnitResult
from probing.scenarios_load import CONCURRENT, LONG, SEEDED
from probing.scenarios_serial import PREFILL_DECODE, PREFIX, REPEAT

__all__ = ["SCENARIOS", "ProbeRun", "Progress", "run_probe", "scenario_names"]

SCENARIOS: tuple[Scenario, ...] = (REPEAT, CONCURRENT, PREFIX, LONG, PREFILL_DECODE, SEEDED)
Progress = Callable[[str, int, int], None]  # (message, units done, units owed)


def scenario_names() -> list[str]:
    """The scenario names ``--scenario`` accepts, in protocol order."""
    return [s.name for s in SCENARIOS]


@dataclass
class ProbeRun:
    """A finished probe: the server as found, each scenario's verdicts, and the evidence records."""

    backend: Backend
    deployment: Deployment
    results: dict[str, list[UnitResult]]
    records: list[EvidenceRecord]
    resolution: str
    seconds: dict[str, float] = field(default_factory=dict)
    num_requests: int = 0
    num_retried: int = 0
    num_logprobs: int = 0
    num_not_float32: int = 0

    @property
    def is_clean(self) -> bool:
        """Every unit of every scenario run passed (nothing failed, nothing left unexercised)."""
        return all(r.status == "pass" for rs in self.results.values() for r in rs)


class _Tally:
    """Counts every answered call and checks each logprob it carried is a float32."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress, self.calls, self.retried, self.numbers, self.not_float32 = progress, 0, 0, 0, 0
        self.fingerprints: list[str] = []
        self.row_digests = False
        self.message, self.done, self.owed = "", 0, 0

    def __call__(self, call: Call) -> None:
        self.calls += 1
        self.retried += call.attempts > 1
        if call.completion is not None:
            self.numbers += len(call.completion.numbers)
            self.not_float32 += sum(not is_float32(v) for v in call.completion.numbers)
            self.row_digests = self.row_digests or bool(call.completion.row_digests)
            if call.completion.fingerprint:
                self.fingerprints.append(call.completion.fingerprint)
        self.tick()

    def tick(self) -> None:
        if self.progress is not None:
            self.progress(f"{self.message} · {self.calls} requests", self.done, self.owed)


async def _probe(endpoint: Endpoint, settings: Settings, *, api: str, top_k: int, vocab: int, chunk_size: int | None,
                 declared: dict[str, Any], scenarios: Sequence[str], timeout_s: float, command: Sequence[str],
                 progress: Progress | None, transport: httpx.AsyncBaseTransport | None) -> ProbeRun:
    tally = _Tally(progress)
    client = ProbeClient(endpoint, timeout_s=timeout_s, concurrency=settings.concurrency, on_answer=tally,
                         transport=transport)
    started_at = utc_now()
    try:
        tally.message = "finding the server's features"
        tally.tick()
        backend = await detect(client, api=api, model=settings.model, top_k=top_k, vocab=vocab, seed=settings.seed,
                               chunk_size=chunk_size if chunk_size is not None else declared.get("chunk_size"))
        ctx = Context(client, backend, settings,
                      PromptMaker(seed=settings.seed, vocab=vocab, token_ids=backend.features.token_id_prompts))
        chosen = [s for s in SCENARIOS if s.name in scenarios]
        owed = {s.name: s.units(ctx) for s in chosen}
        tally.owed = sum(len(u) for u in owed.values())
        results, seconds = {}, {}
        for scenario in chosen:
            tally.message = scenario.title
            begun = time.monotonic()
            results[scenario.name] = await scenario.run(ctx)
            seconds[scenario.name] = round(time.monotonic() - begun, 3)
            tally.done += len(owed[scenario.name])
            tally.tick()
    finally:
        await client.aclose()
    deployment = external_deployment(endpoint=endpoint.display, model=settings.model, backend=backend,
                                     fingerprints=tally.fingerprints, declared=declared)
    run_id = run_id_of(deployment, started_at, settings.seed)
    producer = producer_for(version=_version(), command=command, started_at=started_at, finished_at=utc_now())
    f = backend.features
    resolution = resolution_of(top_k=f.top_logprobs, by_id=f.ids_in_logprobs, row_digests=tally.row_digests)
    run_details = {"probe_run": run_id, "prompt_seed": settings.seed, "server_reported": backend.reported,
                   "server_notes": list(backend.notes), "server_watch": backend.watch.source if backend.watch else None,
                   "logprob_values": tally.numbers,
                   "logprob_values_not_float32": tally.not_float32}
    records = []
    for scenario in chosen:
        details = {**run_details, "scenario_seconds": seconds[scenario.name]}
        records += unit_records(scenario=scenario, results=results[scenario.name], owed=owed[scenario.name],
                                deployment=deployment, producer=producer, run_id=run_id, resolution=resolution,
                                run_details=details)
    return ProbeRun(backend, deployment, results, records, resolution, seconds, tally.calls, tally.retried,
                    tally.numbers, tally.not_float32)


def _version() -> str:
    try:
        return metadata.version("bitcase")
    except metadata.PackageNotFoundError:
        return "unknown"


def run_probe(endpoint: Endpoint, settings: Settings, *, api: str = "auto", top_k: int = 20, vocab: int = 256,
              chunk_size: int | None = None, declared: dict[str, Any] | None = None,
              scenarios: Sequence[str] | None = None, timeout_s: float = 60.0, command: Sequence[str] = (),
              progress: Progress | None = None, transport: httpx.AsyncBaseTransport | None = None) -> ProbeRun:
    """Run the protocol against ``endpoint``; raises :class:`ProbeInputError` for bad input or an unusable server."""
    names = list(scenarios or scenario_names())
    unknown = sorted(set(names) - set(scenario_names()))
    if unknown:
        raise ProbeInputError(f"unknown scenario(s): {', '.join(unknown)}",
                              hint="one of: " + ", ".join(scenario_names()))
    declared_chunk = (declared or {}).get("chunk_size")
    if declared_chunk is not None and (not isinstance(declared_chunk, int) or isinstance(declared_chunk, bool)
                                       or declared_chunk < 1):
        raise ProbeInputError(f"--deployment: chunk_size {declared_chunk!r} is not a positive integer",
                              hint="declare the server's prefill chunk in tokens, e.g. \"chunk_size\": 512")
    if settings.seed == 0:
        settings = replace(settings, seed=int.from_bytes(os.urandom(4), "big") or 1)
    return asyncio.run(_probe(endpoint, settings, api=api, top_k=top_k, vocab=vocab, chunk_size=chunk_size,
                              declared=declared or {}, scenarios=names, timeout_s=timeout_s, command=command,
                              progress=progress, transport=transport))
