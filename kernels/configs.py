"""Launch configurations, chosen only from static shapes.

Every function here takes static shape values (hidden size, head counts, head dim, vocabulary,
page size, the (N, K) of a weight, dtypes) and nothing else: no batch size, token count or KV
length can reach a configuration, so a request's kernels run the same code whatever it is
batched with. The one exception is DESIGN.md §5's M buckets: a matmul of at most DECODE_ROWS
rows, or of at least PREFILL_ROWS[dtype], takes another tile shape with the same BLOCK_K, splits and K order
(decode_matmul_config, prefill_matmul_config).
The plan (kernels/plan.py) and the launch wrappers (kernels/ops.py) call the same functions,
and a launch is refused unless its configuration is in the active plan. They are pure, so they
are memoised: an op pays a dict lookup, not a rebuild, per launch.

This module holds the row-wise kernels' configurations and re-exports the matmuls'
(kernels/matmul_configs.py) and attention's (kernels/attention_configs.py); the type and the
shared helpers are in kernels/launch_config.py. Torch- and Triton-free so the plan, the
verifier and the case loader can import it anywhere.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

# Re-exported: callers read every configuration through kernels.configs.
from kernels.attention_configs import (ATTENTION_KEYS, SEGMENT_TILES, attention_combine_config,  # noqa: F401
                                       attention_keys, decode_attention_config, paged_attention_config,
                                       prefill_attention_config, prefill_combine_heads, takes_prefill_attention)
from kernels.launch_config import (DTYPES, KERNELS, LaunchConfig, _as_float32, _check_dtype, _check_positive,
                                   _is_pow2, _make, _next_pow2, _row_warps, _unchecked)
from kernels.matmul_configs import (COMBINE_COLUMNS, DECODE_ROWS, DEEP_K, MIN_COLUMN_PROGRAMS,  # noqa: F401
                                    PREFILL_ROWS, SPLIT_K, WIDE_N, decode_matmul_config, linear_configs,
                                    matmul_combine_config, matmul_combine_norm_config, matmul_config,
                                    matmul_ranges, matmul_silu_configs, matmul_split_config, matmul_splits,
                                    prefill_matmul_config)

__all__ = [
    "DTYPES",
    "KERNELS",
    "LaunchConfig",
    "embedding_config",
    "rms_norm_config",
    "matmul_config",
    "decode_matmul_config",
    "prefill_matmul_config",
    "matmul_splits",
    "matmul_ranges",
    "matmul_split_config",
    "matmul_combine_config",
    "matmul_combine_norm_config",
    "linear_configs",
    "matmul_silu_configs",
    "rope_store_kv_config",
    "silu_mul_config",
    "gelu_tanh_mul_config",
    "logit_softcap_config",
    "embedding_scale",
    "attention_keys",
    "paged_attention_config",
    "decode_attention_config",
    "attention_combine_config", "prefill_combine_heads",
    "prefill_attention_config", "takes_prefill_attention",
]


def embedding_scale(*, hidden_size: int, dtype: str) -> float:
    """Gemma3's embedding multiplier: sqrt(hidden_size) rounded to ``dtype``, as
    Gemma3TextScaledWordEmbedding casts it to the table's dtype (sqrt(1152) is 34.0 in bfloat16)."""
    value = _as_float32(hidden_size ** 0.5)
    if dtype == "bfloat16":  # round to nearest even on the 16 dropped bits of the float32 pattern
        bits = struct.unpack("I", struct.pack("f", value))[0]
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        value = struct.unpack("f", struct.pack("I", bits))[0]
    return value


@lru_cache(maxsize=None)
def embedding_config(*, vocab_size: int, hidden_size: int, dtype: str, scaled: bool = False) -> LaunchConfig:
    """Embedding gather: one program per token, the whole row in one block. ``scaled`` (Gemma3)
    multiplies each row by :func:`embedding_scale` with one rounding (SCALE; the key ends in ``_scaled``)."""
    _check_positive(vocab_size=vocab_size, hidden_size=hidden_size)
    _check_dtype(dtype)
    block = _next_pow2(hidden_size)
    constexprs: dict[str, Any] = {"H": hidden_size, "BLOCK_H": block}
    if scaled:  # only then: the unscaled entries keep their constexprs and digests
        constexprs.update(SCALE=embedding_scale(hidden_size=hidden_size, dtype=dtype), DTYPE=dtype)
    return _make("embedding", f"v{vocab_size}_h{hidden_size}" + ("_scaled" if scaled else ""), constexprs,
                 _row_warps(block, 8), 1, {"vocab_size": vocab_size, "hidden_size": hidden_size, "dtype": dtype})


