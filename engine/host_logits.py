"""Bringing a step's logits (and device-chosen greedy tokens) to the host: the step loop's one wait.

On CUDA the sampled rows are copied into one of a few pinned host slots and the host waits for
that copy only; nothing else in a step synchronises. Trace digests are computed later, by
worker threads, from the slot itself (engine/row_digests.py), so a slot is reused only after
every reader registered on it has finished. On the CPU the logits already are on the host.
"""

from __future__ import annotations

from concurrent.futures import Future, wait
from typing import Iterable

import torch

__all__ = ["HostLogits", "NUM_HOST_SLOTS"]

NUM_HOST_SLOTS = 3  # a slot is rewritten two steps after its digests were started (one after queued)


class HostLogits:
    """Pinned host slots for the sampled rows of CUDA steps."""

    def __init__(self, *, max_num_rows: int, vocab_size: int, num_slots: int = NUM_HOST_SLOTS) -> None:
        self._logits = [torch.empty(max_num_rows, vocab_size, dtype=torch.float32, pin_memory=True)
                        for _ in range(num_slots)]
        self._tokens = [torch.empty(max_num_rows, dtype=torch.int64, pin_memory=True) for _ in range(num_slots)]
        self._readers: list[list[Future]] = [[] for _ in range(num_slots)]
        self._last = 0
        self._done = torch.cuda.Event()

    def fetch(self, logits: torch.Tensor, tokens: torch.Tensor, num_rows: int) -> tuple[torch.Tensor, list[int]]:
        """Copy the first ``num_rows`` rows of ``logits`` [R, V] and ``tokens`` [R], wait, return them.

        The returned ``[num_rows, V]`` host tensor is valid until the slot comes round again,
        after every reader added with :meth:`add_readers` has finished.
        """
        slot = (self._last + 1) % len(self._logits)
        # Started after an earlier launch (the engine starts queued digests before every fetch);
        # usually long finished. Errors surface where the digests are read.
        wait(self._readers[slot])
        self._readers[slot] = []
        self._last = slot
        host_logits, host_tokens = self._logits[slot][:num_rows], self._tokens[slot][:num_rows]
        host_tokens.copy_(tokens[:num_rows], non_blocking=True)
        host_logits.copy_(logits[:num_rows], non_blocking=True)
        self._done.record()
        self._done.synchronize()
        return host_logits, host_tokens.tolist()

    def add_readers(self, readers: Iterable[Future]) -> None:
        """Keep the last fetched slot until ``readers`` have finished."""
        self._readers[self._last].extend(readers)
