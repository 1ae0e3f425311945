"""CUDA graphs of a runner's padded steps, shared by padded decode (engine/cuda_graphs.py) and padded
mixed steps (engine/mixed_graphs.py).

A padded step is the forward under the runner's plan plus the greedy argmax; a padded decode step
on CUDA also takes its tokens from, and puts its outputs into, the host-logits device slots
staged with it (:class:`DecodeIO`, kernels/step_io.py). To capture a shape:
stage an all-padding step (it touches only scratch pages), run it once eagerly (Triton compiles
there, never during capture), then capture it into one graph; all graphs of a set share one
memory pool and keep their outputs. With ``graph_capture="startup"`` every shape is captured
before the first step, largest first (smaller ones reuse its pool blocks); with ``"on_demand"`` a
shape is captured in the first step that needs it, after the device has finished everything
queued before (so nothing in flight reads the buffers the padding step is staged into), and
before that step is staged. A step staged into the same buffers replays the graph of its shape:
the kernels, launch configurations and tensor addresses are the captured ones, so the launches
recorded at capture are the step's launches (check mode reads them). Metadata checks read index
tensors back to the host, which a graph cannot do: in check mode they run on the staged step
before each replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generic, Hashable, Iterable, TypeVar

import torch

from engine.model import ForwardBatch
from engine.sampler import greedy_tokens
from kernels import metadata
from kernels.launch import LaunchRecord, record_launches, use_plan
from kernels.step_io import DeviceSlots, put_outputs, take_tokens

if TYPE_CHECKING:
    from engine.model_runner import ModelRunner

__all__ = ["Captured", "DecodeIO", "GraphSet", "StepOutputs", "check_inputs", "padded_forward", "run_padded"]

Shape = TypeVar("Shape", bound=Hashable)
# (logits [S, V] float32, greedy tokens [S] int64, finiteness flags [T] float32, launches): S sampled
# rows and T forward rows of the padded shape, padding after the real ones
StepOutputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[LaunchRecord]]


@dataclass(frozen=True, slots=True)
class Captured:
    """A captured padded step and the outputs every replay rewrites."""

    graph: torch.cuda.CUDAGraph
    logits: torch.Tensor  # [S, V] float32
    tokens: torch.Tensor  # [S] int64 greedy tokens
    nonfinite: torch.Tensor  # [T] float32 finiteness flags
    launches: tuple[LaunchRecord, ...]


@dataclass(frozen=True, slots=True)
class DecodeIO:
    """Where a padded decode step on CUDA takes its tokens from and puts its outputs (kernels/step_io.py)."""

    source_rows: torch.Tensor  # [max_num_seqs] int64, staged: each row's row in the earlier step, or -1
    slots: torch.Tensor  # [2] int64, staged: the device slot written, the slot the tokens come from
    device_slots: DeviceSlots  # the host-logits device slots


@torch.inference_mode()
def padded_forward(runner: "ModelRunner", batch: ForwardBatch, *, check_metadata: bool,
                   io: DecodeIO | None = None) -> StepOutputs:
    """The padded forward, eagerly (what a graph captures), with each sampled row's greedy token.

    With ``io`` (decode steps on CUDA) the rows taking their token from the earlier step's
    device slot get it first, and the outputs go to the staged device slot last.
    """
    num_rows = batch.input_ids.shape[0]
    if io is not None:
        take_tokens(batch.input_ids, io.source_rows[:num_rows], io.slots, io.device_slots)
    with use_plan(runner.plan, check_metadata=check_metadata), record_launches() as launches:
        logits, nonfinite = runner.model.forward(batch, runner.kv)
    tokens = greedy_tokens(logits)
    if io is not None:
        put_outputs(logits, tokens, batch.input_ids, nonfinite, io.slots, io.device_slots)
    return logits, tokens, nonfinite, launches


def run_padded(runner: "ModelRunner", captured: Captured | None, batch: ForwardBatch,
               io: DecodeIO | None = None) -> StepOutputs:
    """Replay ``captured`` on the staged ``batch``; with no graph (the CPU), the same padded step eagerly."""
    if captured is None:
        return padded_forward(runner, batch, check_metadata=runner.check_metadata, io=io)
    if runner.check_metadata:
        check_inputs(runner, batch)
    captured.graph.replay()
    return captured.logits, captured.tokens, captured.nonfinite, list(captured.launches)


class GraphSet(Generic[Shape]):
    """The graphs of one kind of padded step, one per shape, captured at start-up or on demand."""

    def __init__(self, runner: "ModelRunner", shapes: Iterable[Shape], stage: Callable[[Shape], ForwardBatch],
                 *, on_demand: bool, io: DecodeIO | None = None) -> None:
        """``shapes`` largest first; ``stage(shape)`` stages the all-padding step of ``shape`` in the
        buffers replays use (writing no device slot: ``io``'s staged slot -1)."""
        self.runner = runner
        self.io = io
        self.shapes = tuple(shapes)
        self._stage = stage
        self.graphs: dict[Shape, Captured] = {}
        self._pool = torch.cuda.graph_pool_handle()
        # torch's default capture stream is created once per process, on whichever device was
        # current then: capture on a stream of this engine's device
        self._stream = torch.cuda.Stream()
        if not on_demand:
            for shape in self.shapes:
                self._capture(shape)

    def __contains__(self, shape: object) -> bool:
        return shape in self.graphs

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, shape: Shape) -> Captured:
        """The graph of a shape already captured (KeyError for any other)."""
        return self.graphs[shape]

    def values(self) -> Iterable[Captured]:
        """The graphs captured so far, in capture order."""
        return self.graphs.values()

    def get(self, shape: Shape) -> Captured | None:
        """The graph of ``shape`` (captured now if this is its first step; call before staging the
        step), or None for a shape outside the set."""
        if shape not in self.graphs and shape in self.shapes:
            with torch.cuda.device(self.runner.device):
                torch.cuda.synchronize()  # steps in flight may still read the buffers the capture stages into
                self._capture(shape)
        return self.graphs.get(shape)

    def _capture(self, shape: Shape) -> None:
        runner = self.runner
        batch = self._stage(shape)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            # warm-up: compiles; writes only scratch pages
            padded_forward(runner, batch, check_metadata=False, io=self.io)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        # thread_local: digest worker threads may run meanwhile (they never touch the stream)
        with torch.cuda.graph(graph, pool=self._pool, stream=self._stream, capture_error_mode="thread_local"):
            logits, tokens, nonfinite, launches = padded_forward(runner, batch, check_metadata=False, io=self.io)
        torch.cuda.synchronize()
        self.graphs[shape] = Captured(graph, logits, tokens, nonfinite, tuple(launches))


def check_inputs(runner: "ModelRunner", batch: ForwardBatch) -> None:
    """The index checks kernels/ops.py makes before eager launches, on a staged padded batch."""
    kv_pages, page_size = runner.kv.k.shape[1], runner.kv.k.shape[2]
    metadata.check_token_ids(batch.input_ids, runner.model.spec.vocab_size)
    metadata.check_positions(batch.positions, runner.model.cos_sin.shape[0])
    metadata.check_slots(batch.slot_mapping, kv_pages * page_size)
    metadata.check_attention_metadata(batch.query_start_loc, batch.seq_lens, batch.block_table,
                                      batch.input_ids.shape[0], kv_pages, page_size)
    if batch.seq_idx is not None:
        metadata.check_seq_idx(batch.seq_idx, batch.query_start_loc, batch.input_ids.shape[0])
    if batch.is_every_row_sampled:
        metadata.check_every_row_sampled(batch.sample_rows, batch.input_ids.shape[0])