@lru_cache(maxsize=None)
def rms_norm_config(*, hidden_size: int, eps: float, has_residual: bool, dtype: str,
                    offset: bool = False) -> LaunchConfig:
    """RMSNorm (optionally fused residual add): one program per token, one block per row.

    ``offset`` (Gemma3RMSNorm): weigh by ``1 + w`` in fp32 with one rounding at the end (OFFSET;
    the key ends in ``_offset``).
    """
    _check_positive(hidden_size=hidden_size)
    _check_dtype(dtype)
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps!r}")
    block = _next_pow2(hidden_size)
    suffix = f"h{hidden_size}" + ("_residual" if has_residual else "") + ("_offset" if offset else "")
    constexprs: dict[str, Any] = {"H": hidden_size, "BLOCK_H": block, "EPS": _as_float32(eps),
                                  "HAS_RESIDUAL": bool(has_residual), "DTYPE": dtype}
    if offset:  # only then: the Llama-style entries keep their constexprs and digests
        constexprs["OFFSET"] = True
    return _make("rms_norm", suffix, constexprs, _row_warps(block, 16), 1, {"hidden_size": hidden_size, "dtype": dtype})


def _gated_config(kernel: str, intermediate_size: int, dtype: str) -> LaunchConfig:
    """An ``act(gate) * up`` kernel over ``[T, 2 * I]``: one program per (token, column block)."""
    _check_positive(intermediate_size=intermediate_size)
    _check_dtype(dtype)
    block = min(_next_pow2(intermediate_size), 1024)
    return _make(kernel, f"i{intermediate_size}", {"I": intermediate_size, "BLOCK_I": block, "DTYPE": dtype},
                 4, 1, {"intermediate_size": intermediate_size, "dtype": dtype})


@lru_cache(maxsize=None)
def silu_mul_config(*, intermediate_size: int, dtype: str) -> LaunchConfig:
    """``silu(gate) * up``: one program per (token, column block)."""
    return _gated_config("silu_mul", intermediate_size, dtype)


@lru_cache(maxsize=None)
def gelu_tanh_mul_config(*, intermediate_size: int, dtype: str) -> LaunchConfig:
    """GeGLU ``gelu_tanh(gate) * up``: one program per (token, column block), as :func:`silu_mul_config`."""
    return _gated_config("gelu_tanh_mul", intermediate_size, dtype)


@lru_cache(maxsize=None)
def logit_softcap_config(*, vocab_size: int, cap: float) -> LaunchConfig:
    """Final-logit softcapping ``cap * tanh(logits / cap)`` of float32 logit rows: one program per
    (row, column block)."""
    _check_positive(vocab_size=vocab_size)
    if not cap > 0:
        raise ValueError(f"cap must be positive, got {cap!r}")
    block = min(_next_pow2(vocab_size), 1024)
    return _make("logit_softcap", f"v{vocab_size}", {"V": vocab_size, "BLOCK_V": block, "CAP": _as_float32(cap)},
                 4, 1, {"vocab_size": vocab_size})


# Elements of q and k a rope_store_kv program rotates: whole heads, a power of two of them (masked past the last).
ROPE_ELEMENTS = 1024


@lru_cache(maxsize=None)
def rope_store_kv_config(*, num_heads: int, num_kv_heads: int, head_dim: int, page_size: int, dtype: str,
                         check_finite: bool = True) -> LaunchConfig:
    """RoPE of q and k and the KV-cache write of k and v: one program per (token, BLOCK_Q = ROPE_ELEMENTS /
    head_dim q heads), each also handling BLOCK_KV KV heads.

    ``check_finite`` (CHECK) also flags a written K or V row holding inf or NaN (kernels/finiteness.py);
    off, the key ends in ``_unchecked``.
    """
    _check_positive(num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, page_size=page_size)
    _check_dtype(dtype)
    if not _is_pow2(head_dim) or head_dim < 2:
        raise ValueError(f"rope_store_kv needs a power-of-two head_dim >= 2, got {head_dim}")
    block_q = max(1, ROPE_ELEMENTS // head_dim)
    num_blocks = -(-num_heads // block_q)
    block_kv = _next_pow2(-(-num_kv_heads // num_blocks))  # so the q blocks' programs cover every KV head
    key = f"hq{num_heads}_hkv{num_kv_heads}_d{head_dim}_p{page_size}{_unchecked(check_finite)}"
    return _make("rope_store_kv", key, {"HALF": head_dim // 2, "BLOCK_Q": block_q, "BLOCK_KV": block_kv,
                                        "PAGE_SIZE": page_size, "CHECK": int(check_finite), "DTYPE": dtype},
                 _row_warps((block_q + block_kv) * head_dim, 4), 1,
                 {"num_heads": num_heads, "num_kv_heads": num_kv_heads, "head_dim": head_dim,
                  "page_size": page_size, "dtype": dtype, "check_finite": check_finite})
