"""Trace entries whose logit-row digest is computed by worker threads while the engine steps.

A step's sampled rows are hashed (sha256 over 4 bytes per vocabulary entry) off the step loop:
the digest is a pure function of the row's bytes, so when it is computed changes nothing. A
:class:`PendingEntry` becomes the :class:`~engine.trace.TraceEntry` it stands for when the
request's output is built, which waits for its digests.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch

from engine.sampling_params import SamplerState
from engine.trace import TraceEntry, row_digest

__all__ = ["PendingEntry", "digest_later", "resolve_entries"]

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


def digest_later(row: torch.Tensor) -> Future:
    """``row_digest(row)`` on a worker thread; ``row`` ([V] float32, CPU) must not change until it is done."""
    return _workers().submit(row_digest, row)


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


def resolve_entries(entries: list) -> list[TraceEntry]:
    """Replace pending entries of a request's trace, in place, by finished ones; returns the list."""
    for i, entry in enumerate(entries):
        if isinstance(entry, PendingEntry):
            entries[i] = entry.resolve()
    return entries
