"""An independent float64 reference of Gemma3ForCausalLM's forward pass, for fidelity evidence.

Plain torch on the CPU, as engine/reference.py is for the Llama family: it reads config.json
and the safetensors itself (no engine code) and recomputes every position from scratch as
transformers' Gemma3 classes do: the embedding times sqrt(hidden_size) rounded to the
checkpoint's dtype, Gemma3RMSNorm's ``x * rsqrt(mean(x^2) + eps) * (1 + w)``, q/k norms before
RoPE, per-layer sliding or full attention with per-layer RoPE bases, the post-attention,
pre- and post-feedforward norms, GeGLU with tanh-GELU, query_pre_attn_scalar, and final logit
softcapping when set (transformers' Gemma3 never applies attn_logit_softcapping; the engine refuses it). A semantic yardstick (closeness within a tolerance), never a
determinism witness.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from engine.reference_ops import linear, rms_norm, rope, rope_inv_freq

__all__ = ["Gemma3Reference"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _inv_freq(head_dim: int, params: dict[str, Any]) -> torch.Tensor:
    inv_freq = rope_inv_freq(params["rope_theta"], head_dim)
    kind = params.get("rope_type", params.get("type", "default"))
    assert kind in ("default", "linear"), f"reference does not implement Gemma3 rope type {kind!r}"
    return inv_freq / params["factor"] if kind == "linear" else inv_freq


class Gemma3Reference:
    """Float64 Hugging Face Gemma3 text forward over a token sequence."""

    def __init__(self, config: dict[str, Any], weights: dict[str, torch.Tensor]) -> None:
        c = config
        self.config, self.w = c, weights
        self.num_layers = c.get("num_hidden_layers", 26)
        self.num_heads = c.get("num_attention_heads", 8)
        self.num_kv_heads = c.get("num_key_value_heads", 4)
        self.head_dim = c.get("head_dim", 256)
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.scaling = c.get("query_pre_attn_scalar", 256) ** -0.5
        self.window = c.get("sliding_window", 4096)
        self.final_cap = c.get("final_logit_softcapping")
        pattern = c.get("sliding_window_pattern", 6)
        self.layer_types = c.get("layer_types") or [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(self.num_layers)]
        params = c.get("rope_parameters")
        if params is None:  # the transformers 4 layout
            params = {"full_attention": {**(c.get("rope_scaling") or {}), "rope_theta": c.get("rope_theta", 1e6)},
                      "sliding_attention": {"rope_theta": c.get("rope_local_base_freq", 1e4)}}
        self.inv_freq = {t: _inv_freq(self.head_dim, params[t]) for t in set(self.layer_types)}
        dtype = _DTYPES[c.get("torch_dtype", c.get("dtype", "float32"))]
        # Gemma3TextScaledWordEmbedding: the scale cast to the table's dtype before the multiply
        self.embed_scale = float(torch.tensor(c["hidden_size"] ** 0.5).to(dtype))
        if c.get("tie_word_embeddings", True):
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, 1.0 + weight, self.eps)

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return linear(x, self.w, name)

    @torch.no_grad()
    def logits(self, token_ids: Sequence[int]) -> torch.Tensor:
        """``[T, V]`` float64 logits of every position of ``token_ids``."""
        ids = torch.tensor(list(token_ids), dtype=torch.long)
        n, hq, hkv, d = len(ids), self.num_heads, self.num_kv_heads, self.head_dim
        positions = torch.arange(n)
        distance = positions[:, None] - positions[None, :]  # [q, k]: i - j
        masks = {"full_attention": distance >= 0, "sliding_attention": (distance >= 0) & (distance < self.window)}
        h = self.w["model.embed_tokens.weight"][ids] * self.embed_scale
        for layer, layer_type in enumerate(self.layer_types):
            p = f"model.layers.{layer}."
            x = self._norm(h, self.w[p + "input_layernorm.weight"])
            q = self._norm(self._linear(x, p + "self_attn.q_proj").view(n, hq, d), self.w[p + "self_attn.q_norm.weight"])
            k = self._norm(self._linear(x, p + "self_attn.k_proj").view(n, hkv, d), self.w[p + "self_attn.k_norm.weight"])
            inv_freq = self.inv_freq[layer_type]
            q, k = rope(q, positions, inv_freq), rope(k, positions, inv_freq)
            v = self._linear(x, p + "self_attn.v_proj").view(n, hkv, d)
            k, v = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q, k) * self.scaling
            scores = scores.masked_fill(~masks[layer_type], float("-inf"))
            attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, hq * d)
            h = h + self._norm(self._linear(attn, p + "self_attn.o_proj"), self.w[p + "post_attention_layernorm.weight"])
            x = self._norm(h, self.w[p + "pre_feedforward_layernorm.weight"])
            gate = torch.nn.functional.gelu(self._linear(x, p + "mlp.gate_proj"), approximate="tanh")
            mlp = self._linear(gate * self._linear(x, p + "mlp.up_proj"), p + "mlp.down_proj")
            h = h + self._norm(mlp, self.w[p + "post_feedforward_layernorm.weight"])
        logits = self._linear(self._norm(h, self.w["model.norm.weight"]), "lm_head")
        if self.final_cap:
            logits = torch.tanh(logits / self.final_cap) * self.final_cap
        return logits
