"""The Gemma3 part of reading a config.json: transformers' ``Gemma3TextConfig`` keys and defaults.

Torch-free. ``Gemma3ForCausalLM`` (model_type ``gemma3_text``): per-layer ``layer_types`` (or
the older ``sliding_window_pattern``, default 6: every sixth layer full) of ``sliding_attention``
and ``full_attention`` layers; sliding layers attend to the last ``sliding_window`` keys (default
4096) and rotate with ``rope_local_base_freq`` (default 1e4), full layers with ``rope_theta``
(default 1e6, optionally "linear" ``rope_scaling`` as Gemma3-4B+ use); transformers 5 writes both
into ``rope_parameters`` keyed by layer type. Scores are scaled by ``query_pre_attn_scalar ** -0.5``
(default 256), the MLP is GeGLU with ``gelu_pytorch_tanh``, and ``final_logit_softcapping`` applies
when set. What the engine would compute differently (``use_bidirectional_attention``, another
activation, other RoPE types) is refused naming the field, and so is ``attn_logit_softcapping``:
transformers' Gemma3 attention never applies it (5.17 passes no softcap to its attention
functions), so a config setting it asks for something transformers does not compute.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["GEMMA3_DEFAULTS", "gemma3_fields"]

# Gemma3TextConfig's defaults (transformers 5.17), applied where config.json leaves a key out.
GEMMA3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "attention_bias": False,
    "query_pre_attn_scalar": 256, "sliding_window": 4096, "final_logit_softcapping": None,
    "attn_logit_softcapping": None, "use_bidirectional_attention": False, "eos_token_id": 1,
}
_DEFAULT_PATTERN = 6
_DEFAULT_THETA = {"full_attention": 1_000_000.0, "sliding_attention": 10_000.0}
_LAYER_TYPES = ("full_attention", "sliding_attention")

Fail = Callable[[str], Exception]


def _positive(value: Any, name: str, fail: Fail, *, kind: type = float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int) or value <= 0:
        raise fail(f"field {name!r} must be a positive {'number' if kind is float else 'integer'}, got {value!r}")
    return float(value) if kind is float else value


def _layer_types(config: dict[str, Any], num_layers: int, fail: Fail) -> list[str]:
    types = config.get("layer_types")
    if types is None:  # transformers: layer i is sliding unless (i + 1) is a multiple of the pattern
        pattern = config.get("sliding_window_pattern", _DEFAULT_PATTERN)
        pattern = _positive(pattern, "sliding_window_pattern", fail, kind=int)
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(num_layers)]
    if not isinstance(types, list) or len(types) != num_layers:
        raise fail(f"layer_types must be a list of num_hidden_layers ({num_layers}) entries, got {types!r}")
    other = sorted({str(t) for t in types if t not in _LAYER_TYPES})
    if other:
        raise fail(f"layer_types has {', '.join(map(repr, other))}; supported: {', '.join(_LAYER_TYPES)}")
    return types


def _rope(config: dict[str, Any], fail: Fail,
          scaling_of: Callable[[dict[str, Any] | None, str], Any]) -> dict[str, tuple[float, Any]]:
    """Per layer type: (rope_theta, scaling items or None), from either config layout."""
    params = config.get("rope_parameters")
    is_v5 = params is not None
    if not is_v5:  # transformers 4: rope_scaling (full layers only), rope_theta, rope_local_base_freq
        params = {"full_attention": config.get("rope_scaling"), "sliding_attention": None}
        where = {"full_attention": "rope_scaling", "sliding_attention": "rope_local_base_freq"}
    elif not isinstance(params, dict) or not params or not set(params) <= set(_LAYER_TYPES):
        raise fail(f"rope_parameters must be an object keyed by {' and '.join(_LAYER_TYPES)} for Gemma3, "
                   f"got {params!r}")
    else:  # transformers 5: one object per layer type, rope_theta inside
        where = {t: f"rope_parameters.{t}" for t in _LAYER_TYPES}
    out = {}
    for layer_type in _LAYER_TYPES:
        values = params.get(layer_type)
        if values is not None and not isinstance(values, dict):
            raise fail(f"{where[layer_type]} must be an object or null, got {values!r}")
        values = dict(values or {})
        theta = values.pop("rope_theta", None)
        theta_key = {"full_attention": "rope_theta", "sliding_attention": "rope_local_base_freq"}[layer_type]
        if theta is None:  # transformers falls back to the top-level key, then to Gemma3's default
            theta = config.get(theta_key, _DEFAULT_THETA[layer_type])
        theta = _positive(theta, f"{where[layer_type]}.rope_theta" if is_v5 else theta_key, fail)
        out[layer_type] = (theta, scaling_of(values or None, where[layer_type]))
    return out


def _softcap(config: dict[str, Any], name: str, fail: Fail) -> float:
    value = config.get(name)
    return 0.0 if value is None else _positive(value, name, fail)


def gemma3_fields(config: dict[str, Any], num_layers: int, *, scaling_of: Callable[[dict[str, Any] | None, str], Any],
                  fail: Fail) -> dict[str, Any]:
    """The :class:`~engine.model_config.ModelSpec` fields a Gemma3 config adds (``config`` with
    :data:`GEMMA3_DEFAULTS` applied); ``scaling_of(scaling, where)`` validates one RoPE scaling
    object, ``fail(message)`` is the error to raise."""
    activation = config.get("hidden_activation")
    if activation != "gelu_pytorch_tanh":
        raise fail(f"hidden_activation {activation!r} is not supported for Gemma3 (only 'gelu_pytorch_tanh')")
    if config.get("attn_logit_softcapping") is not None:
        raise fail(f"attn_logit_softcapping {config['attn_logit_softcapping']!r} is not supported for Gemma3: "
                   "transformers' Gemma3 attention ignores it, so the engine would compute something else; "
                   "set it to null (as Gemma3's own configs do)")
    if config.get("use_bidirectional_attention"):
        raise fail("use_bidirectional_attention=true is not supported (the engine's attention is causal)")
    types = _layer_types(config, num_layers, fail)
    window = config.get("sliding_window")
    if "sliding_attention" in types:
        if window is None:
            raise fail("sliding_window is null but layer_types has 'sliding_attention' layers; set a window")
        window = _positive(window, "sliding_window", fail, kind=int)
    rope = _rope(config, fail, scaling_of)
    return {"layer_windows": tuple(window if t == "sliding_attention" else 0 for t in types),
            "rope_theta": rope["full_attention"][0], "rope_scaling": rope["full_attention"][1],
            "sliding_rope_theta": rope["sliding_attention"][0], "sliding_rope_scaling": rope["sliding_attention"][1],
            "query_pre_attn_scalar": _positive(config.get("query_pre_attn_scalar"), "query_pre_attn_scalar", fail),
            "final_logit_softcap": _softcap(config, "final_logit_softcapping", fail)}
