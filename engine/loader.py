"""Loading Hugging Face safetensors checkpoints (single file or sharded index) into engine weights.

Every expected tensor must be present with its exact shape; a missing, misshapen or unexpected
tensor is a :class:`CheckpointError` naming it. q/k/v and gate/up are fused into one weight each
(one matmul launch per projection). The weights digest covers the checkpoint as stored: every
tensor's name, dtype, shape and bytes, in name order, so sharding does not change it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from engine.model_config import ModelConfigError, ModelSpec

__all__ = ["CheckpointError", "LayerWeights", "ModelWeights", "expected_shapes", "read_checkpoint",
           "weights_digest", "load_weights", "checkpoint_files", "INDEX_FILE"]

INDEX_FILE = "model.safetensors.index.json"
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)  # derived buffers some exports carry; recomputed here
_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class CheckpointError(ModelConfigError):
    """A checkpoint's tensors do not match its config.json."""


@dataclass(frozen=True, slots=True)
class LayerWeights:
    input_norm: torch.Tensor  # [H]
    qkv: torch.Tensor  # [(Hq + 2 Hkv) D, H]
    qkv_bias: torch.Tensor | None  # [(Hq + 2 Hkv) D]
    o_proj: torch.Tensor  # [H, Hq D]
    o_bias: torch.Tensor | None  # [H]
    q_norm: torch.Tensor | None  # [D] (Qwen3, Gemma3)
    k_norm: torch.Tensor | None  # [D] (Qwen3, Gemma3)
    post_norm: torch.Tensor  # [H]: post_attention_layernorm
    gate_up: torch.Tensor  # [2 I, H]
    down: torch.Tensor  # [H, I]
    pre_ff_norm: torch.Tensor | None = None  # [H] (Gemma3: pre_feedforward_layernorm)
    post_ff_norm: torch.Tensor | None = None  # [H] (Gemma3: post_feedforward_layernorm)


@dataclass(frozen=True, slots=True)
class ModelWeights:
    embed: torch.Tensor  # [V, H]
    layers: tuple[LayerWeights, ...]
    final_norm: torch.Tensor  # [H]
    lm_head: torch.Tensor  # [V, H] (the embedding itself when tied)


def expected_shapes(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    """Hugging Face tensor names and shapes of a checkpoint of ``spec``."""
    h, q, kv, i, d = spec.hidden_size, spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim, \
        spec.intermediate_size, spec.head_dim
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (spec.vocab_size, h),
                                          "model.norm.weight": (h,)}
    if not spec.tie_word_embeddings:
        shapes["lm_head.weight"] = (spec.vocab_size, h)
    for layer in range(spec.num_layers):
        p = f"model.layers.{layer}."
        shapes.update({
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i)})
        if spec.has_qkv_bias:
            shapes.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)})
        if spec.has_o_proj_bias:
            shapes[p + "self_attn.o_proj.bias"] = (h,)
        if spec.has_qk_norm:
            shapes.update({p + "self_attn.q_norm.weight": (d,), p + "self_attn.k_norm.weight": (d,)})
        if spec.is_gemma3:
            shapes.update({p + "pre_feedforward_layernorm.weight": (h,), p + "post_feedforward_layernorm.weight": (h,)})
    return shapes


def checkpoint_files(model_dir: Path) -> list[Path]:
    """The safetensors files of a checkpoint: those its index names, or every ``*.safetensors``."""
    index = model_dir / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{index}: not a safetensors index with a weight_map ({exc})") from None
        files = [model_dir / name for name in sorted(set(weight_map.values()))]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise CheckpointError(f"{index} names shard(s) that do not exist: {', '.join(missing)}")
        return files
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{model_dir} has no *.safetensors file and no {INDEX_FILE}")
    return files


