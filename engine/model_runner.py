"""Turns a step plan into packed kernel inputs, runs the forward under the sealed plan, returns logits.

Step inputs are staged in buffers preallocated for the engine limits (engine/staging.py). The
block table always has max_pages_per_seq columns: no tensor shape depends on another request's
length. With ``cuda_graphs`` on, decode steps (engine/cuda_graphs.py) and mixed steps of up to
max_num_batched_tokens rows without prompt logits (engine/mixed_graphs.py) are padded and, on
CUDA, replayed from captured graphs; every other step runs eagerly. On CUDA the sampled rows and
their greedy tokens come back through pinned host slots with the step's only wait
(engine/host_logits.py), with the step's finiteness flags (kernels/finiteness.py), which
:attr:`ModelRunner.last_nonfinite` gives per chunk. A :meth:`ModelRunner.launch` call enqueues a step and a later
:meth:`ModelRunner.collect` reads it, so the engine can launch the next decode step in between, its
tokens taken on the device from the step before.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import torch

from engine.config import EngineConfig
from engine.cuda_graphs import PaddedDecode
from engine.decode_padding import is_decode_step, num_scratch_pages
from engine.mixed_graphs import PaddedMixed
from engine.mixed_padding import num_mixed_scratch_pages
from engine.host_logits import HostFetch, HostLogits
from engine.gemma_model import Gemma3Model
from engine.model import ForwardBatch, KVCache, LlamaModel
from engine.model_config import ModelSpec
from engine.rope import layer_tables
from engine.sampler import greedy_tokens
from engine.staging import StepBuffers
from engine.weight_cache import load_shared
from kernels.launch import LaunchRecord, record_launches, use_plan
from kernels.plan import SealedPlan, plan_for

__all__ = ["Chunk", "Launched", "ModelRunner", "TORCH_DTYPES", "device_scope"]

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True, slots=True)
class Chunk:
    """Rows ``[start, end)`` of one request, the layout they use, and whether the last row is sampled.

    ``prompt_rows = (a, b)``: positions ``a .. b - 1`` (inside the chunk, none of them the sampled
    row) whose logit rows are wanted as well.
    """

    token_ids: Sequence[int]
    page_table: Sequence[int]
    start: int
    end: int
    is_sampled: bool
    prompt_rows: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class Launched:
    """A step whose kernels are enqueued and whose sampled rows are not yet read."""

    num_sampled: int
    logits: torch.Tensor  # [R, V] float32 on the device; the sampled rows, then num_prompt_rows prompt rows
    tokens: torch.Tensor | None  # [R] int64 greedy tokens (None: eager CPU steps, chosen on the host)
    input_ids: torch.Tensor | None  # [R] int64 input tokens of a step whose tokens were taken on the device
    launches: tuple[LaunchRecord, ...]
    fetch: HostFetch | None  # the enqueued copy to pinned host slots (CUDA)
    nonfinite: torch.Tensor  # [T] float32 finiteness flags of the step's rows (padding rows last)
    chunk_rows: tuple[int, ...]  # rows of each chunk, in launch order
    num_prompt_rows: int = 0


def device_scope(device: torch.device) -> contextlib.AbstractContextManager:
    """Make ``device`` the current CUDA device (a no-op on the CPU): streams, events and graphs
    are created and recorded on the current device, which need not be the engine's."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _pack(chunks: Sequence[Chunk], page_size: int, max_pages: int) -> dict[str, torch.Tensor]:
    """Host tensors of a ForwardBatch for ``chunks`` (exact integer arithmetic, vectorised per chunk:
    a prefill chunk of thousands of tokens is packed while the device waits)."""
    lens = [c.end - c.start for c in chunks]
    starts = np.zeros(len(chunks) + 1, dtype=np.int32)
    np.cumsum(lens, out=starts[1:])
    ids, positions, slots = [], [], []
    table = np.zeros((len(chunks), max_pages), dtype=np.int32)
    sample_rows: list[int] = []
    prompt_rows: list[np.ndarray] = []
    for b, c in enumerate(chunks):
        pos = np.arange(c.start, c.end, dtype=np.int64)
        pages = np.asarray(c.page_table, dtype=np.int64)
        ids.append(np.asarray(c.token_ids[c.start:c.end], dtype=np.int64))
        positions.append(pos)
        slots.append(pages[pos // page_size] * page_size + pos % page_size)
        table[b, :len(pages)] = pages
        if c.is_sampled:
            sample_rows.append(int(starts[b + 1]) - 1)
        prompt_rows.append(np.arange(*c.prompt_rows, dtype=np.int64) + (int(starts[b]) - c.start))
    # after every sampled row: the sampled rows keep their indices
    rows = np.concatenate([np.asarray(sample_rows, dtype=np.int64), *prompt_rows])

    def cat(parts: list[np.ndarray]) -> torch.Tensor:
        return torch.from_numpy(np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64))

    return {"input_ids": cat(ids), "positions": cat(positions), "slot_mapping": cat(slots),
            "block_table": torch.from_numpy(table), "query_start_loc": torch.from_numpy(starts),
            "seq_lens": torch.tensor([c.end for c in chunks], dtype=torch.int32), "sample_rows": torch.from_numpy(rows)}


class ModelRunner:
    """Owns the model, the KV cache, the sealed plan, the step buffers and the decode graphs."""

    def __init__(self, model_dir: Path, spec: ModelSpec, config: EngineConfig, dtype: str) -> None:
        self.config = config
        self.device = torch.device(config.device)
        self.dtype = TORCH_DTYPES[dtype]
        weights, self.weights_digest = load_shared(model_dir, spec, dtype=self.dtype, device=self.device)
        tables = layer_tables(spec, config.max_model_len, self.device)  # per layer, shared where equal
        self.model: LlamaModel | Gemma3Model = Gemma3Model(spec, weights, tables) if spec.is_gemma3 else \
            LlamaModel(spec, weights, tables[0])
        # Pages past the pool, named by no page table: where padding rows of padded steps write.
        self.num_decode_scratch_pages = num_scratch_pages(max(config.graph_batch_sizes, default=0), config.page_size)
        self.num_scratch_pages = self.num_decode_scratch_pages + \
            num_mixed_scratch_pages(max(config.graph_token_buckets, default=0), config.page_size)
        self.kv = KVCache.allocate(spec, num_pages=config.num_pages + self.num_scratch_pages,
                                   page_size=config.page_size, dtype=self.dtype, device=self.device)
        self.plan: SealedPlan = plan_for(spec.shape(page_size=config.page_size, dtype=dtype,
                                                    check_finite=config.check_finite))
        # Index checks read tensors back to the host: always on the CPU, in check mode on CUDA.
        self.check_metadata = config.check_mode or self.device.type == "cpu"
        self.last_launches: list[LaunchRecord] = []
        self.num_padded_mixed_steps = 0  # steps with prefill rows run padded to a graph shape
        self.last_greedy_tokens: list[int] | None = None  # the device's greedy choice per sampled row
        self._last_fetch: HostFetch | None = None
        self.last_input_tokens: list[int] | None = None  # per row, of a step that took its tokens on the device
        self._no_prompt_rows = torch.empty(0, spec.vocab_size)
        self.last_prompt_rows = self._no_prompt_rows  # [E, V] of the step collected last
        self.last_nonfinite: list[bool] = []  # per chunk of the step collected last: flagged by the check
        self.buffers = StepBuffers(max_num_rows=config.max_num_batched_tokens, max_num_seqs=config.max_num_seqs,
                                   max_pages_per_seq=config.max_pages_per_seq, device=self.device)
        with device_scope(self.device):  # streams, events and graphs belong to the engine's device
            self.host_logits = (HostLogits(max_num_rows=config.max_num_seqs, vocab_size=spec.vocab_size,
                                           max_num_flags=max(config.max_num_batched_tokens, config.max_num_seqs))
                                if self.device.type == "cuda" else None)
            self.padded_decode = PaddedDecode(self) if config.cuda_graphs else None
            self.padded_mixed = PaddedMixed(self, _pack) if config.cuda_graphs else None

    def execute(self, chunks: Sequence[Chunk], *, while_running: Callable[[], None] | None = None) -> torch.Tensor:
        """Run one step: :meth:`launch`, ``while_running()``, then :meth:`collect`."""
        launched = self.launch(chunks)
        if while_running is not None:
            while_running()
        return self.collect(launched)

    def launch(self, chunks: Sequence[Chunk], *, tokens_from: tuple[Launched, Sequence[int]] | None = None
               ) -> Launched:
        """Enqueue one step's kernels and the copy of its sampled rows to the host (CUDA).

        ``tokens_from = (launched, rows)`` launches a decode step whose chunk ``i`` takes as
        its one token the greedy token of row ``rows[i]`` of the earlier step ``launched``,
        read on the device; the chunks' ``token_ids`` need not hold it yet.
        """
        if len(chunks) > self.config.max_num_seqs or sum(c.end - c.start for c in chunks) > \
                self.config.max_num_batched_tokens:
            raise ValueError("step exceeds the engine limits it was planned under")
        num_sampled = sum(1 for c in chunks if c.is_sampled)
        num_prompt_rows = sum(max(0, c.prompt_rows[1] - c.prompt_rows[0]) for c in chunks)
        input_ids, fetch = None, None
        if self.padded_decode is not None and is_decode_step(chunks, self.padded_decode.sizes):
            (logits, tokens, nonfinite, launches), fetch = self.padded_decode.run(chunks, tokens_from=tokens_from)
            if tokens_from is not None:
                input_ids = self.buffers.decode.device["input_ids"]
        elif tokens_from is not None:
            raise ValueError("only padded decode steps take their tokens from an earlier step")
        elif self.padded_mixed is not None and (shape := self.padded_mixed.shape(chunks)) is not None:
            logits, tokens, nonfinite, launches = self.padded_mixed.run(chunks, shape)
            self.num_padded_mixed_steps += 1
        else:
            batch = self.buffers.stage(_pack(chunks, self.config.page_size, self.config.max_pages_per_seq),
                                       longest_kv_len=max(c.end for c in chunks))
            with use_plan(self.plan, check_metadata=self.check_metadata), record_launches() as launches:
                logits, nonfinite = self.model.forward(batch, self.kv)
            tokens = greedy_tokens(logits) if self.host_logits is not None and num_sampled else None
        chunk_rows = tuple(c.end - c.start for c in chunks)
        nonfinite = nonfinite[:sum(chunk_rows)]  # padding rows belong to no request
        if fetch is None and self.host_logits is not None and num_sampled:
            assert tokens is not None
            fetch = self.host_logits.start(logits, tokens, num_sampled, nonfinite, input_ids)
        elif fetch is None and input_ids is not None:  # the CPU: the forward has run, the staged inputs are final
            input_ids = input_ids[:num_sampled].clone()
        return Launched(num_sampled, logits, tokens, input_ids, tuple(launches), fetch, nonfinite, chunk_rows,
                        num_prompt_rows)

    def collect(self, launched: Launched) -> torch.Tensor:
        """``[S, V]`` float32 logits of a launched step's sampled chunks, on the CPU, in chunk order.

        Waits for the step. On CUDA the rows sit in a pinned slot that stays valid until the
        slot comes round again after its readers (:meth:`keep_rows_for`) finish;
        :attr:`last_greedy_tokens` holds the device's greedy token of each row and, for a step
        launched with ``tokens_from``, :attr:`last_input_tokens` the token each row read.
        """
        self.last_launches = list(launched.launches)
        self._last_fetch = launched.fetch
        # [E, V] float32: the prompt rows asked for (rarely wanted: a plain copy, which waits for the step)
        self.last_prompt_rows = self._no_prompt_rows if not launched.num_prompt_rows else \
            launched.logits[launched.num_sampled:launched.num_sampled + launched.num_prompt_rows].to("cpu")
        if launched.fetch is None:
            tokens, inputs = launched.tokens, launched.input_ids
            self.last_greedy_tokens = None if tokens is None else tokens[:launched.num_sampled].tolist()
            self.last_input_tokens = None if inputs is None else inputs.tolist()
            # a step without sampled rows (prefill chunks) waits here; it has no later wait to join
            self._set_nonfinite(launched, launched.nonfinite.to("cpu"))
            return launched.logits[:launched.num_sampled].to("cpu")
        assert self.host_logits is not None
        host, self.last_greedy_tokens, self.last_input_tokens, flags = self.host_logits.wait(launched.fetch)
        self._set_nonfinite(launched, flags)
        return host

    def _set_nonfinite(self, launched: Launched, flags: torch.Tensor) -> None:
        """:attr:`last_nonfinite` from the step's ``[T]`` host flags: whether any row of a chunk is flagged."""
        per_chunk = [False] * len(launched.chunk_rows)
        if flags.numpy().any():  # rare: then find the chunks of the flagged rows
            ends = torch.tensor(launched.chunk_rows, dtype=torch.int64).cumsum(0)
            for chunk in torch.searchsorted(ends, flags.nonzero().flatten(), right=True).tolist():
                per_chunk[chunk] = True
        self.last_nonfinite = per_chunk

    def keep_rows_for(self, readers: Iterable[Future]) -> None:
        """Keep the rows :meth:`collect` returned last until ``readers`` have finished (CUDA slots)."""
        if self.host_logits is not None and self._last_fetch is not None:
            self.host_logits.add_readers(self._last_fetch, readers)

    def cold_kv(self, token_ids: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of every position of ``token_ids`` computed from scratch in a private cache.

        Returns ``k, v`` [num_layers, T, num_kv_heads, head_dim]: the values a cold prefill of
        this history stores, for comparison with what the live cache holds.
        """
        size = self.config.page_size
        num_pages = -(-len(token_ids) // size)
        scratch = KVCache.allocate(self.model.spec, num_pages=num_pages, page_size=size, dtype=self.dtype,
                                   device=self.device)
        chunk = Chunk(token_ids, list(range(num_pages)), 0, len(token_ids), True)
        host = _pack([chunk], size, self.config.max_pages_per_seq)
        batch = ForwardBatch(**{name: t.to(self.device) for name, t in host.items()},
                             longest_kv_len=len(token_ids))
        with use_plan(self.plan, check_metadata=self.check_metadata):
            self.model.forward(batch, scratch)
        flat = (self.model.spec.num_layers, num_pages * size, self.model.spec.num_kv_heads, self.model.spec.head_dim)
        return scratch.k.reshape(flat)[:, :len(token_ids)], scratch.v.reshape(flat)[:, :len(token_ids)]
