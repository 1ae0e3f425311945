"""Padded mixed steps (prefill rows, with or without decode rows): CUDA graphs captured once per
padded shape and replayed (CUDA), or the same padded forward run eagerly (CPU).

At start-up, for each shape (engine/mixed_padding.py), largest first: stage an all-padding step
(it touches only scratch pages), run the forward once eagerly, then capture the forward plus the
greedy argmax into one graph; the graphs share one memory pool. A mixed step is packed with its
padding sequences into the leading views of the packed-step buffers of that shape (the addresses
the graph was captured with) and replays the graph: its launches are the ones recorded at
capture. Index checks read tensors back to the host, which a graph cannot do: in check mode they
run on the staged step before each replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import torch

from engine.cuda_graphs import check_inputs
from engine.mixed_padding import MixedShape, mixed_shape, padding_sequences
from engine.model import ForwardBatch
from engine.sampler import greedy_tokens
from kernels.launch import LaunchRecord, record_launches, use_plan

if TYPE_CHECKING:
    from engine.model_runner import Chunk, ModelRunner

__all__ = ["PaddedMixed"]


@dataclass(frozen=True, slots=True)
class _Captured:
    graph: torch.cuda.CUDAGraph
    logits: torch.Tensor  # [num_seqs, V] float32, rewritten by every replay
    tokens: torch.Tensor  # [num_seqs] int64 greedy tokens, rewritten by every replay
    nonfinite: torch.Tensor  # [num_tokens] float32 finiteness flags, rewritten by every replay
    launches: tuple[LaunchRecord, ...]


class PaddedMixed:
    """Runs a runner's mixed steps padded to graph shapes."""

    def __init__(self, runner: "ModelRunner", pack: Callable[..., dict[str, torch.Tensor]]) -> None:
        config = runner.config
        self.runner = runner
        self.pack = pack  # engine.model_runner's packing of chunks into host tensors
        self.buckets = config.graph_token_buckets
        self.sizes = tuple(s for s in config.graph_batch_sizes if s >= 2)  # one real chunk and a padding one
        self.graphs: dict[MixedShape, _Captured] = {}
        if runner.device.type == "cuda":
            self._capture_all()

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

    def run(self, chunks: Sequence["Chunk"], shape: MixedShape
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[LaunchRecord]]:
        """``(logits [num_seqs, V], greedy tokens [num_seqs], finiteness flags [num_tokens], launches)``;
        the real sampled rows and the real rows first."""
        batch = self.stage(chunks, shape)
        captured = self.graphs.get(shape)
        if captured is None:  # the CPU: the same padded step, eagerly
            return self.forward(batch, check_metadata=self.runner.check_metadata)
        if self.runner.check_metadata:
            check_inputs(self.runner, batch)
        captured.graph.replay()
        return captured.logits, captured.tokens, captured.nonfinite, list(captured.launches)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, *, check_metadata: bool
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[LaunchRecord]]:
        """The padded forward, eagerly (what a graph captures), with each row's greedy token."""
        runner = self.runner
        with use_plan(runner.plan, check_metadata=check_metadata), record_launches() as launches:
            logits, nonfinite = runner.model.forward(batch, runner.kv)
        return logits, greedy_tokens(logits), nonfinite, launches

    def _capture_all(self) -> None:
        pool = torch.cuda.graph_pool_handle()
        capture_stream = torch.cuda.Stream()  # on this engine's device (see engine/cuda_graphs.py)
        shapes = sorted((MixedShape(t, s) for t in self.buckets for s in self.sizes if t >= s),
                        key=lambda m: (m.num_tokens, m.num_seqs), reverse=True)  # largest first
        for shape in shapes:
            batch = self.stage((), shape)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.forward(batch, check_metadata=False)  # warm-up; writes only scratch pages
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=capture_stream, capture_error_mode="thread_local"):
                logits, tokens, nonfinite, launches = self.forward(batch, check_metadata=False)
            self.graphs[shape] = _Captured(graph, logits, tokens, nonfinite, tuple(launches))
        torch.cuda.synchronize()
