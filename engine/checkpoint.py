"""Writing random-initialised Hugging Face checkpoints of the preset shapes (no weights are downloaded).

Tensor names, shapes and config.json follow the real Hugging Face layouts (``tiny`` as a
LlamaForCausalLM, ``small`` as a Qwen2ForCausalLM with q/k/v biases, ``llama-1b`` as
Llama-3.2-1B including its "llama3" ``rope_scaling``, ``qwen3-tiny``/``qwen3-0.6b`` as a
Qwen3ForCausalLM with q/k norms, ``mistral-tiny``/``mistral-7b`` as a MistralForCausalLM with
``sliding_window`` null, as Mistral-7B-v0.3, ``gemma3-tiny``/``gemma3-1b`` as a Gemma3ForCausalLM:
the tiny one written as transformers 5 writes it (``layer_types``, ``rope_parameters`` per layer
type), the 1B one as Gemma3-1B's own config.json (``sliding_window_pattern``, ``rope_local_base_freq``);
Gemma's norm weights are centred on 0, as it weighs by 1 + w). Values come from one seeded CPU generator
in name order, so a (preset, seed, dtype) always writes the same bytes. Beside the weights goes a
small real tokenizer (``engine.tokenizer_make``) whose vocabulary matches the preset's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from engine.loader import INDEX_FILE, expected_shapes
from engine.model_config import read_model_spec
from engine.tokenizer_make import write_tokenizer
from kernels.shapes import ModelShape, preset

__all__ = ["preset_config", "make_checkpoint", "DEFAULT_MAX_SHARD_BYTES", "PRESET_FAMILIES"]

DEFAULT_MAX_SHARD_BYTES = 5 * 1024**3  # Hugging Face's default shard size
_INIT_STD = 0.02  # initializer_range of the real configs
_NORM_STD = 0.05  # norm weights are 1 + noise, so a wrong norm shows up in fidelity tests

# preset -> model family (config.json's model_type); every preset of kernels.shapes has one
PRESET_FAMILIES = {"tiny": "llama", "small": "qwen2", "llama-1b": "llama", "qwen3-tiny": "qwen3",
                   "qwen3-0.6b": "qwen3", "mistral-tiny": "mistral", "mistral-7b": "mistral",
                   "gemma3-tiny": "gemma3_text", "gemma3-1b": "gemma3_text"}
# Fields each family's real configs carry (Llama-3.2-1B, Qwen2.5, Qwen3-0.6B, Mistral-7B-v0.3).
_FAMILY_FIELDS: dict[str, dict[str, Any]] = {
    "llama": {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "mlp_bias": False,
              "pretraining_tp": 1},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "use_sliding_window": False},
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "sliding_window": None,
              "use_sliding_window": False},
    "mistral": {"architectures": ["MistralForCausalLM"], "sliding_window": None},
    "gemma3_text": {"architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attn_logit_softcapping": None,
                    "final_logit_softcapping": None, "hidden_activation": "gelu_pytorch_tanh", "pad_token_id": 0},
}
# Gemma3-1B's own config.json (transformers 4.50): 5 sliding layers to 1 full, local RoPE base 1e4.
# Its bos/eos are 2 and 1 (and 106); the bundled tokenizer puts eos right after bos.
_GEMMA3_1B_EXTRAS: dict[str, Any] = {
    "bos_token_id": 2, "eos_token_id": 3, "query_pre_attn_scalar": 256, "rope_local_base_freq": 10000.0,
    "sliding_window": 512, "sliding_window_pattern": 6, "cache_implementation": "hybrid",
}
# gemma3-tiny as transformers 5 writes a Gemma3TextConfig: window 32, so CI prompts cross it
_GEMMA3_TINY_EXTRAS: dict[str, Any] = {
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    "query_pre_attn_scalar": 64, "sliding_window": 32, "transformers_version": "5.17.0",
    "rope_parameters": {"full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
                        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
}
_NORM_CENTRE = {"gemma3_text": 0.0}  # others: 1.0
# Qwen3-0.6B's bos/eos are 151643/151645; the bundled tokenizer puts eos right after bos
_QWEN3_0_6B_EXTRAS: dict[str, Any] = {"bos_token_id": 151643, "eos_token_id": 151644}
_LLAMA_3_2_1B_EXTRAS: dict[str, Any] = {
    "bos_token_id": 128000, "eos_token_id": 128001,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}


def preset_config(name: str, *, dtype: str | None = None) -> dict[str, Any]:
    """The config.json of a preset (``dtype`` overrides the preset's)."""
    shape: ModelShape = preset(name)
    dtype = dtype or shape.dtype
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"dtype {dtype!r} is not float32 or bfloat16")
    config: dict[str, Any] = {
        "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
        "hidden_size": shape.hidden_size, "initializer_range": _INIT_STD,
        "intermediate_size": shape.intermediate_size, "max_position_embeddings": shape.max_position_embeddings,
        "num_attention_heads": shape.num_heads, "num_hidden_layers": shape.num_layers,
        "num_key_value_heads": shape.num_kv_heads, "rms_norm_eps": shape.rms_norm_eps, "rope_scaling": None,
        "rope_theta": shape.rope_theta, "tie_word_embeddings": shape.tie_word_embeddings,
        "torch_dtype": dtype, "transformers_version": "4.45.0", "use_cache": True,
        "vocab_size": shape.vocab_size,
    }
    family = PRESET_FAMILIES[name]
    config.update({"model_type": family, **_FAMILY_FIELDS[family]})
    if family != "qwen2":  # Qwen2 configs leave head_dim to hidden_size / num_attention_heads
        config["head_dim"] = shape.head_dim
    if family in ("qwen2", "qwen3"):
        config["max_window_layers"] = shape.num_layers
    if family == "qwen2":
        config["sliding_window"] = shape.max_position_embeddings
    if name == "llama-1b":
        config.update(_LLAMA_3_2_1B_EXTRAS)
    if name == "qwen3-0.6b":
        config.update(_QWEN3_0_6B_EXTRAS)
    if family == "gemma3_text":  # Gemma3TextConfig has hidden_activation, not hidden_act
        del config["hidden_act"]
        config.update(_GEMMA3_1B_EXTRAS if name == "gemma3-1b" else _GEMMA3_TINY_EXTRAS)
        if "rope_parameters" in config:
            del config["rope_theta"], config["rope_scaling"]
            config["dtype"] = config.pop("torch_dtype")  # transformers 5's key
    return config


