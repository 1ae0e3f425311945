"""Turns a step plan into packed kernel inputs, runs the forward under the sealed plan, returns logits.

Step inputs are staged in buffers preallocated for the engine limits (max_num_batched_tokens
rows, max_num_seqs requests, max_pages_per_seq columns) and copied to the device in one go per
tensor, so a later CUDA-graph decode path can capture fixed addresses. The block table always
has max_pages_per_seq columns: no tensor shape depends on another request's length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from engine.config import EngineConfig
from engine.loader import load_weights
from engine.model import ForwardBatch, KVCache, LlamaModel
from engine.model_config import ModelSpec
from engine.rope import cos_sin_table
from kernels.launch import LaunchRecord, record_launches, use_plan
from kernels.plan import SealedPlan, plan_for

__all__ = ["Chunk", "ModelRunner", "TORCH_DTYPES"]

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True, slots=True)
class Chunk:
    """Rows ``[start, end)`` of one request, the layout they use, and whether the last row is sampled."""

    token_ids: Sequence[int]
    page_table: Sequence[int]
    start: int
    end: int
    is_sampled: bool


def _pack(chunks: Sequence[Chunk], page_size: int, max_pages: int) -> dict[str, torch.Tensor]:
    """Host tensors of a ForwardBatch for ``chunks`` (plain Python, exact integers)."""
    ids: list[int] = []
    positions: list[int] = []
    slots: list[int] = []
    table = torch.zeros(len(chunks), max_pages, dtype=torch.int32)
    starts = [0]
    lens: list[int] = []
    sample_rows: list[int] = []
    for b, c in enumerate(chunks):
        ids.extend(c.token_ids[c.start:c.end])
        positions.extend(range(c.start, c.end))
        slots.extend(c.page_table[p // page_size] * page_size + p % page_size for p in range(c.start, c.end))
        table[b, :len(c.page_table)] = torch.tensor(list(c.page_table), dtype=torch.int32)
        starts.append(starts[-1] + c.end - c.start)
        lens.append(c.end)
        if c.is_sampled:
            sample_rows.append(starts[-1] - 1)
    return {"input_ids": torch.tensor(ids, dtype=torch.int64), "positions": torch.tensor(positions, dtype=torch.int64),
            "slot_mapping": torch.tensor(slots, dtype=torch.int64), "block_table": table,
            "query_start_loc": torch.tensor(starts, dtype=torch.int32), "seq_lens": torch.tensor(lens, dtype=torch.int32),
            "sample_rows": torch.tensor(sample_rows, dtype=torch.int64)}


class ModelRunner:
    """Owns the model, the KV cache, the sealed plan and the staging buffers."""

    def __init__(self, model_dir: Path, spec: ModelSpec, config: EngineConfig, dtype: str) -> None:
        self.config = config
        self.device = torch.device(config.device)
        self.dtype = TORCH_DTYPES[dtype]
        weights, self.weights_digest = load_weights(model_dir, spec, dtype=self.dtype, device=self.device)
        cos_sin = cos_sin_table(spec.head_dim, spec.rope_theta, spec.rope_scaling_dict, config.max_model_len)
        self.model = LlamaModel(spec, weights, cos_sin.to(self.device))
        self.kv = KVCache.allocate(spec, num_pages=config.num_pages, page_size=config.page_size,
                                   dtype=self.dtype, device=self.device)
        self.plan: SealedPlan = plan_for(spec.shape(page_size=config.page_size, dtype=dtype))
        # Index checks read tensors back to the host: always on the CPU, in check mode on CUDA.
        self.check_metadata = config.check_mode or self.device.type == "cpu"
        self.last_launches: list[LaunchRecord] = []
        num_rows, num_seqs, max_pages = config.max_num_batched_tokens, config.max_num_seqs, config.max_pages_per_seq
        self._buffers = {
            "input_ids": torch.zeros(num_rows, dtype=torch.int64, device=self.device),
            "positions": torch.zeros(num_rows, dtype=torch.int64, device=self.device),
            "slot_mapping": torch.zeros(num_rows, dtype=torch.int64, device=self.device),
            "block_table": torch.zeros(num_seqs, max_pages, dtype=torch.int32, device=self.device),
            "query_start_loc": torch.zeros(num_seqs + 1, dtype=torch.int32, device=self.device),
            "seq_lens": torch.zeros(num_seqs, dtype=torch.int32, device=self.device),
            "sample_rows": torch.zeros(num_seqs, dtype=torch.int64, device=self.device),
        }

    def _stage(self, host: dict[str, torch.Tensor]) -> ForwardBatch:
        views = {}
        for name, tensor in host.items():
            view = self._buffers[name][:tensor.shape[0]]
            view.copy_(tensor, non_blocking=True)
            views[name] = view
        return ForwardBatch(**views)

    def execute(self, chunks: Sequence[Chunk]) -> torch.Tensor:
        """Run one step; ``[S, V]`` float32 logits of the sampled chunks, on the CPU, in chunk order."""
        if len(chunks) > self.config.max_num_seqs or sum(c.end - c.start for c in chunks) > \
                self.config.max_num_batched_tokens:
            raise ValueError("step exceeds the engine limits it was planned under")
        batch = self._stage(_pack(chunks, self.config.page_size, self.config.max_pages_per_seq))
        with use_plan(self.plan, check_metadata=self.check_metadata), record_launches() as launches:
            logits = self.model.forward(batch, self.kv)
        self.last_launches = launches
        return logits.to("cpu")

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
        batch = ForwardBatch(**{name: t.to(self.device) for name, t in host.items()})
        with use_plan(self.plan, check_metadata=self.check_metadata):
            self.model.forward(batch, scratch)
        flat = (self.model.spec.num_layers, num_pages * size, self.model.spec.num_kv_heads, self.model.spec.head_dim)
        return scratch.k.reshape(flat)[:, :len(token_ids)], scratch.v.reshape(flat)[:, :len(token_ids)]
