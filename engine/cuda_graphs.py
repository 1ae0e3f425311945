"""Padded decode steps: CUDA graphs captured once per graph batch size and table width (at start-up
or on demand) and replayed (CUDA), or the same padded forward run eagerly (CPU, where graphs do
not exist).

A decode step's batch is padded to the next graph batch size and table width
(engine/decode_padding.py) and staged into the decode buffers; capture and replay are
engine/graph_capture.py's. A step may take its tokens from the previous step's greedy tokens still
on the device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from engine.decode_padding import PaddedDecodeBatch, graph_batch_size, pad_decode
from engine.graph_capture import GraphSet, StepOutputs, padded_forward, run_padded
from engine.model import ForwardBatch

if TYPE_CHECKING:
    from engine.model_runner import Chunk, ModelRunner

__all__ = ["PaddedDecode"]


class PaddedDecode:
    """Runs decode steps of a runner padded to its graph batch sizes."""

    def __init__(self, runner: "ModelRunner") -> None:
        self.runner = runner
        self.sizes = runner.config.graph_batch_sizes
        self.widths = runner.config.graph_table_widths
        self.graphs: GraphSet[tuple[int, int]] | None = None  # by (batch size, table width); None on the CPU
        if runner.device.type == "cuda":
            shapes = sorted(((s, w) for s in self.sizes for w in self.widths), reverse=True)  # largest first
            self.graphs = GraphSet(runner, shapes, self._stage_padding,
                                   on_demand=runner.config.graph_capture == "on_demand")

    def pad(self, chunks: Sequence["Chunk"], *, tokens_on_device: bool = False) -> PaddedDecodeBatch:
        """The padded batch of a decode step."""
        config = self.runner.config
        return pad_decode(chunks, batch_size=graph_batch_size(len(chunks), self.sizes), page_size=config.page_size,
                          num_pool_pages=config.num_pages, table_widths=self.widths, tokens_on_device=tokens_on_device)

    def run(self, chunks: Sequence["Chunk"], *, tokens_from: tuple[torch.Tensor, Sequence[int]] | None = None
            ) -> StepOutputs:
        """``(logits [size, V], greedy tokens [size], finiteness flags [size], launches)``; rows past
        len(chunks) are padding.

        ``tokens_from = (tokens, rows)``: the chunks' tokens are ``tokens[rows[i]]``, a previous
        step's greedy tokens still on the device, copied into the inputs there.
        """
        buffers = self.runner.buffers
        padded = self.pad(chunks, tokens_on_device=tokens_from is not None)
        # before staging: a graph captured now stages its padding step into the same buffers
        captured = None if self.graphs is None else self.graphs.get((padded.batch_size, padded.table_width))
        if tokens_from is None:
            batch = buffers.stage_decode(padded)
        else:
            previous_tokens, source_rows = tokens_from
            batch = buffers.stage_decode(padded, source_rows)
            buffers.gather_tokens(len(chunks), previous_tokens)
        return run_padded(self.runner, captured, batch)

    def forward(self, batch: ForwardBatch, *, check_metadata: bool) -> StepOutputs:
        """The padded forward, eagerly (what a graph captures), with each row's greedy token."""
        return padded_forward(self.runner, batch, check_metadata=check_metadata)

    def _stage_padding(self, shape: tuple[int, int]) -> ForwardBatch:
        """Stage the all-padding batch of ``(batch size, table width)``: it touches only scratch pages."""
        size, width = shape
        config = self.runner.config
        padding = pad_decode((), batch_size=size, page_size=config.page_size, num_pool_pages=config.num_pages,
                             table_widths=(width,))
        return self.runner.buffers.stage_decode(padding)