def _init_tensor(name: str, shape: tuple[int, ...], generator: torch.Generator, dtype: torch.dtype,
                 norm_centre: float) -> torch.Tensor:
    values = torch.randn(shape, generator=generator, dtype=torch.float32)
    if name.endswith("norm.weight"):
        values = norm_centre + _NORM_STD * values
    else:
        values = _INIT_STD * values
    return values.to(dtype).contiguous()


def make_checkpoint(name: str, out_dir: Path, *, seed: int = 0, dtype: str | None = None,
                    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES, tokenizer: bool = True) -> Path:
    """Write config.json and safetensors (sharded with an index above ``max_shard_bytes``) to ``out_dir``.

    With ``tokenizer`` (the default) also tokenizer.json, tokenizer_config.json and generation_config.json.
    """
    if max_shard_bytes <= 0:
        raise ValueError(f"max_shard_bytes must be positive, got {max_shard_bytes}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = preset_config(name, dtype=dtype)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if tokenizer:
        write_tokenizer(out_dir)
    spec = read_model_spec(out_dir)
    torch_dtype = torch.float32 if config.get("torch_dtype", config.get("dtype")) == "float32" else torch.bfloat16
    norm_centre = _NORM_CENTRE.get(config["model_type"], 1.0)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    shards: list[dict[str, torch.Tensor]] = [{}]
    shard_bytes = 0
    for tensor_name, shape in sorted(expected_shapes(spec).items()):
        tensor = _init_tensor(tensor_name, shape, generator, torch_dtype, norm_centre)
        size = tensor.numel() * tensor.element_size()
        if shards[-1] and shard_bytes + size > max_shard_bytes:
            shards.append({})
            shard_bytes = 0
        shards[-1][tensor_name] = tensor
        shard_bytes += size
    for stale in list(out_dir.glob("*.safetensors")) + [out_dir / INDEX_FILE]:
        stale.unlink(missing_ok=True)
    metadata = {"format": "pt"}
    if len(shards) == 1:
        save_file(shards[0], str(out_dir / "model.safetensors"), metadata=metadata)
        return out_dir
    weight_map = {}
    total = 0
    for i, shard in enumerate(shards, start=1):
        file_name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(out_dir / file_name), metadata=metadata)
        for tensor_name, tensor in shard.items():
            weight_map[tensor_name] = file_name
            total += tensor.numel() * tensor.element_size()
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out_dir / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return out_dir
