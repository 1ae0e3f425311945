"""A fake engine for protocol tests: deterministic logits from the token history, analytic witnesses.

It honours the :class:`engine.compare.runs.EngineHandle` contract closely enough for the protocol
layer (grouping, sharding, witnesses, mismatch records, evidence) to be tested in seconds. Logit
rows are a pure function of the history, so it is deterministic unless a fault is injected:

* ``BITCASE_FAKE_FAULT="batch:<size>:<position>:<element>"`` adds 1e-3 to one element of one row
  of every request that ran in a batch of at least ``size`` requests;
* ``BITCASE_FAKE_WITNESS_OFF=<name>`` suppresses a witness (``chunking``, ``cache``, ``eviction``);
* ``BITCASE_FAKE_PERTURBATION_OFF=1`` makes it ignore the perturbation;
* perturbation ``"batch-keyed-linear"`` perturbs every row by an amount keyed on the batch size,
  the number of prefill chunks and whether the row came from a decode step;
* ``BITCASE_FAKE_PROCESS_FAULT="<refuse|die|hang|slow>:<module>"`` makes opening an engine fail
  (raise), end the process (exit code 7), block forever or take half a second, only in a process
  started as ``python -m ...<module>`` (``reference_worker`` or ``shard_process``).

Like the real engine it needs the checkpoint's ``config.json``, so a model path that does not
reach a process is seen there.

The variables are read when a handle opens, so a reference worker process sees the same setting.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from engine.compare.bitwise import ObservedTrace
from engine.compare.runs import RequestRun, RunResult
from engine.compare.units import RequestSpec
from engine.sampling_params import SamplerState, uniform

VOCAB_SIZE = 64


def _row(history: Sequence[int]) -> torch.Tensor:
    seed = int.from_bytes(hashlib.sha256(repr(tuple(history)).encode()).digest()[:8], "little")
    g = torch.Generator().manual_seed(seed)
    return torch.randn(VOCAB_SIZE, generator=g, dtype=torch.float32)  # row: [vocab_size]


def _sample(row: torch.Tensor, request: RequestSpec, state: SamplerState) -> int:
    if request.params.is_greedy:
        return int(row.argmax())
    probs = torch.softmax(row.double() / request.params.temperature, dim=0)
    return int(min(torch.searchsorted(probs.cumsum(0), torch.tensor(uniform(state), dtype=torch.float64)),
                   VOCAB_SIZE - 1))


class FakeHandle:
    """One fake engine lifetime: remembers published prompt pages for cache hits."""

    def __init__(self, model_dir: Path, overrides: Mapping[str, Any], *, perturbation: str | None = None) -> None:
        self.config = {**overrides, "serving_dtype": "float32"}
        self.page_size = int(self.config.get("page_size", 16))
        self.budget = int(self.config.get("max_num_batched_tokens", 128))
        self.caching = bool(self.config.get("enable_prefix_caching", True))
        self.num_pages = int(self.config.get("num_pages", 256))
        self.max_num_seqs = int(self.config.get("max_num_seqs", 8))
        # BITCASE_FAKE_PERTURBATION_OFF=1: the engine ignores the perturbation (a control without power)
        self.perturbation = None if os.environ.get("BITCASE_FAKE_PERTURBATION_OFF") else perturbation
        self.published: list[tuple[int, ...]] = []
        fault = os.environ.get("BITCASE_FAKE_FAULT", "")
        self.fault = tuple(int(x) for x in fault.split(":")[1:]) if fault.startswith("batch:") else None
        self.witness_off = os.environ.get("BITCASE_FAKE_WITNESS_OFF", "")

    def _cached(self, prompt: tuple[int, ...]) -> int:
        if not self.caching or self.witness_off == "cache":
            return 0
        best = 0
        for old in self.published:
            common = next((i for i, (a, b) in enumerate(zip(old, prompt)) if a != b), min(len(old), len(prompt)))
            best = max(best, common)
        return min(best, len(prompt) - 1) // self.page_size * self.page_size

    def _boundaries(self, length: int, cached: int) -> tuple[int, ...]:
        if self.witness_off == "chunking":
            return (length,)
        out, pos = [], cached
        while length - pos > self.budget:
            pos = (pos + self.budget) // self.page_size * self.page_size
            out.append(pos)
        return tuple(out) + (length,)

    def run(self, requests: Sequence[RequestSpec], *, arrival_steps: Mapping[str, int] | None = None,
            cancel_steps: Mapping[str, int] | None = None) -> RunResult:
        arrivals, cancels = dict(arrival_steps or {}), dict(cancel_steps or {})
        batch = len(requests)
        runs = {}
        for request in requests:
            cached = self._cached(request.prompt)
            history = list(request.prompt)
            state = request.params.initial_state()
            rows, tokens, states = [], [], []
            n = request.params.max_tokens
            if request.label in cancels:
                n = max(1, min(n - 1, cancels[request.label] - arrivals.get(request.label, 0) - 1))
            for position in range(n):
                row = _row(history).clone()
                if self.fault and batch >= self.fault[0] and position == self.fault[1]:
                    row[self.fault[2]] += 1e-3
                if self.perturbation == "batch-keyed-linear":
                    # keyed on the rows a launch would hold: batch size, chunking, decode vs prefill
                    rows_in_launch = batch + len(self._boundaries(len(request.prompt), cached)) + min(position, 1)
                    row = row + (rows_in_launch - 2) * 1e-6
                token = _sample(row, request, state)
                state = state.advanced()
                rows.append(row)
                tokens.append(token)
                states.append((state.seed, state.counter))
                history.append(token)
            trace = ObservedTrace(tuple(tokens), tuple(states), torch.stack(rows))
            runs[request.label] = RequestRun(
                trace=trace, cached_tokens=cached, chunk_boundaries=self._boundaries(len(request.prompt), cached),
                num_shared_steps=1 if batch > 1 else 0, arrival_step=arrivals.get(request.label, 0),
                num_unfinished_at_arrival=1 if arrivals.get(request.label, 0) else 0,
                cancelled_at_step=cancels.get(request.label), finish_reason="length")
            self.published.append(tuple(history))
        total_pages = sum(math.ceil((len(r.prompt) + r.params.max_tokens) / self.page_size) for r in requests)
        evictions = int(total_pages > self.num_pages and self.witness_off != "eviction")
        if total_pages > self.num_pages and self.max_num_seqs >= len(requests):
            last = requests[-1].label
            runs[last] = RequestRun(**{**{f: getattr(runs[last], f) for f in RequestRun.__slots__},
                                       "num_preemptions": 1})
        queued = int(len(requests) > self.max_num_seqs)
        padded = int(bool(self.config.get("cuda_graphs")))
        return RunResult(runs, num_steps=len(requests), num_evictions=evictions, max_num_waiting_at_capacity=queued,
                         num_padded_steps=padded, num_padded_mixed_steps=padded)

    def close(self) -> None:
        self.published.clear()


def open_fake(model_dir: Path, overrides: Mapping[str, Any], *, perturbation: str | None = None,
              expected_core: str | None = None) -> FakeHandle:
    """Engine factory for tests (``tests.compare.fake_engine:open_fake``); it has no D to check."""
    _process_fault()
    if not (Path(model_dir) / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir}: no config.json here (working directory {os.getcwd()})")
    return FakeHandle(model_dir, overrides, perturbation=perturbation)


def _process_fault() -> None:
    kind, _, module = os.environ.get("BITCASE_FAKE_PROCESS_FAULT", "").partition(":")
    if not kind or Path(sys.argv[0]).stem != module:
        return
    if kind != "slow":
        print(f"fake engine: {kind} in {module}", file=sys.stderr, flush=True)
    if kind == "refuse":
        raise RuntimeError(f"the fake engine refuses to open in {module}")
    if kind == "die":
        os._exit(7)
    if kind == "hang":
        while True:
            time.sleep(60)
    if kind == "slow":
        time.sleep(0.5)
        return
    raise ValueError(f"BITCASE_FAKE_PROCESS_FAULT kind {kind!r} is not refuse, die, hang or slow")
