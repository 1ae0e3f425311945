"""Reading a Hugging Face ``config.json`` of a Llama-family model into a validated :class:`ModelSpec`.

Torch-free. Supported, with the keys and defaults transformers uses: ``LlamaForCausalLM``
(optionally Llama-3 ``rope_scaling``; ``attention_bias`` puts biases on q/k/v and o_proj),
``Qwen2ForCausalLM`` (q/k/v biases), ``Qwen3ForCausalLM`` (per-head q/k RMSNorm, ``head_dim``
defaulting to 128, ``attention_bias`` as Llama's), ``MistralForCausalLM`` (Llama-shaped; a
``sliding_window`` below max_position_embeddings windows every layer) and ``Gemma3ForCausalLM``
(engine/gemma_config.py). RoPE scaling: "llama3" and "linear". Anything the engine would silently
compute differently (other activations, MLP biases, Qwen's ``use_sliding_window``, other RoPE
scalings) is a clear error naming the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.gemma_config import GEMMA3_DEFAULTS, gemma3_fields
from evidence_db.canonical import digest_of
from kernels.shapes import ModelShape

__all__ = ["ModelSpec", "ModelConfigError", "read_model_spec", "SUPPORTED_ARCHITECTURES"]

SUPPORTED_ARCHITECTURES = ("Gemma3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                           "Qwen3ForCausalLM")
GEMMA3 = "Gemma3ForCausalLM"
# transformers' defaults where a config leaves a field out
_DEFAULT_HEAD_DIM = {"Qwen3ForCausalLM": 128}  # others: hidden_size // num_attention_heads
_MISTRAL_DEFAULT_SLIDING_WINDOW = 4096
_ROPE_SCALING_TYPES = ("default", "linear", "llama3")


class ModelConfigError(ValueError):
    """A checkpoint directory or its config.json cannot be served; the message says what and where."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Everything the engine needs to know about a checkpoint's architecture."""

    architecture: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: tuple[tuple[str, Any], ...] | None  # sorted items of a "llama3" rope_scaling
    max_position_embeddings: int
    has_qkv_bias: bool
    has_o_proj_bias: bool
    has_qk_norm: bool  # Qwen3: q and k RMSNorm-ed per head (weights of head_dim) before RoPE
    tie_word_embeddings: bool
    checkpoint_dtype: str  # config's torch_dtype
    eos_token_ids: tuple[int, ...]
    config_digest: str  # digest of the config.json content
    # Per layer: the attention window (0: full causal; a query at i sees key j iff i - W < j <= i);
    # empty: every layer full.
    layer_windows: tuple[int, ...] = ()
    # RoPE of the windowed layers when it differs from rope_theta/rope_scaling (Gemma3's local base)
    sliding_rope_theta: float | None = None
    sliding_rope_scaling: tuple[tuple[str, Any], ...] | None = None
    query_pre_attn_scalar: float = 0.0  # Gemma3: scores scaled by its ** -0.5 (0.0: head_dim ** -0.5)
    final_logit_softcap: float = 0.0  # 0.0: none

    @property
    def is_gemma3(self) -> bool:
        return self.architecture == GEMMA3

    def window(self, layer: int) -> int:
        """Layer ``layer``'s attention window (0: full causal)."""
        return self.layer_windows[layer] if self.layer_windows else 0

    def layer_rope(self, layer: int) -> tuple[float, dict[str, Any] | None]:
        """(theta, scaling) of layer ``layer``'s RoPE."""
        if self.window(layer) and self.sliding_rope_theta is not None:
            return self.sliding_rope_theta, None if self.sliding_rope_scaling is None else dict(self.sliding_rope_scaling)
        return self.rope_theta, self.rope_scaling_dict

    def shape(self, *, page_size: int, dtype: str, check_finite: bool = True) -> ModelShape:
        """The static shape kernel configurations are chosen from (``check_finite``: the kernels
        carry the run-time attention finiteness check)."""
        return ModelShape(hidden_size=self.hidden_size, num_layers=self.num_layers, num_heads=self.num_heads,
                          num_kv_heads=self.num_kv_heads, head_dim=self.head_dim,
                          intermediate_size=self.intermediate_size, vocab_size=self.vocab_size,
                          page_size=page_size, dtype=dtype, has_qkv_bias=self.has_qkv_bias,
                          has_o_proj_bias=self.has_o_proj_bias, has_qk_norm=self.has_qk_norm,
                          tie_word_embeddings=self.tie_word_embeddings, rope_theta=self.rope_theta,
                          rms_norm_eps=self.rms_norm_eps, max_position_embeddings=self.max_position_embeddings,
                          check_finite=check_finite,
                          attention_windows=tuple(sorted({self.window(i) for i in range(self.num_layers)})),
                          norm_offset=self.is_gemma3, embed_scale=self.is_gemma3,
                          activation="gelu_tanh" if self.is_gemma3 else "silu",
                          query_pre_attn_scalar=self.query_pre_attn_scalar, post_norms=self.is_gemma3,
                          final_logit_softcap=self.final_logit_softcap)

    def serving_dtype(self, requested: str | None) -> str:
        """The activation dtype: ``requested``, else the checkpoint's when the kernels support it."""
        if requested is not None:
            return requested
        if self.checkpoint_dtype not in ("float32", "bfloat16"):
            raise ModelConfigError(f"checkpoint dtype {self.checkpoint_dtype!r} is not served directly; "
                                   "pass dtype='float32' or dtype='bfloat16'")
        return self.checkpoint_dtype

    @property
    def rope_scaling_dict(self) -> dict[str, Any] | None:
        return None if self.rope_scaling is None else dict(self.rope_scaling)


