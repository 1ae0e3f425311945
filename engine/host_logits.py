"""Bringing a step's logits (device-chosen greedy tokens, finiteness flags) to the host: the step loop's one wait.

On CUDA the sampled rows are copied into one of a few pinned host slots and the host waits for that
copy only; nothing else in a step synchronises. The copy is enqueued right after the step's kernels
(:meth:`HostLogits.start`) and waited for later (:meth:`HostLogits.wait`), so the next step can be
launched in between. The step's stream only copies the rows into a device slot (a few microseconds);
the copy to the host (about 2 MB for four 128K-vocabulary rows) runs on a copy stream of its own, so
the next step's kernels do not wait behind it. Trace digests are computed later, by worker threads,
from the slot itself (engine/row_digests.py), so a slot is reused only after every reader registered
on it has finished. On the CPU the logits already are on the host.
"""

from __future__ import annotations

from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Iterable

import torch

__all__ = ["HostFetch", "HostLogits", "NUM_HOST_SLOTS"]

# A slot is rewritten three steps after it was filled: one step may be in flight while the
# previous one's rows are read and the one before that is still being hashed.
NUM_HOST_SLOTS = 4


@dataclass(frozen=True, slots=True)
class HostFetch:
    """An enqueued copy of one step's sampled rows into host slot ``slot``."""

    slot: int
    num_rows: int
    has_inputs: bool  # the rows' input token ids were copied too
    num_flags: int  # rows of the step whose finiteness flags were copied


class HostLogits:
    """Pinned host slots for the sampled rows of CUDA steps."""

    def __init__(self, *, max_num_rows: int, vocab_size: int, max_num_flags: int,
                 num_slots: int = NUM_HOST_SLOTS) -> None:
        self._logits = [torch.empty(max_num_rows, vocab_size, dtype=torch.float32, pin_memory=True)
                        for _ in range(num_slots)]
        self._flags = [torch.empty(max_num_flags, dtype=torch.float32, pin_memory=True) for _ in range(num_slots)]
        self._device_flags = [torch.empty(max_num_flags, dtype=torch.float32, device="cuda") for _ in range(num_slots)]
        self._tokens = [torch.empty(max_num_rows, dtype=torch.int64, pin_memory=True) for _ in range(num_slots)]
        self._inputs = [torch.empty(max_num_rows, dtype=torch.int64, pin_memory=True) for _ in range(num_slots)]
        # Device slots: what the step's stream hands to the copy stream.
        self._device_logits = [torch.empty(max_num_rows, vocab_size, dtype=torch.float32, device="cuda")
                               for _ in range(num_slots)]
        self._device_ids = [torch.empty(2, max_num_rows, dtype=torch.int64, device="cuda") for _ in range(num_slots)]
        self._readers: list[list[Future]] = [[] for _ in range(num_slots)]
        self._staged = [torch.cuda.Event() for _ in range(num_slots)]
        self._copied = [torch.cuda.Event() for _ in range(num_slots)]
        self._copy_stream = torch.cuda.Stream()
        self._last = 0

    def start(self, logits: torch.Tensor, tokens: torch.Tensor, num_rows: int, nonfinite: torch.Tensor,
              input_ids: torch.Tensor | None = None) -> HostFetch:
        """Enqueue the copy of the first ``num_rows`` rows of ``logits`` [R, V] and ``tokens`` [R],
        and of the step's finiteness flags ``nonfinite`` [T] float32 (kernels/finiteness.py).

        ``input_ids`` [R], when given, are the rows' input tokens (a decode step's), copied too.
        """
        slot = (self._last + 1) % len(self._logits)
        # Started a few steps ago; usually long finished. Errors surface where the digests are read.
        wait(self._readers[slot])
        self._readers[slot] = []
        self._last = slot
        step_stream, n = torch.cuda.current_stream(), num_rows
        # The device slot's previous copy to the host finished steps ago (a no-op wait, in order).
        step_stream.wait_event(self._copied[slot])
        device_logits, device_ids = self._device_logits[slot][:n], self._device_ids[slot][:, :n]
        num_flags = nonfinite.shape[0]
        device_flags = self._device_flags[slot][:num_flags]
        device_flags.copy_(nonfinite)
        device_logits.copy_(logits[:n])
        device_ids[0].copy_(tokens[:n])
        if input_ids is not None:
            device_ids[1].copy_(input_ids[:n])
        self._staged[slot].record(step_stream)
        self._copy_stream.wait_event(self._staged[slot])
        with torch.cuda.stream(self._copy_stream):
            self._logits[slot][:n].copy_(device_logits, non_blocking=True)
            self._tokens[slot][:n].copy_(device_ids[0], non_blocking=True)
            self._flags[slot][:num_flags].copy_(device_flags, non_blocking=True)
            if input_ids is not None:
                self._inputs[slot][:n].copy_(device_ids[1], non_blocking=True)
            self._copied[slot].record(self._copy_stream)
        return HostFetch(slot, num_rows, input_ids is not None, num_flags)

    def wait(self, fetch: HostFetch) -> tuple[torch.Tensor, list[int], list[int] | None, torch.Tensor]:
        """Wait for ``fetch``'s copy; its ``[num_rows, V]`` rows, greedy tokens, input tokens (or None)
        and ``[T]`` finiteness flags (a copy: flags are read once, right away).

        The rows stay valid until the slot comes round again, after every reader added with
        :meth:`add_readers` has finished.
        """
        self._copied[fetch.slot].synchronize()
        n, slot = fetch.num_rows, fetch.slot
        inputs = self._inputs[slot][:n].tolist() if fetch.has_inputs else None
        flags = self._flags[slot][:fetch.num_flags].clone()
        return self._logits[slot][:n], self._tokens[slot][:n].tolist(), inputs, flags

    def add_readers(self, fetch: HostFetch, readers: Iterable[Future]) -> None:
        """Keep ``fetch``'s slot until ``readers`` have finished."""
        self._readers[fetch.slot].extend(readers)
