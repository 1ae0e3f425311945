"""An independent float64 reference of the Llama/Qwen2/Qwen3/Mistral forward pass, for fidelity evidence.

Plain torch on the CPU, no kernels/, no paging, no engine code: it reads config.json and the
safetensors itself and recomputes every position from scratch with causal attention, as
transformers' classes do: biases wherever the checkpoint stores them, Qwen3's per-head q/k
RMSNorm before RoPE, Mistral's sliding window when configured below max_position_embeddings.
A Gemma3 checkpoint gets engine/gemma_reference.py's forward. It is the semantic yardstick
(closeness within a tolerance), never a determinism witness. Qwen's use_sliding_window is refused.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file

from engine.gemma_reference import Gemma3Reference
from engine.reference_ops import linear, rms_norm, rope, rope_inv_freq

__all__ = ["ReferenceModel"]


class ReferenceModel:
    """Float64 Hugging Face Llama-family forward over a token sequence."""

    def __init__(self, model_dir: Path) -> None:
        model_dir = Path(model_dir)
        self.config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        index = model_dir / "model.safetensors.index.json"
        files = (sorted({model_dir / f for f in json.loads(index.read_text())["weight_map"].values()})
                 if index.exists() else sorted(model_dir.glob("*.safetensors")))
        self.w: dict[str, torch.Tensor] = {}
        for f in files:
            self.w.update({k: v.to(torch.float64) for k, v in load_file(str(f)).items()})
        c = self.config
        self.architecture = c["architectures"][0]
        self.gemma3 = Gemma3Reference(c, self.w) if self.architecture == "Gemma3ForCausalLM" else None
        if c.get("use_sliding_window"):
            raise ValueError("reference: use_sliding_window (Qwen's windowed layers) is not implemented")
        # transformers: Mistral's absent sliding_window is 4096 (null: full attention)
        self.window = c.get("sliding_window", 4096) if self.architecture == "MistralForCausalLM" else None
        rope = c.get("rope_parameters") or {}  # transformers 5 keeps rope_theta and the scaling here
        self.num_heads = c["num_attention_heads"]
        self.num_kv_heads = c.get("num_key_value_heads", self.num_heads)
        default_head_dim = 128 if self.architecture == "Qwen3ForCausalLM" else c["hidden_size"] // self.num_heads
        self.head_dim = c.get("head_dim") or default_head_dim
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.inv_freq = None if self.gemma3 else self._inv_freq(rope.get("rope_theta", c.get("rope_theta", 10000.0)),
                                                                rope or c.get("rope_scaling"))
        if c.get("tie_word_embeddings", False):
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]

    def _inv_freq(self, theta: float, scaling: dict | None) -> torch.Tensor:
        inv_freq = rope_inv_freq(theta, self.head_dim)
        kind = None if scaling is None else scaling.get("rope_type", scaling.get("type"))
        if kind in (None, "default"):
            return inv_freq
        if kind == "linear":
            return inv_freq / scaling["factor"]
        assert kind == "llama3", f"reference does not implement rope_scaling {kind!r}"
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        llama = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * llama / factor + smooth * llama
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        return torch.where(medium, smoothed, llama)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, weight, self.eps)

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return linear(x, self.w, name)

    @torch.no_grad()
    def logits(self, token_ids: Sequence[int]) -> torch.Tensor:
        """``[T, V]`` float64 logits of every position of ``token_ids``."""
        if self.gemma3 is not None:
            return self.gemma3.logits(token_ids)
        ids = torch.tensor(list(token_ids), dtype=torch.long)
        n, hq, hkv, d = len(ids), self.num_heads, self.num_kv_heads, self.head_dim
        positions = torch.arange(n)
        mask = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
        if self.window is not None:  # key j is seen by query i iff i - window < j <= i
            mask = mask.masked_fill(positions[:, None] - positions[None, :] >= self.window, float("-inf"))
        h = self.w["model.embed_tokens.weight"][ids]
        for layer in range(self.config["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            x = self._norm(h, self.w[p + "input_layernorm.weight"])
            q = self._linear(x, p + "self_attn.q_proj").view(n, hq, d)
            k = self._linear(x, p + "self_attn.k_proj").view(n, hkv, d)
            if self.architecture == "Qwen3ForCausalLM":  # per head, over head_dim, before RoPE
                q = self._norm(q, self.w[p + "self_attn.q_norm.weight"])
                k = self._norm(k, self.w[p + "self_attn.k_norm.weight"])
            q, k = rope(q, positions, self.inv_freq), rope(k, positions, self.inv_freq)
            v = self._linear(x, p + "self_attn.v_proj").view(n, hkv, d)
            k = k.repeat_interleave(hq // hkv, dim=1)
            v = v.repeat_interleave(hq // hkv, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(d) + mask
            attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, hq * d)
            h = h + self._linear(attn, p + "self_attn.o_proj")
            x = self._norm(h, self.w[p + "post_attention_layernorm.weight"])
            gate = self._linear(x, p + "mlp.gate_proj")
            h = h + self._linear(torch.nn.functional.silu(gate) * self._linear(x, p + "mlp.up_proj"),
                                 p + "mlp.down_proj")
        return self._linear(self._norm(h, self.w["model.norm.weight"]), "lm_head")
