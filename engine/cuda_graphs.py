"""Padded decode steps: CUDA graphs captured once per graph batch size and table width (at start-up
or on demand) and replayed (CUDA), or the same padded forward run eagerly (CPU, where graphs do
not exist).

A decode step's batch is padded to the next graph batch size and table width
(engine/decode_padding.py) and staged into the decode buffers; capture and replay are
engine/graph_capture.py's. A step may take its tokens from the previous step's greedy tokens still
on the device. On CUDA the step's outputs go to a host-logits device slot (engine/host_logits.py)
inside the graph, and a step's tokens taken on the device are read from the earlier step's slot
there too: between two replays the device runs only the copy of the staged inputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from engine.decode_padding import PaddedDecodeBatch, graph_batch_size, pad_decode
from engine.graph_capture import DecodeIO, GraphSet, StepOutputs, padded_forward, run_padded
from engine.host_logits import HostFetch
from engine.model import ForwardBatch

if TYPE_CHECKING:
    from engine.model_runner import Chunk, Launched, ModelRunner

__all__ = ["PaddedDecode"]


class PaddedDecode:
    """Runs decode steps of a runner padded to its graph batch sizes."""

    def __init__(self, runner: "ModelRunner") -> None:
        self.runner = runner
        self.sizes = runner.config.graph_batch_sizes
        self.widths = runner.config.graph_table_widths
        self.graphs: GraphSet[tuple[int, int]] | None = None  # by (batch size, table width); None on the CPU
        self.io: DecodeIO | None = None  # None on the CPU
        if runner.device.type == "cuda":
            assert runner.host_logits is not None
            device = runner.buffers.decode.device
            self.io = DecodeIO(device["source_rows"], device["slots"], runner.host_logits.device_slots)
            shapes = sorted(((s, w) for s in self.sizes for w in self.widths), reverse=True)  # largest first
            self.graphs = GraphSet(runner, shapes, self._stage_padding,
                                   on_demand=runner.config.graph_capture == "on_demand", io=self.io)

    def pad(self, chunks: Sequence["Chunk"], *, tokens_on_device: bool = False) -> PaddedDecodeBatch:
        """The padded batch of a decode step."""
        config = self.runner.config
        return pad_decode(chunks, batch_size=graph_batch_size(len(chunks), self.sizes), page_size=config.page_size,
                          num_pool_pages=config.num_pages, table_widths=self.widths, tokens_on_device=tokens_on_device)

    def run(self, chunks: Sequence["Chunk"], *, tokens_from: tuple["Launched", Sequence[int]] | None = None
            ) -> tuple[StepOutputs, HostFetch | None]:
        """``(logits [size, V], greedy tokens [size], finiteness flags [size], launches)`` and, on
        CUDA, the enqueued fetch of the step's device slot; rows past len(chunks) are padding.

        ``tokens_from = (launched, rows)``: chunk ``i``'s token is the greedy token of row
        ``rows[i]`` of the earlier step ``launched``, still on the device, read there.
        """
        runner, buffers = self.runner, self.runner.buffers
        padded = self.pad(chunks, tokens_on_device=tokens_from is not None)
        source_rows = () if tokens_from is None else tokens_from[1]
        # before staging: a graph captured now stages its padding step into the same buffers
        captured = None if self.graphs is None else self.graphs.get((padded.batch_size, padded.table_width))
        if self.io is None:  # the CPU: the earlier step's tokens are a tensor of its own
            batch = buffers.stage_decode(padded, source_rows)
            if tokens_from is not None:
                earlier_tokens = tokens_from[0].tokens
                if earlier_tokens is None:
                    raise ValueError("a step launched ahead needs the earlier step's greedy tokens on the device")
                buffers.gather_tokens(len(chunks), earlier_tokens)
            return run_padded(runner, captured, batch), None
        source_slot = 0
        if tokens_from is not None:
            if tokens_from[0].fetch is None:
                raise ValueError("a step launched ahead needs the earlier step's sampled rows in a device slot")
            source_slot = tokens_from[0].fetch.slot
        host = runner.host_logits
        assert host is not None  # CUDA
        slot = host.reserve()
        batch = buffers.stage_decode(padded, source_rows, slots=(slot, source_slot))
        outputs = run_padded(runner, captured, batch, self.io)
        fetch = host.send(slot, num_rows=len(chunks), num_flags=len(chunks), has_inputs=tokens_from is not None)
        return outputs, fetch

    def forward(self, batch: ForwardBatch, *, check_metadata: bool) -> StepOutputs:
        """The padded forward, eagerly (what a graph captures), with each row's greedy token."""
        return padded_forward(self.runner, batch, check_metadata=check_metadata, io=self.io)

    def _stage_padding(self, shape: tuple[int, int]) -> ForwardBatch:
        """Stage the all-padding batch of ``(batch size, table width)``: it touches only scratch pages."""
        size, width = shape
        config = self.runner.config
        padding = pad_decode((), batch_size=size, page_size=config.page_size, num_pool_pages=config.num_pages,
                             table_widths=(width,))
        return self.runner.buffers.stage_decode(padding)
