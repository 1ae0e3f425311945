"""The Llama-family forward pass (Llama, Qwen2, Qwen3, Mistral) over packed rows and a paged KV cache
(Gemma3's is engine/gemma_model.py).

Every arithmetic op is a kernel of the sealed plan, through kernels.ops only; the model itself only
slices, views and gathers (exact operations). Rows of different requests are packed along the token dimension;
the kernels' contracts make each row's result independent of the others.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from engine.loader import ModelWeights
from engine.model_config import ModelSpec
from kernels import configs, metadata, ops
from kernels.launch import metadata_checks_enabled
from kernels.tensors import dtype_name

__all__ = ["KVCache", "ForwardBatch", "LlamaModel", "token_requests_of", "every_row_sampled", "attention_kernels"]


@dataclass(frozen=True, slots=True)
class KVCache:
    """Paged K and V for every layer."""

    k: torch.Tensor  # [num_layers, num_pages, page_size, num_kv_heads, head_dim]
    v: torch.Tensor  # [num_layers, num_pages, page_size, num_kv_heads, head_dim]

    @classmethod
    def allocate(cls, spec: ModelSpec, *, num_pages: int, page_size: int, dtype: torch.dtype,
                 device: torch.device | str) -> "KVCache":
        """Zero-filled caches (zeros are never read: attention reads only initialised positions)."""
        shape = (spec.num_layers, num_pages, page_size, spec.num_kv_heads, spec.head_dim)
        return cls(torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))

    @property
    def page_size(self) -> int:
        return self.k.shape[2]


@dataclass(frozen=True, slots=True)
class ForwardBatch:
    """Packed inputs of one forward (all on the model's device)."""

    input_ids: torch.Tensor  # [T] int64
    positions: torch.Tensor  # [T] int64
    slot_mapping: torch.Tensor  # [T] int64: where each row's K/V is written
    block_table: torch.Tensor  # [B, max_pages] int32
    query_start_loc: torch.Tensor  # [B + 1] int32
    seq_lens: torch.Tensor  # [B] int32: KV length including this step's rows
    sample_rows: torch.Tensor  # [S] int64: rows whose logits are returned
    # [T] int32, each token's request (ops.token_requests of query_start_loc), where the step staged it
    seq_idx: torch.Tensor | None = None
    is_every_row_sampled: bool = False  # sample_rows is 0 .. T - 1 (a decode step): no gather needed
    # the longest request's KV length, a host int (0: not known): which attention form a long
    # launch takes follows it (ops.paged_attention), a choice of speed that changes no bits
    longest_kv_len: int = 0


def attention_kernels(one_kernel: bool) -> list[str]:
    """The plan kernels one layer's ops.paged_attention launches: the pair, or the one-kernel form."""
    return ["attention_prefill"] if one_kernel else ["paged_attention", "attention_combine"]


def token_requests_of(batch: ForwardBatch) -> torch.Tensor:
    """[T] int32 each token's request: the staged one (checked where metadata checks run), or computed."""
    num_tokens = batch.input_ids.shape[0]
    if batch.seq_idx is None:
        return ops.token_requests(batch.query_start_loc, num_tokens)
    if metadata_checks_enabled():
        metadata.check_seq_idx(batch.seq_idx, batch.query_start_loc, num_tokens)
    return batch.seq_idx


def every_row_sampled(batch: ForwardBatch) -> bool:
    """Whether the batch says its sample rows are all its rows in order (checked where metadata checks run)."""
    if batch.is_every_row_sampled and metadata_checks_enabled():
        metadata.check_every_row_sampled(batch.sample_rows, batch.input_ids.shape[0])
    return batch.is_every_row_sampled


class LlamaModel:
    """Weights, the RoPE table and the forward pass."""

    def __init__(self, spec: ModelSpec, weights: ModelWeights, cos_sin: torch.Tensor) -> None:
        self.spec = spec
        self.weights = weights
        self.cos_sin = cos_sin  # [max_model_len, head_dim] float32
        self.q_width = spec.num_heads * spec.head_dim
        self.kv_width = spec.num_kv_heads * spec.head_dim
        self.scale = spec.head_dim ** -0.5

    def _head_norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """RMSNorm of every head of ``x`` [T, heads, D] -> new [T, heads, D] (the gather to rows is exact)."""
        rows = x.reshape(-1, x.shape[-1])  # [T * heads, D]: a copy, as the heads are strided views of qkv
        return ops.rms_norm(rows, weight, self.spec.rms_norm_eps)[0].view(x.shape)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, kv: KVCache) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this step's K/V into ``kv``; return ``[S, V]`` float32 logits of the sample rows and
        ``[T]`` float32 finiteness flags, 1.0 for a row that rope_store_kv or attention flagged in some
        layer (kernels/finiteness.py; all 0.0 when the plan is sealed without the check)."""
        spec, w = self.spec, self.weights
        num_tokens = batch.input_ids.shape[0]
        # Every element is written by one layer's rope_store_kv or attention (flags[l, t, :Hkv] and
        # [l, t, Hkv:]), so nothing needs clearing, also in a replayed graph.
        flags = torch.empty(spec.num_layers, num_tokens, spec.num_kv_heads + spec.num_heads, dtype=torch.float32,
                            device=w.embed.device)
        hidden = ops.embedding(batch.input_ids, w.embed)  # [T, H]
        residual = None
        seq_idx = token_requests_of(batch)  # [T] int32, shared by every layer
        for layer, lw in enumerate(w.layers):
            x, residual = ops.rms_norm(hidden, lw.input_norm, spec.rms_norm_eps, residual)
            qkv = ops.linear(x, lw.qkv, lw.qkv_bias)  # [T, q_width + 2 kv_width]
            q = qkv[:, :self.q_width].view(num_tokens, spec.num_heads, spec.head_dim)
            k = qkv[:, self.q_width:self.q_width + self.kv_width].view(num_tokens, spec.num_kv_heads, spec.head_dim)
            v = qkv[:, self.q_width + self.kv_width:].view(num_tokens, spec.num_kv_heads, spec.head_dim)
            if lw.q_norm is not None:  # Qwen3: each head RMSNorm-ed over head_dim (one row per head) before RoPE
                q = self._head_norm(q, lw.q_norm)
                k = self._head_norm(k, lw.k_norm)  # type: ignore[arg-type]
            # q rotated [T, Hq, D]; k rotated and v written to the layer's cache slots, in one launch
            q = ops.rope_store_kv(q, k, v, batch.positions, self.cos_sin, kv.k[layer], kv.v[layer],
                                  batch.slot_mapping, flags[layer, :, :spec.num_kv_heads])
            attn = ops.paged_attention(q, kv.k[layer], kv.v[layer], batch.block_table, batch.query_start_loc,
                                       batch.seq_lens, self.scale, seq_idx, flags[layer, :, spec.num_kv_heads:],
                                       window=spec.window(layer),  # Mistral's window, or 0
                                       longest_kv_len=batch.longest_kv_len)  # [T, Hq, D]
            if lw.o_bias is None:  # [T, H], or a split-K weight's partials, which the next residual norm folds
                hidden = ops.linear_unfolded(attn.view(num_tokens, self.q_width), lw.o_proj)
            else:  # the fold adds no bias: the biased projection is folded by its own combine
                hidden = ops.linear(attn.view(num_tokens, self.q_width), lw.o_proj, lw.o_bias)  # [T, H]
            x, residual = ops.rms_norm(hidden, lw.post_norm, spec.rms_norm_eps, residual)
            hidden = ops.linear_unfolded(ops.gate_up_silu_mul(x, lw.gate_up), lw.down)
        nonfinite = flags.amax(dim=(0, 2))  # [T]
        # Only sampled rows need the final norm and the vocabulary projection (row-wise ops).
        if batch.sample_rows.shape[0] == 0:
            return torch.empty(0, spec.vocab_size, dtype=torch.float32, device=batch.input_ids.device), nonfinite
        if every_row_sampled(batch):
            last, last_residual = hidden, residual
        else:
            last = ops.select_rows(hidden, batch.sample_rows)  # [S, H] or its partials
            last_residual = residual.index_select(0, batch.sample_rows)  # type: ignore[union-attr]
        x, _ = ops.rms_norm(last, w.final_norm, spec.rms_norm_eps, last_residual)
        return ops.logits(x, w.lm_head), nonfinite  # [S, V] float32, [T] float32

    def launches_per_forward(self, *, has_logits: bool, one_kernel_attention: bool = False) -> Counter:
        """How many launches of each plan kernel :meth:`forward` makes (check mode compares);
        ``one_kernel_attention``: a launch long enough for kernels/attention_prefill.py (which
        sliding-window layers never take)."""
        spec, dt = self.spec, dtype_name(self.weights.embed.dtype)
        launches: Counter = Counter(embedding=1)

        def linear(n: int, k: int, *, unfolded: bool = False, out_dtype: str = dt) -> bool:
            """Count one projection's launches; True when it leaves partials for the next norm."""
            planned = configs.linear_configs(n=n, k=k, dtype=dt, has_bias=False, out_dtype=out_dtype)
            launches.update(c.kernel for c in (planned[:1] if unfolded and len(planned) > 1 else planned))
            return unfolded and len(planned) > 1

        def norm(folds: bool) -> None:
            launches["matmul_combine_norm" if folds else "rms_norm"] += 1

        down_folds = False
        for layer in range(spec.num_layers):
            norm(layer > 0 and down_folds)
            linear(self.q_width + 2 * self.kv_width, spec.hidden_size)
            launches["rms_norm"] += 2 * spec.has_qk_norm  # Qwen3: q and k heads, one launch each
            launches.update(["rope_store_kv"] + attention_kernels(one_kernel_attention and not spec.window(layer)))
            norm(linear(spec.hidden_size, self.q_width, unfolded=not spec.has_o_proj_bias))
            if configs.matmul_silu_configs(intermediate_size=spec.intermediate_size, k=spec.hidden_size, dtype=dt):
                launches["matmul_silu"] += 1
            else:
                linear(2 * spec.intermediate_size, spec.hidden_size)
                launches["silu_mul"] += 1
            down_folds = linear(spec.hidden_size, spec.intermediate_size, unfolded=True)
        if has_logits:
            norm(down_folds)
            linear(spec.vocab_size, spec.hidden_size, out_dtype="float32")
        return launches
