"""Padded mixed steps (prefill rows, with or without decode rows): CUDA graphs captured once per
padded shape (at start-up or on demand) and replayed (CUDA), or the same padded forward run eagerly
(CPU).

A mixed step is packed with its padding sequences (engine/mixed_padding.py) into the leading views
of the packed-step buffers of its shape, the addresses the graph was captured with; capture and
replay are engine/graph_capture.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import torch

from engine.graph_capture import GraphSet, StepOutputs, padded_forward, run_padded
from engine.mixed_padding import MixedShape, mixed_shape, padding_sequences
from engine.model import ForwardBatch

if TYPE_CHECKING:
    from engine.model_runner import Chunk, ModelRunner

__all__ = ["PaddedMixed"]


class PaddedMixed:
    """Runs a runner's mixed steps padded to graph shapes."""

    def __init__(self, runner: "ModelRunner", pack: Callable[..., dict[str, torch.Tensor]]) -> None:
        config = runner.config
        self.runner = runner
        self.pack = pack  # engine.model_runner's packing of chunks into host tensors
        self.buckets = config.graph_token_buckets
        self.sizes = tuple(s for s in config.graph_batch_sizes if s >= 2)  # one real chunk and a padding one
        self.graphs: GraphSet[MixedShape] | None = None  # None on the CPU
        if runner.device.type == "cuda":
            shapes = sorted((MixedShape(t, s) for t in self.buckets for s in self.sizes if t >= s),
                            key=lambda m: (m.num_tokens, m.num_seqs), reverse=True)  # largest first
            self.graphs = GraphSet(runner, shapes, lambda shape: self.stage((), shape),
                                   on_demand=config.graph_capture == "on_demand")

    def shape(self, chunks: Sequence["Chunk"]) -> MixedShape | None:
        """The padded shape of a step, or None when it runs eagerly."""
        return mixed_shape(chunks, buckets=self.buckets, sizes=self.sizes)

    def stage(self, chunks: Sequence["Chunk"], shape: MixedShape) -> ForwardBatch:
        """Pack ``chunks`` and their padding sequences into the buffer views of ``shape``."""
        runner, config = self.runner, self.runner.config
        num_rows = sum(c.end - c.start for c in chunks)
        padding = padding_sequences(num_rows, len(chunks), shape, page_size=config.page_size,
                                    num_pool_pages=config.num_pages,
                                    num_decode_scratch_pages=runner.num_decode_scratch_pages)
        host = self.pack([*chunks, *padding], config.page_size, config.max_pages_per_seq)
        sampled = host["sample_rows"]  # [S] the real sampled rows; the rest name the last padding row
        host["sample_rows"] = torch.cat([sampled, torch.full((shape.num_seqs - sampled.shape[0],),
                                                             shape.num_tokens - 1, dtype=torch.int64)])
        return runner.buffers.stage(host)

    def run(self, chunks: Sequence["Chunk"], shape: MixedShape) -> StepOutputs:
        """``(logits [num_seqs, V], greedy tokens [num_seqs], finiteness flags [num_tokens], launches)``;
        the real sampled rows and the real rows first."""
        # before staging: a graph captured now stages its padding step into the same buffers
        captured = None if self.graphs is None else self.graphs.get(shape)
        return run_padded(self.runner, captured, self.stage(chunks, shape))

    def forward(self, batch: ForwardBatch, *, check_metadata: bool) -> StepOutputs:
        """The padded forward, eagerly (what a graph captures), with each row's greedy token."""
        return padded_forward(self.runner, batch, check_metadata=check_metadata)
