"""Step inputs: device buffers preallocated for the engine limits, and staging a step into them.

The buffers hold max_num_batched_tokens rows, max_num_seqs requests and max_pages_per_seq
table columns; a step uses their leading views, so no tensor shape depends on another request's
length and a captured CUDA graph reads the same addresses at every replay. Packed (eager) steps
are copied in from host tensors. Padded decode steps are written into host mirrors of the
buffers, pinned on CUDA, and copied with one asynchronous copy per tensor: the host never waits.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.decode_padding import PaddedDecodeBatch
from engine.model import ForwardBatch

__all__ = ["StepBuffers"]


class StepBuffers:
    """The forward inputs of one step, on the model's device, with host mirrors for decode steps."""

    def __init__(self, *, max_num_rows: int, max_num_seqs: int, max_pages_per_seq: int,
                 device: torch.device) -> None:
        shapes = {"input_ids": ((max_num_rows,), torch.int64), "positions": ((max_num_rows,), torch.int64),
                  "slot_mapping": ((max_num_rows,), torch.int64),
                  "block_table": ((max_num_seqs, max_pages_per_seq), torch.int32),
                  "query_start_loc": ((max_num_seqs + 1,), torch.int32), "seq_lens": ((max_num_seqs,), torch.int32),
                  "sample_rows": ((max_num_seqs,), torch.int64)}
        self.device = device
        self.buffers = {name: torch.zeros(shape, dtype=dtype, device=device) for name, (shape, dtype) in shapes.items()}
        if device.type == "cpu":
            self.host = self.buffers  # written in place: nothing to copy
        else:
            self.host = {name: torch.zeros(shape, dtype=dtype, pin_memory=True) for name, (shape, dtype) in shapes.items()}
        self._arrays = {name: t.numpy() for name, t in self.host.items()}  # views sharing the host memory
        # What each host block-table row holds (zeros after it; None: unknown), so a growing table
        # is written incrementally: a long context's row is not converted from Python ints at
        # every step.
        self._table_rows: list[list[int] | None] = [None] * max_num_seqs

    def views(self, num_tokens: int, num_seqs: int, num_sampled: int) -> ForwardBatch:
        """Leading views of the device buffers for a step of these sizes."""
        b = self.buffers
        return ForwardBatch(input_ids=b["input_ids"][:num_tokens], positions=b["positions"][:num_tokens],
                            slot_mapping=b["slot_mapping"][:num_tokens], block_table=b["block_table"][:num_seqs],
                            query_start_loc=b["query_start_loc"][:num_seqs + 1], seq_lens=b["seq_lens"][:num_seqs],
                            sample_rows=b["sample_rows"][:num_sampled])

    def stage(self, host: dict[str, torch.Tensor]) -> ForwardBatch:
        """Copy packed host tensors (engine.model_runner's packing) into leading views."""
        if self.host is self.buffers:  # the CPU: these writes land in the host rows too
            self._table_rows = [None] * len(self._table_rows)
        views = {}
        for name, tensor in host.items():
            view = self.buffers[name][:tensor.shape[0]]
            view.copy_(tensor, non_blocking=True)
            views[name] = view
        return ForwardBatch(**views)

    def stage_decode(self, batch: PaddedDecodeBatch) -> ForwardBatch:
        """Write a padded decode batch into the host mirrors and copy it to the device buffers.

        Every table column past a row's pages is zero, so staged inputs are a function of this
        step alone. A previous step's copies have completed: each step ends with the
        host waiting for its logits, which the device computes after its input copies.
        """
        size = batch.batch_size
        a = self._arrays
        a["input_ids"][:size] = batch.token_ids
        a["positions"][:size] = batch.positions
        a["slot_mapping"][:size] = batch.slots
        a["seq_lens"][:size] = batch.seq_lens
        a["query_start_loc"][:size + 1] = np.arange(size + 1, dtype=np.int32)
        a["sample_rows"][:size] = np.arange(size, dtype=np.int64)
        table = a["block_table"]
        for row, pages in enumerate(batch.page_tables):
            pages = list(pages)
            held = self._table_rows[row]
            if held is not None and pages[:len(held)] == held:  # the same table, grown or unchanged
                table[row, len(held):len(pages)] = pages[len(held):]
            else:
                table[row, :len(pages)] = pages
                table[row, len(pages):] = 0
            self._table_rows[row] = pages
        if self.host is not self.buffers:
            for name, host in self.host.items():
                count = size + 1 if name == "query_start_loc" else size
                self.buffers[name][:count].copy_(host[:count], non_blocking=True)
        return self.views(size, size, size)