def _first_non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    """The dotted name and value of the first NaN or infinity in ``value`` (in document order)."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _first_non_finite(item, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _field(config: dict[str, Any], name: str, kind: type, path: Path, default: Any = None) -> Any:
    value = config.get(name)
    if value is None:  # absent or null: the Hugging Face default, when there is one
        value = default
    if value is None:
        raise ModelConfigError(f"{path}: missing field {name!r}")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ModelConfigError(f"{path}: field {name!r} must be {kind.__name__}, got {value!r}")
    if kind in (int, float) and value <= 0:
        raise ModelConfigError(f"{path}: field {name!r} must be positive, got {value!r}")
    return value


def _rope_fields(config: dict[str, Any], path: Path) -> tuple[dict[str, Any] | None, str]:
    """(the RoPE scaling object or None, the field it came from): transformers 5 writes ``rope_parameters``
    (with ``rope_theta`` inside), earlier versions ``rope_scaling`` (and ``rope_theta`` beside it)."""
    name = "rope_parameters" if config.get("rope_parameters") is not None else "rope_scaling"
    scaling = config.get(name)
    if scaling is not None and not isinstance(scaling, dict):
        raise ModelConfigError(f"{path}: {name} must be an object or null, got {scaling!r}")
    return scaling, name


def _rope_scaling(config: dict[str, Any], path: Path) -> tuple[tuple[str, Any], ...] | None:
    scaling, name = _rope_fields(config, path)
    return _scaling_items(scaling, name, path)


def _scaling_items(scaling: dict[str, Any] | None, name: str, path: Path) -> tuple[tuple[str, Any], ...] | None:
    """The sorted items of a "linear" or "llama3" RoPE scaling object ``name`` (None: no scaling)."""
    if scaling is None:
        return None
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in _ROPE_SCALING_TYPES:
        raise ModelConfigError(f"{path}: {name} type {kind!r} is not supported "
                               f"(supported: {', '.join(_ROPE_SCALING_TYPES)})")
    if kind == "default":
        return None
    if kind == "linear":  # positions divided by factor: inv_freq / factor
        return (("factor", _field(scaling, "factor", float, path)), ("rope_type", "linear"))
    values = {}
    for key in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"):
        values[key] = _field(scaling, key, float, path)
    if values["high_freq_factor"] <= values["low_freq_factor"]:
        raise ModelConfigError(f"{path}: {name} needs high_freq_factor > low_freq_factor, got {scaling}")
    values["rope_type"] = "llama3"
    return tuple(sorted(values.items()))


def _attention_biases(config: dict[str, Any], architecture: str, path: Path) -> tuple[bool, bool]:
    """(q/k/v biases, o_proj bias) as transformers builds each architecture's attention."""
    if architecture == "Qwen2ForCausalLM":
        return True, False
    if architecture == "MistralForCausalLM":  # transformers' Mistral has no attention_bias field
        return False, False
    bias = config.get("attention_bias", False)
    if not isinstance(bias, bool):
        raise ModelConfigError(f"{path}: field 'attention_bias' must be true or false, got {bias!r}")
    return bias, bias


def _layer_windows(config: dict[str, Any], architecture: str, num_layers: int, max_positions: int,
                   path: Path) -> tuple[int, ...]:
    """Per-layer attention windows of a Llama, Qwen or Mistral config (0: full causal)."""
    layer_types = config.get("layer_types")
    if layer_types is not None:
        other = sorted({t for t in layer_types if t != "full_attention"}) if isinstance(layer_types, list) else \
            [layer_types]
        if other:
            raise ModelConfigError(f"{path}: layer_types has {', '.join(map(repr, other))}; {architecture} "
                                   "layers must all be 'full_attention' (per-layer windows are read for Gemma3 only)")
    if architecture in ("Qwen2ForCausalLM", "Qwen3ForCausalLM"):
        if config.get("use_sliding_window"):  # sliding_window is ignored unless this is set
            raise ModelConfigError(f"{path}: use_sliding_window=true is not supported for {architecture} "
                                   "(its max_window_layers split of windowed and full layers is not implemented)")
        return ()
    if architecture != "MistralForCausalLM":
        return ()
    # transformers' MistralConfig defaults an absent sliding_window to 4096; null means full attention
    window = config["sliding_window"] if "sliding_window" in config else _MISTRAL_DEFAULT_SLIDING_WINDOW
    if window is None:
        return ()
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        raise ModelConfigError(f"{path}: field 'sliding_window' must be a positive integer or null, got {window!r}")
    # a window at least as long as any position is full causal attention
    return (window,) * num_layers if window < max_positions else ()


