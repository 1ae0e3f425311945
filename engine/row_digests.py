"""Trace entries whose logit-row digest is computed by worker threads while the device computes.

A step's sampled rows are hashed (sha256 over 4 bytes per vocabulary entry) off the step loop:
the digest is a pure function of the row's bytes, so when it is computed changes nothing. The
engine queues a step's rows in a :class:`DigestQueue` and starts them once the next step's
kernels are launched: the workers then hash while the host waits for the device, instead of
competing for the interpreter lock with the host's own work of planning and staging a step
(measured on an H200 host: that contention cost a batch-4 decode step about 0.3 ms). A
:class:`PendingEntry` becomes the :class:`~engine.trace.TraceEntry` it stands for when the
request's output is built, which starts anything still queued and waits for its digests;
:class:`PendingTraces` turns entries whose digest is done into trace entries step by step, while
the device computes, so that output has only its last few left (about 2 µs an entry: resolving
all of them at the end made the last step of four 128-token requests about 1 ms longer).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch

from engine.sampling_params import SamplerState
from engine.trace import TraceEntry, row_digest

__all__ = ["PendingEntry", "DigestQueue", "PendingTraces", "resolve_entries"]

# sha256 of a 128K-vocabulary row is ~0.3 ms of one core: a batch of 16 at 1 ms per step needs
# several cores. Leave two for the step loop and the rest of the process.
_MAX_WORKERS = 8
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _workers() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, max(1, (os.cpu_count() or 1) - 2)),
                                       thread_name_prefix="bitcase-row-digest")
        return _pool


def _digest_into(row: torch.Tensor, future: Future) -> None:
    try:
        future.set_result(row_digest(row))
    except BaseException as exc:  # the reader of the future raises it
        future.set_exception(exc)


class DigestQueue:
    """Rows whose digests are wanted, held until :meth:`start` hands them to the worker threads.

    A future returned by :meth:`add` finishes only after a later :meth:`start`; whoever waits
    on one must have called :meth:`start` since it was added (the engine starts the queue
    after each launch and before it builds outputs).
    """

    def __init__(self) -> None:
        self._queued: list[tuple[torch.Tensor, Future]] = []

    def add(self, row: torch.Tensor) -> Future:
        """Queue ``row`` ([V] float32, CPU; must not change until its digest is done); its future digest."""
        future: Future = Future()
        self._queued.append((row, future))
        return future

    def start(self) -> None:
        """Hand every queued row to the worker threads (one job per row: rows hash in parallel)."""
        queued, self._queued = self._queued, []
        pool = _workers() if queued else None
        for row, future in queued:
            pool.submit(_digest_into, row, future)  # type: ignore[union-attr]

    def __len__(self) -> int:
        return len(self._queued)


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """A produced position whose logit-row digest may still be computing."""

    position: int
    token: int
    sampler_state: SamplerState
    digest: Future  # of the sha256 digest string
    logits: torch.Tensor | None  # [V] float32 kept row, when rows are kept

    def resolve(self) -> TraceEntry:
        """The finished trace entry (waits for the digest; a failed digest raises here)."""
        return TraceEntry(self.position, self.token, self.sampler_state, self.digest.result(), self.logits)


class PendingTraces:
    """Trace slots holding a :class:`PendingEntry`, replaced in place once their digest is done."""

    def __init__(self) -> None:
        self._slots: list[tuple[list, int]] = []  # (a request's trace, index of a pending entry in it)

    def add(self, trace: list, index: int) -> None:
        """Watch ``trace[index]``, a :class:`PendingEntry`."""
        self._slots.append((trace, index))

    def resolve_done(self) -> None:
        """Resolve every watched entry whose digest is done; keep watching the others.

        A failed digest is left pending and no longer watched: the request's output raises it,
        as it would have without this.
        """
        waiting = []
        for trace, index in self._slots:
            entry = trace[index]
            if not isinstance(entry, PendingEntry):  # resolved by the request's output already
                continue
            if not entry.digest.done():
                waiting.append((trace, index))
            elif entry.digest.exception() is None:
                trace[index] = entry.resolve()
        self._slots = waiting

    def __len__(self) -> int:
        return len(self._slots)


def resolve_entries(entries: list) -> list[TraceEntry]:
    """Replace pending entries of a request's trace, in place, by finished ones; returns the list."""
    for i, entry in enumerate(entries):
        if isinstance(entry, PendingEntry):
            entries[i] = entry.resolve()
    return entries
