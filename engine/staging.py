"""Step inputs: device buffers preallocated for the engine limits, and staging a step into them.

The buffers hold max_num_batched_tokens rows, max_num_seqs requests and max_pages_per_seq
table columns; a step uses their leading views, so no tensor shape depends on another request's
length and a captured CUDA graph reads the same addresses at every replay. Packed (eager) steps
are copied in from host tensors. Padded decode steps have their own region: every input of a
decode step of up to max_num_seqs rows in one block of memory, the block table last, written
into a host mirror (pinned on CUDA) and copied with one asynchronous copy of the part in use
(each copy call lets the step loop's thread give up the interpreter lock, and every hand-back
cost time on a busy host): the host never waits. On CUDA there are two host mirrors, used in
turn, because a decode step may be staged while the previous step's copy is still queued.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import torch

from engine.decode_padding import PaddedDecodeBatch
from engine.model import ForwardBatch

__all__ = ["StepBuffers", "DecodeRegion"]

_I64, _I32 = torch.int64, torch.int32


class DecodeRegion:
    """The inputs of padded decode steps in one block of bytes, on the device and mirrored on the host.

    Layout, for ``S = max_num_seqs`` and ``P = max_pages_per_seq``: input_ids, positions,
    slot_mapping, sample_rows, source_rows ([S] int64 each; source_rows names, for a step whose
    tokens are still on the device, each row's row in the previous step, -1 for a row whose
    staged id stands), slots ([2] int64: the host-logits device slot the step's outputs go to, -1
    for none, and the slot its tokens come from), seq_lens, seq_idx ([S] int32), query_start_loc
    ([S + 1] int32), block_table ([S, P] int32). A step of ``n`` rows uses every field's first
    ``n`` rows; with the table last, all of them lie in the block's first :meth:`used_bytes`
    ``(n)`` bytes. Every row of a decode step is a request of one token and is
    sampled, so sample_rows, seq_idx and query_start_loc are 0, 1, 2, ... at every step: the host
    mirrors hold them from the start.
    """

    def __init__(self, *, max_num_seqs: int, max_pages_per_seq: int, device: torch.device) -> None:
        s, p = max_num_seqs, max_pages_per_seq
        fields = [("input_ids", (s,), _I64), ("positions", (s,), _I64), ("slot_mapping", (s,), _I64),
                  ("sample_rows", (s,), _I64), ("source_rows", (s,), _I64), ("slots", (2,), _I64),
                  ("seq_lens", (s,), _I32), ("seq_idx", (s,), _I32), ("query_start_loc", (s + 1,), _I32),
                  ("block_table", (s, p), _I32)]
        self._offsets: dict[str, int] = {}
        offset = 0
        for name, shape, dtype in fields:
            self._offsets[name] = offset
            offset += int(np.prod(shape)) * dtype.itemsize
        self.table_row_bytes = p * _I32.itemsize
        self.device_bytes = torch.zeros(offset, dtype=torch.uint8, device=device)
        self.host_bytes = [self.device_bytes] if device.type == "cpu" else \
            [torch.zeros(offset, dtype=torch.uint8, pin_memory=True) for _ in range(2)]
        self.device = self._views(self.device_bytes, fields)
        self.hosts = [self._views(raw, fields) for raw in self.host_bytes]
        for host in self.hosts:
            for name in ("sample_rows", "seq_idx", "query_start_loc"):
                host[name].copy_(torch.arange(host[name].shape[0], dtype=host[name].dtype))

    def _views(self, raw: torch.Tensor, fields: list) -> dict[str, torch.Tensor]:
        views = {}
        for name, shape, dtype in fields:
            start = self._offsets[name]
            views[name] = raw[start:start + int(np.prod(shape)) * dtype.itemsize].view(dtype).view(shape)
        return views

    def used_bytes(self, num_rows: int) -> int:
        """Bytes from the start of the block that hold every field's first ``num_rows`` rows."""
        return self._offsets["block_table"] + num_rows * self.table_row_bytes

    def copy_to_device(self, mirror: int, num_rows: int) -> None:
        """One asynchronous copy of the part a step of ``num_rows`` rows uses (nothing on the CPU)."""
        host = self.host_bytes[mirror]
        if host is not self.device_bytes:
            used = self.used_bytes(num_rows)
            self.device_bytes[:used].copy_(host[:used], non_blocking=True)


