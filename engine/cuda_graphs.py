"""Padded decode steps: CUDA graphs captured once per graph batch size and replayed (CUDA), or the
same padded forward run eagerly (CPU, where graphs do not exist).

At start-up, for each batch size and table width (engine/decode_padding.py), largest first: stage an
all-padding batch (it touches only scratch pages), run the forward once eagerly (Triton compiles
there, never during capture), then capture the forward plus the greedy argmax into one graph; all
graphs share one memory pool and keep their outputs. A decode step stages its padded batch into the
same buffers and replays the graph of its size and width: the kernels, launch configurations and
tensor addresses are the captured ones, so the launches recorded at capture are the step's launches
(check mode reads them). Metadata checks read index tensors back to the host, which a graph cannot
do: in check mode they run on the staged batch before each replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import torch

from engine.decode_padding import PaddedDecodeBatch, graph_batch_size, pad_decode
from engine.model import ForwardBatch
from engine.sampler import greedy_tokens
from kernels import metadata
from kernels.launch import LaunchRecord, record_launches, use_plan

if TYPE_CHECKING:
    from engine.model_runner import Chunk, ModelRunner

__all__ = ["PaddedDecode", "check_inputs"]


@dataclass(frozen=True, slots=True)
class _Captured:
    graph: torch.cuda.CUDAGraph
    logits: torch.Tensor  # [size, V] float32, rewritten by every replay
    tokens: torch.Tensor  # [size] int64 greedy tokens, rewritten by every replay
    nonfinite: torch.Tensor  # [size] float32 finiteness flags, rewritten by every replay
    launches: tuple[LaunchRecord, ...]


class PaddedDecode:
    """Runs decode steps of a runner padded to its graph batch sizes."""

    def __init__(self, runner: "ModelRunner") -> None:
        self.runner = runner
        self.sizes = runner.config.graph_batch_sizes
        self.widths = runner.config.graph_table_widths
        self.graphs: dict[tuple[int, int], _Captured] = {}  # by (batch size, table width)
        if runner.device.type == "cuda":
            self._capture_all()

    def pad(self, chunks: Sequence["Chunk"], *, tokens_on_device: bool = False) -> PaddedDecodeBatch:
        """The padded batch of a decode step."""
        config = self.runner.config
        return pad_decode(chunks, batch_size=graph_batch_size(len(chunks), self.sizes), page_size=config.page_size,
                          num_pool_pages=config.num_pages, table_widths=self.widths, tokens_on_device=tokens_on_device)

    def run(self, chunks: Sequence["Chunk"], *, tokens_from: tuple[torch.Tensor, Sequence[int]] | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[LaunchRecord]]:
        """``(logits [size, V], greedy tokens [size], finiteness flags [size], launches)``; rows past
        len(chunks) are padding.

        ``tokens_from = (tokens, rows)``: the chunks' tokens are ``tokens[rows[i]]``, a previous
        step's greedy tokens still on the device, copied into the inputs there.
        """
        buffers = self.runner.buffers
        if tokens_from is None:
            batch = buffers.stage_decode(self.pad(chunks))
        else:
            previous_tokens, source_rows = tokens_from
            batch = buffers.stage_decode(self.pad(chunks, tokens_on_device=True), source_rows)
            buffers.gather_tokens(len(chunks), previous_tokens)
        captured = self.graphs.get((batch.input_ids.shape[0], batch.block_table.shape[1]))
        if captured is None:  # the CPU: the same padded batch, eagerly
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
        config = self.runner.config
        pool = torch.cuda.graph_pool_handle()
        # torch's default capture stream is created once per process, on whichever device was
        # current then: capture on a stream of this engine's device
        capture_stream = torch.cuda.Stream()
        # largest first: smaller ones reuse its pool blocks
        for size, width in sorted(((s, w) for s in self.sizes for w in self.widths), reverse=True):
            padding = pad_decode((), batch_size=size, page_size=config.page_size, num_pool_pages=config.num_pages,
                                 table_widths=(width,))
            batch = self.runner.buffers.stage_decode(padding)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.forward(batch, check_metadata=False)  # warm-up: compiles; writes only scratch pages
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            # thread_local: digest worker threads may run meanwhile (they never touch the stream)
            with torch.cuda.graph(graph, pool=pool, stream=capture_stream, capture_error_mode="thread_local"):
                logits, tokens, nonfinite, launches = self.forward(batch, check_metadata=False)
            self.graphs[(size, width)] = _Captured(graph, logits, tokens, nonfinite, tuple(launches))
        torch.cuda.synchronize()



def check_inputs(runner: "ModelRunner", batch: ForwardBatch) -> None:
    """The index checks kernels/ops.py makes before eager launches, on a staged padded batch."""
    kv_pages, page_size = runner.kv.k.shape[1], runner.kv.k.shape[2]
    metadata.check_token_ids(batch.input_ids, runner.model.spec.vocab_size)
    metadata.check_positions(batch.positions, runner.model.cos_sin.shape[0])
    metadata.check_slots(batch.slot_mapping, kv_pages * page_size)
    metadata.check_attention_metadata(batch.query_start_loc, batch.seq_lens, batch.block_table,
                                      batch.input_ids.shape[0], kv_pages, page_size)
