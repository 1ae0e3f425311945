"""Bringing a step's logits (device-chosen greedy tokens, finiteness flags) to the host: the step loop's one wait.

On CUDA the sampled rows are copied into one of a few pinned host slots and the host waits for that
copy only; nothing else in a step synchronises. The copy is enqueued right after the step's kernels
(:meth:`HostLogits.start`) and waited for later (:meth:`HostLogits.wait`), so the next step can be
launched in between. The step's stream only copies the rows, tokens and flags into a device slot (a
few microseconds); the copy to the host (about 2 MB for four 128K-vocabulary rows) runs
on a copy stream of its own, so the next step's kernels do not wait behind it. A slot is one block
of bytes, rows last, so that copy is one call: each call costs the step loop host time
(bench/host_copy.py). Trace digests are computed later, by worker threads,
from the slot itself (engine/row_digests.py), so a slot is reused only after every reader registered
on it has finished. On the CPU the logits already are on the host.
"""

from __future__ import annotations

from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Iterable

import torch

from kernels.step_io import DeviceSlots

__all__ = ["HostFetch", "HostLogits", "NUM_HOST_SLOTS", "allocate_device_slots"]

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


class _Slot:
    """One slot's typed views of a block of bytes: flags, tokens, input tokens, then the rows.

    Rows come last, so a step of ``n`` rows uses the block's first ``used_bytes(n)`` bytes.
    """

    def __init__(self, raw: torch.Tensor, *, max_num_rows: int, vocab_size: int, max_num_flags: int) -> None:
        r, f = max_num_rows, max_num_flags
        tokens_at, self.logits_at = self._offsets(max_num_rows=r, max_num_flags=f)
        self.raw = raw
        self.flags = raw[:4 * f].view(torch.float32)  # [F]
        self.tokens = raw[tokens_at:tokens_at + 8 * r].view(torch.int64)  # [R]
        self.inputs = raw[tokens_at + 8 * r:tokens_at + 16 * r].view(torch.int64)  # [R]
        self.row_bytes = 4 * vocab_size
        self.logits = raw[self.logits_at:].view(torch.float32).view(r, vocab_size)  # [R, V]

    @staticmethod
    def _offsets(*, max_num_rows: int, max_num_flags: int) -> tuple[int, int]:
        """Byte offsets of the tokens (8-aligned, after the flags) and of the rows (256-aligned)."""
        tokens_at = -(-4 * max_num_flags // 8) * 8
        return tokens_at, -(-(tokens_at + 16 * max_num_rows) // 256) * 256

    @staticmethod
    def num_bytes(*, max_num_rows: int, vocab_size: int, max_num_flags: int) -> int:
        logits_at = _Slot._offsets(max_num_rows=max_num_rows, max_num_flags=max_num_flags)[1]
        return logits_at + 4 * max_num_rows * vocab_size

    def used_bytes(self, num_rows: int) -> int:
        return self.logits_at + num_rows * self.row_bytes


class HostLogits:
    """Pinned host slots for the sampled rows of CUDA steps."""

    def __init__(self, *, max_num_rows: int, vocab_size: int, max_num_flags: int,
                 num_slots: int = NUM_HOST_SLOTS) -> None:
        sizes = dict(max_num_rows=max_num_rows, vocab_size=vocab_size, max_num_flags=max_num_flags)
        num_bytes = _Slot.num_bytes(**sizes)
        self._host = [_Slot(torch.empty(num_bytes, dtype=torch.uint8, pin_memory=True), **sizes)
                      for _ in range(num_slots)]
        # Device slots: what the step's stream hands to the copy stream.
        self._device, self.device_slots = allocate_device_slots(num_slots, device=torch.device("cuda"), **sizes)
        self._readers: list[list[Future]] = [[] for _ in range(num_slots)]
        self._staged = [torch.cuda.Event() for _ in range(num_slots)]
        self._copied = [torch.cuda.Event() for _ in range(num_slots)]
        self._copy_stream = torch.cuda.Stream()
        self._last = 0

    def start(self, logits: torch.Tensor, tokens: torch.Tensor, num_rows: int, nonfinite: torch.Tensor,
              input_ids: torch.Tensor | None = None) -> HostFetch:
        """Enqueue the copy of the first ``num_rows`` rows of ``logits`` [R, V] float32 and ``tokens``
        [R] int64, and of the step's finiteness flags ``nonfinite`` [T] float32 (kernels/finiteness.py).

        ``input_ids`` [R] int64, when given, are the rows' input tokens (a decode step's), copied too.
        On the step's stream the four go into the device slot; the slot's used bytes then reach
        the host with one copy on the copy stream.
        """
        assert logits.dtype == torch.float32 and nonfinite.dtype == torch.float32 and tokens.dtype == torch.int64
        assert input_ids is None or input_ids.dtype == torch.int64
        slot, n, num_flags = self.reserve(), num_rows, nonfinite.shape[0]
        device = self._device[slot]
        device.flags[:num_flags].copy_(nonfinite)
        device.logits[:n].copy_(logits[:n])
        device.tokens[:n].copy_(tokens[:n])
        if input_ids is not None:
            device.inputs[:n].copy_(input_ids[:n])
        return self.send(slot, num_rows=n, num_flags=num_flags, has_inputs=input_ids is not None)

    def reserve(self) -> int:
        """The device slot the next step writes: free once its host slot's readers have finished and
        its previous copy to the host has (the step's stream waits for that, in order)."""
        slot = (self._last + 1) % len(self._host)
        # Started a few steps ago; usually long finished. Errors surface where the digests are read.
        wait(self._readers[slot])
        self._readers[slot] = []
        self._last = slot
        # The device slot's previous copy to the host finished steps ago (a no-op wait, in order).
        torch.cuda.current_stream().wait_event(self._copied[slot])
        return slot

    def send(self, slot: int, *, num_rows: int, num_flags: int, has_inputs: bool) -> HostFetch:
        """Enqueue the copy of device slot ``slot`` (written by the step's stream) to its host slot:
        ``num_rows`` rows and tokens, and ``num_flags`` flags."""
        step_stream = torch.cuda.current_stream()
        self._staged[slot].record(step_stream)
        self._copy_stream.wait_event(self._staged[slot])
        used = self._device[slot].used_bytes(num_rows)
        torch.cuda.set_stream(self._copy_stream)  # not torch.cuda.stream(): its context costs the loop more
        try:
            self._host[slot].raw[:used].copy_(self._device[slot].raw[:used], non_blocking=True)
            self._copied[slot].record(self._copy_stream)
        finally:
            torch.cuda.set_stream(step_stream)
        return HostFetch(slot, num_rows, has_inputs, num_flags)

    def wait(self, fetch: HostFetch) -> tuple[torch.Tensor, list[int], list[int] | None, torch.Tensor]:
        """Wait for ``fetch``'s copy; its ``[num_rows, V]`` rows, greedy tokens, input tokens (or None)
        and ``[T]`` finiteness flags (a copy: flags are read once, right away).

        The rows stay valid until the slot comes round again, after every reader added with
        :meth:`add_readers` has finished.
        """
        self._copied[fetch.slot].synchronize()
        n, host = fetch.num_rows, self._host[fetch.slot]
        inputs = host.inputs[:n].tolist() if fetch.has_inputs else None
        flags = host.flags[:fetch.num_flags].clone()
        return host.logits[:n], host.tokens[:n].tolist(), inputs, flags

    def add_readers(self, fetch: HostFetch, readers: Iterable[Future]) -> None:
        """Keep ``fetch``'s slot until ``readers`` have finished."""
        self._readers[fetch.slot].extend(readers)


def allocate_device_slots(num_slots: int, *, device: torch.device, max_num_rows: int, vocab_size: int,
                          max_num_flags: int) -> tuple[list[_Slot], DeviceSlots]:
    """``num_slots`` slots in one block of ``device`` memory: each slot's views (what is copied to
    the host) and every slot's fields as one strided view each, slot first (what the decode
    graphs' kernels index with a staged slot number)."""
    sizes = dict(max_num_rows=max_num_rows, vocab_size=vocab_size, max_num_flags=max_num_flags)
    num_bytes = _Slot.num_bytes(**sizes)
    stride = -(-num_bytes // 256) * 256  # a multiple of 8: every slot's fields at the same element offsets
    block = torch.zeros(num_slots * stride, dtype=torch.uint8, device=device)
    slots = [_Slot(block[i * stride:i * stride + num_bytes], **sizes) for i in range(num_slots)]
    as_f32, as_i64 = block.view(torch.float32), block.view(torch.int64)
    tokens_at, logits_at = _Slot._offsets(max_num_rows=max_num_rows, max_num_flags=max_num_flags)
    return slots, DeviceSlots(
        logits=as_f32.as_strided((num_slots, max_num_rows, vocab_size), (stride // 4, vocab_size, 1), logits_at // 4),
        tokens=as_i64.as_strided((num_slots, max_num_rows), (stride // 8, 1), tokens_at // 8),
        inputs=as_i64.as_strided((num_slots, max_num_rows), (stride // 8, 1), tokens_at // 8 + max_num_rows),
        flags=as_f32.as_strided((num_slots, max_num_flags), (stride // 4, 1), 0))