class StepBuffers:
    """The forward inputs of one step, on the model's device; decode steps in a :class:`DecodeRegion`."""

    def __init__(self, *, max_num_rows: int, max_num_seqs: int, max_pages_per_seq: int,
                 device: torch.device) -> None:
        shapes = {"input_ids": ((max_num_rows,), _I64), "positions": ((max_num_rows,), _I64),
                  "slot_mapping": ((max_num_rows,), _I64), "block_table": ((max_num_seqs, max_pages_per_seq), _I32),
                  "query_start_loc": ((max_num_seqs + 1,), _I32), "seq_lens": ((max_num_seqs,), _I32),
                  # sampled rows, then the prompt rows some requests ask logits for
                  "sample_rows": ((max(max_num_rows, max_num_seqs),), _I64)}
        self.device = device
        self.buffers = {name: torch.zeros(shape, dtype=dtype, device=device) for name, (shape, dtype) in shapes.items()}
        self.decode = DecodeRegion(max_num_seqs=max_num_seqs, max_pages_per_seq=max_pages_per_seq, device=device)
        # numpy views sharing each host mirror's memory
        self._arrays = [{name: t.numpy() for name, t in host.items()} for host in self.decode.hosts]
        # What each block-table row of each mirror holds (zeros after it; None: unknown), so a
        # growing table is written incrementally: a long context's row is not converted from
        # Python ints at every step.
        self._table_rows: list[list[list[int] | None]] = [[None] * max_num_seqs for _ in self.decode.hosts]
        self._mirror = 0
        self._decode_views: dict[tuple[int, int], ForwardBatch] = {}  # by (size, width): slicing costs ~20 us a step

    def views(self, num_tokens: int, num_seqs: int, num_sampled: int) -> ForwardBatch:
        """Leading views of the packed-step device buffers for a step of these sizes."""
        return _leading(self.buffers, num_tokens, num_seqs, num_sampled)

    def stage(self, host: dict[str, torch.Tensor], *, longest_kv_len: int = 0) -> ForwardBatch:
        """Copy packed host tensors (engine.model_runner's packing) into leading views
        (``longest_kv_len``: :class:`ForwardBatch`'s host hint)."""
        views = {}
        for name, tensor in host.items():
            view = self.buffers[name][:tensor.shape[0]]
            view.copy_(tensor, non_blocking=True)
            views[name] = view
        return ForwardBatch(**views, longest_kv_len=longest_kv_len)

    def stage_decode(self, batch: PaddedDecodeBatch, source_rows: Sequence[int] = (), *,
                     slots: tuple[int, int] = (-1, 0)) -> ForwardBatch:
        """Write a padded decode batch into a host mirror of the decode region and copy it to the device.

        Every table column past a row's pages is zero, so staged inputs are a function of this
        step alone. ``source_rows`` (one per real row, or empty; -1 for every other row) is staged
        for :meth:`gather_tokens` or kernels/step_io.py's ``take_tokens``, ``slots`` (the device
        slot the step writes, -1 for none; the slot its tokens come from) for step_io. The mirror
        written was last copied two stagings ago; that copy has completed, since between two
        stagings the host waits for a step's logits, which the device computes after the step's
        input copy.
        """
        size = batch.batch_size
        self._mirror = (self._mirror + 1) % len(self._arrays)
        a = self._arrays[self._mirror]
        a["input_ids"][:size] = batch.token_ids
        a["source_rows"][:len(source_rows)] = source_rows
        a["source_rows"][len(source_rows):size] = -1
        a["slots"][:] = slots
        a["positions"][:size] = batch.positions
        a["slot_mapping"][:size] = batch.slots
        a["seq_lens"][:size] = batch.seq_lens
        table = a["block_table"]
        held_rows = self._table_rows[self._mirror]
        for row, pages in enumerate(batch.page_tables):
            pages = list(pages)
            held = held_rows[row]
            if held is not None and pages[:len(held)] == held:  # the same table, grown or unchanged
                table[row, len(held):len(pages)] = pages[len(held):]
            else:
                table[row, :len(pages)] = pages
                table[row, len(pages):] = 0
            held_rows[row] = pages
        self.decode.copy_to_device(self._mirror, size)
        width = batch.table_width or table.shape[1]
        views = self._decode_views.get((size, width))
        if views is None:
            views = _leading(self.decode.device, size, size, size)
            views = self._decode_views[(size, width)] = replace(
                views, block_table=views.block_table[:, :width], seq_idx=self.decode.device["seq_idx"][:size],
                is_every_row_sampled=True)
        return views


    def gather_tokens(self, num_rows: int, previous_tokens: torch.Tensor) -> None:
        """Set the first ``num_rows`` staged input ids from a previous step's device tokens.

        ``previous_tokens`` [R] int64 holds the previous step's greedy tokens; row ``i`` takes
        entry ``source_rows[i]``. Enqueued after the staging copy, so it overwrites the staged
        placeholders; the host never sees these tokens before the step runs.
        """
        device = self.decode.device
        torch.index_select(previous_tokens, 0, device["source_rows"][:num_rows], out=device["input_ids"][:num_rows])


def _leading(fields: dict[str, torch.Tensor], num_tokens: int, num_seqs: int, num_sampled: int) -> ForwardBatch:
    return ForwardBatch(input_ids=fields["input_ids"][:num_tokens], positions=fields["positions"][:num_tokens],
                        slot_mapping=fields["slot_mapping"][:num_tokens], block_table=fields["block_table"][:num_seqs],
                        query_start_loc=fields["query_start_loc"][:num_seqs + 1], seq_lens=fields["seq_lens"][:num_seqs],
                        sample_rows=fields["sample_rows"][:num_sampled])