def read_model_spec(model_dir: Path) -> ModelSpec:
    """Parse and validate ``model_dir/config.json``."""
    model_dir = Path(model_dir)
    path = model_dir / "config.json"
    if not model_dir.is_dir():
        raise ModelConfigError(f"model directory {model_dir} does not exist",)
    if not path.is_file():
        raise ModelConfigError(f"{model_dir} has no config.json; expected a Hugging Face checkpoint directory "
                               "(create one with `bitcase model make --preset tiny DIR`)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelConfigError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ModelConfigError(f"{path}: top level must be an object")
    # Python's parser accepts NaN, Infinity and overflowing numbers such as 1e999; JSON has none of them
    non_finite = _first_non_finite(config)
    if non_finite is not None:
        raise ModelConfigError(f"{path}: field {non_finite[0]!r} is {non_finite[1]!r}, which is not a JSON number; "
                               f"write a finite value (or remove the field to take its default)")
    config_digest = digest_of(config)  # of the file as written, before any default is applied
    architectures = config.get("architectures") or []
    if len(architectures) != 1 or architectures[0] not in SUPPORTED_ARCHITECTURES:
        raise ModelConfigError(f"{path}: architecture {architectures!r} is not supported "
                               f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
    architecture = architectures[0]
    if architecture == GEMMA3:  # Gemma3 reads hidden_activation (engine/gemma_config.py) and has no MLP bias
        config = {**GEMMA3_DEFAULTS, **config}
    elif config.get("hidden_act", "silu") != "silu":
        raise ModelConfigError(f"{path}: hidden_act {config['hidden_act']!r} is not supported (only 'silu')")
    elif config.get("mlp_bias"):
        raise ModelConfigError(f"{path}: mlp_bias=true is not supported")
    has_qkv_bias, has_o_proj_bias = _attention_biases(config, architecture, path)
    hidden = _field(config, "hidden_size", int, path)
    num_heads = _field(config, "num_attention_heads", int, path)
    num_kv_heads = _field(config, "num_key_value_heads", int, path, default=num_heads)
    head_dim = _field(config, "head_dim", int, path, default=_DEFAULT_HEAD_DIM.get(architecture, hidden // num_heads))
    max_positions = _field(config, "max_position_embeddings", int, path)
    num_layers = _field(config, "num_hidden_layers", int, path)
    if architecture == GEMMA3:
        extra = gemma3_fields(config, num_layers, scaling_of=lambda scaling, name: _scaling_items(scaling, name, path),
                              fail=lambda message: ModelConfigError(f"{path}: {message}"))
    else:
        extra = {"layer_windows": _layer_windows(config, architecture, num_layers, max_positions, path)}
    rope_parameters = config.get("rope_parameters") if isinstance(config.get("rope_parameters"), dict) else {}
    dtype = config.get("torch_dtype", config.get("dtype", "float32"))  # transformers 5 writes "dtype"
    eos = config.get("eos_token_id")
    eos_ids = () if eos is None else tuple(eos) if isinstance(eos, list) else (eos,)
    if any(not isinstance(t, int) or t < 0 for t in eos_ids):
        raise ModelConfigError(f"{path}: eos_token_id must be a non-negative integer or a list of them, got {eos!r}")
    base = {"rope_theta": _field({**config, **rope_parameters}, "rope_theta", float, path, default=10000.0),
            "rope_scaling": _rope_scaling(config, path)} if architecture != GEMMA3 else {}
    spec = ModelSpec(
        architecture=architecture, hidden_size=hidden, num_layers=num_layers, num_heads=num_heads,
        num_kv_heads=num_kv_heads, head_dim=head_dim,
        intermediate_size=_field(config, "intermediate_size", int, path),
        vocab_size=_field(config, "vocab_size", int, path),
        rms_norm_eps=_field(config, "rms_norm_eps", float, path, default=1e-6),
        max_position_embeddings=max_positions, has_qkv_bias=has_qkv_bias, has_o_proj_bias=has_o_proj_bias,
        has_qk_norm=architecture in ("Qwen3ForCausalLM", GEMMA3),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        checkpoint_dtype=str(dtype), eos_token_ids=eos_ids, config_digest=config_digest, **base, **extra)
    if num_heads % num_kv_heads:
        raise ModelConfigError(f"{path}: num_attention_heads {num_heads} is not a multiple of "
                               f"num_key_value_heads {num_kv_heads}")
    if head_dim % 2:
        raise ModelConfigError(f"{path}: head_dim {head_dim} must be even for RoPE")
    return spec