def read_checkpoint(model_dir: Path, spec: ModelSpec) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint as stored, validated against ``spec``."""
    model_dir = Path(model_dir)
    tensors: dict[str, torch.Tensor] = {}
    for path in checkpoint_files(model_dir):
        try:
            with safe_open(str(path), framework="pt") as f:
                for name in f.keys():
                    if name in tensors:
                        raise CheckpointError(f"tensor {name!r} appears in more than one shard ({path.name})")
                    tensors[name] = f.get_tensor(name)
        except CheckpointError:
            raise
        except Exception as exc:  # safetensors raises its own error types for corrupt files
            raise CheckpointError(f"{path}: cannot read safetensors file ({exc})") from None
    expected = expected_shapes(spec)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise CheckpointError(f"{model_dir}: missing tensor(s) {', '.join(missing[:5])}{more} "
                              f"required by {spec.architecture} config.json")
    allowed_extra = {"lm_head.weight"} if spec.tie_word_embeddings else set()
    unexpected = sorted(n for n in set(tensors) - set(expected) - allowed_extra if not n.endswith(_IGNORED_SUFFIXES))
    if unexpected:
        raise CheckpointError(f"{model_dir}: unexpected tensor(s) {', '.join(unexpected[:5])} "
                              f"for {spec.architecture} with this config.json")
    for name, shape in expected.items():
        tensor = tensors[name]
        if tuple(tensor.shape) != shape:
            raise CheckpointError(f"{model_dir}: tensor {name!r} has shape {tuple(tensor.shape)}, "
                                  f"config.json implies {shape}")
        if tensor.dtype not in _FLOAT_DTYPES:
            raise CheckpointError(f"{model_dir}: tensor {name!r} has dtype {tensor.dtype}, expected a float type")
    return tensors


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    """``sha256:<hex>`` over every tensor's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        header = f"{name}\0{str(tensor.dtype).removeprefix('torch.')}\0{list(tensor.shape)}\0"
        h.update(header.encode("utf-8"))
        h.update(tensor.view(torch.uint8).numpy().data if tensor.numel() else b"")
    return "sha256:" + h.hexdigest()


def load_weights(model_dir: Path, spec: ModelSpec, *, dtype: torch.dtype, device: torch.device | str
                 ) -> tuple[ModelWeights, str]:
    """Read, validate, digest, fuse, cast and place the weights; returns (weights, weights digest)."""
    raw = read_checkpoint(model_dir, spec)
    digest = weights_digest(raw)

    def get(name: str) -> torch.Tensor:
        return raw[name].to(device=device, dtype=dtype).contiguous()

    layers = []
    for layer in range(spec.num_layers):
        p = f"model.layers.{layer}."
        attn = p + "self_attn."
        bias = (torch.cat([get(attn + f"{x}_proj.bias") for x in "qkv"]).contiguous()
                if spec.has_qkv_bias else None)
        layers.append(LayerWeights(
            input_norm=get(p + "input_layernorm.weight"),
            qkv=torch.cat([get(attn + f"{x}_proj.weight") for x in "qkv"]).contiguous(), qkv_bias=bias,
            o_proj=get(attn + "o_proj.weight"),
            o_bias=get(attn + "o_proj.bias") if spec.has_o_proj_bias else None,
            q_norm=get(attn + "q_norm.weight") if spec.has_qk_norm else None,
            k_norm=get(attn + "k_norm.weight") if spec.has_qk_norm else None,
            post_norm=get(p + "post_attention_layernorm.weight"),
            gate_up=torch.cat([get(p + "mlp.gate_proj.weight"), get(p + "mlp.up_proj.weight")]).contiguous(),
            down=get(p + "mlp.down_proj.weight"),
            pre_ff_norm=get(p + "pre_feedforward_layernorm.weight") if spec.is_gemma3 else None,
            post_ff_norm=get(p + "post_feedforward_layernorm.weight") if spec.is_gemma3 else None))
    embed = get("model.embed_tokens.weight")
    lm_head = embed if spec.tie_word_embeddings else get("lm_head.weight")
    return ModelWeights(embed=embed, layers=tuple(layers), final_norm=get("model.norm.weight"),
                        lm_head=lm_head), digest
