"""The Gemma3 forward pass over packed rows and a paged KV cache, with :class:`~engine.model.LlamaModel`'s interface.

Gemma3's decoder layer as transformers writes it: the embedding scaled by sqrt(hidden_size)
(rounded to the dtype), every RMSNorm weighing by ``1 + w`` in fp32 (Gemma3RMSNorm), per-head
q/k norms before RoPE, each layer with its own window (sliding or full) and its own RoPE table
(local or global base), the attention and MLP outputs normalised before their residual add
(post_attention / post_feedforward norms, with a pre_feedforward norm before the MLP), GeGLU
with tanh-GELU, and the final logits softcapped when the config says so. Every arithmetic op is
a kernel of the sealed plan, through kernels.ops only; the model only slices, views and gathers.
"""

from __future__ import annotations

from collections import Counter

import torch

from engine.loader import ModelWeights
from engine.model import ForwardBatch, KVCache, attention_kernels, every_row_sampled, token_requests_of
from engine.model_config import ModelSpec
from kernels import configs, ops
from kernels.tensors import dtype_name

__all__ = ["Gemma3Model"]


class Gemma3Model:
    """Weights, the per-layer RoPE tables and the forward pass of a Gemma3ForCausalLM checkpoint."""

    def __init__(self, spec: ModelSpec, weights: ModelWeights, tables: tuple[torch.Tensor, ...]) -> None:
        if len(tables) != spec.num_layers:
            raise ValueError(f"{len(tables)} RoPE tables for {spec.num_layers} layers")
        self.spec = spec
        self.weights = weights
        self.tables = tables  # per layer: [max_model_len, head_dim] float32 (shared between layers of one RoPE)
        self.cos_sin = tables[0]  # every table has max_model_len rows (the position checks read one)
        self.q_width = spec.num_heads * spec.head_dim
        self.kv_width = spec.num_kv_heads * spec.head_dim
        self.scale = (spec.query_pre_attn_scalar or spec.head_dim) ** -0.5  # ModelShape.attention_scale

    def _norm(self, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
        return ops.rms_norm(x, weight, self.spec.rms_norm_eps, residual, offset=True)

    def _head_norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """Gemma3RMSNorm of every head of ``x`` [T, heads, D] -> new [T, heads, D]."""
        rows = x.reshape(-1, x.shape[-1])  # [T * heads, D]: a copy, as the heads are strided views of qkv
        return self._norm(rows, weight)[0].view(x.shape)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, kv: KVCache) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this step's K/V into ``kv``; return ``[S, V]`` float32 logits of the sample rows and
        ``[T]`` float32 finiteness flags, as :meth:`engine.model.LlamaModel.forward` does."""
        spec, w = self.spec, self.weights
        num_tokens = batch.input_ids.shape[0]
        flags = torch.empty(spec.num_layers, num_tokens, spec.num_kv_heads + spec.num_heads, dtype=torch.float32,
                            device=w.embed.device)
        hidden = ops.embedding(batch.input_ids, w.embed, scaled=True)  # [T, H]
        branch = None  # the last layer's normalised MLP output, added to hidden by the next norm
        seq_idx = token_requests_of(batch)  # [T] int32, shared by every layer
        for layer, lw in enumerate(w.layers):
            x, hidden = self._norm(hidden, lw.input_norm) if branch is None else \
                self._norm(branch, lw.input_norm, hidden)  # hidden = hidden + branch, as residual + hidden_states
            qkv = ops.linear(x, lw.qkv, lw.qkv_bias)  # [T, q_width + 2 kv_width]
            q = qkv[:, :self.q_width].view(num_tokens, spec.num_heads, spec.head_dim)
            k = qkv[:, self.q_width:self.q_width + self.kv_width].view(num_tokens, spec.num_kv_heads, spec.head_dim)
            v = qkv[:, self.q_width + self.kv_width:].view(num_tokens, spec.num_kv_heads, spec.head_dim)
            q, k = self._head_norm(q, lw.q_norm), self._head_norm(k, lw.k_norm)  # type: ignore[arg-type]
            # q rotated [T, Hq, D]; k rotated and v written to the layer's cache slots, in one launch
            q = ops.rope_store_kv(q, k, v, batch.positions, self.tables[layer], kv.k[layer], kv.v[layer],
                                  batch.slot_mapping, flags[layer, :, :spec.num_kv_heads])
            attn = ops.paged_attention(q, kv.k[layer], kv.v[layer], batch.block_table, batch.query_start_loc,
                                       batch.seq_lens, self.scale, seq_idx, flags[layer, :, spec.num_kv_heads:],
                                       window=spec.window(layer),
                                       longest_kv_len=batch.longest_kv_len)  # [T, Hq, D]
            attn_out, _ = self._norm(ops.linear(attn.view(num_tokens, self.q_width), lw.o_proj, lw.o_bias),
                                     lw.post_norm)  # post_attention_layernorm, before the residual add
            x, hidden = self._norm(attn_out, lw.pre_ff_norm, hidden)  # type: ignore[arg-type]
            mlp = ops.linear(ops.gelu_tanh_mul(ops.linear(x, lw.gate_up)), lw.down)  # [T, H]
            branch, _ = self._norm(mlp, lw.post_ff_norm)  # type: ignore[arg-type]
        nonfinite = flags.amax(dim=(0, 2))  # [T]
        if batch.sample_rows.shape[0] == 0:
            return torch.empty(0, spec.vocab_size, dtype=torch.float32, device=batch.input_ids.device), nonfinite
        if every_row_sampled(batch):
            last, last_hidden = branch, hidden
        else:
            last = branch.index_select(0, batch.sample_rows)  # type: ignore[union-attr]
            last_hidden = hidden.index_select(0, batch.sample_rows)
        x, _ = self._norm(last, w.final_norm, last_hidden)  # type: ignore[arg-type]
        logits = ops.logits(x, w.lm_head)  # [S, V] float32
        if spec.final_logit_softcap:
            logits = ops.logit_softcap(logits, spec.final_logit_softcap)
        return logits, nonfinite

    def launches_per_forward(self, *, has_logits: bool, one_kernel_attention: bool = False) -> Counter:
        """How many launches of each plan kernel :meth:`forward` makes (check mode compares);
        ``one_kernel_attention``: a launch long enough for kernels/attention_prefill.py (which
        sliding-window layers never take)."""
        spec, dt = self.spec, dtype_name(self.weights.embed.dtype)
        launches: Counter = Counter(embedding=1)

        def linear(n: int, k: int, *, has_bias: bool = False, out_dtype: str = dt) -> None:
            launches.update(c.kernel for c in configs.linear_configs(n=n, k=k, dtype=dt, has_bias=has_bias,
                                                                      out_dtype=out_dtype))

        for layer in range(spec.num_layers):
            linear(self.q_width + 2 * self.kv_width, spec.hidden_size, has_bias=spec.has_qkv_bias)
            linear(spec.hidden_size, self.q_width, has_bias=spec.has_o_proj_bias)
            linear(2 * spec.intermediate_size, spec.hidden_size)
            linear(spec.hidden_size, spec.intermediate_size)
            # input, q heads, k heads, post_attention, pre_feedforward, post_feedforward
            launches["rms_norm"] += 6
            launches.update(["rope_store_kv", "gelu_tanh_mul"]
                            + attention_kernels(one_kernel_attention and not spec.window(layer)))
        if has_logits:
            launches["rms_norm"] += 1
            linear(spec.vocab_size, spec.hidden_size, out_dtype="float32")
            if spec.final_logit_softcap:
                launches["logit_softcap"] += 1
        return launches
