"""Static model shapes: the only inputs from which kernel launch configurations are chosen.

Torch-free so the plan, the verifier and the case loader can use it without a GPU stack.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelShape", "PRESETS", "preset"]


@dataclass(frozen=True, slots=True)
class ModelShape:
    """Shape of a Llama-family decoder (Llama, Qwen2, Qwen3, Mistral, Gemma3): all a launch configuration may use."""

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    page_size: int = 16
    dtype: str = "float32"  # "float32" or "bfloat16"
    has_qkv_bias: bool = False
    has_o_proj_bias: bool = False
    has_qk_norm: bool = False  # per-head RMSNorm of q and k before RoPE (Qwen3): rms_norm rows of head_dim
    tie_word_embeddings: bool = False
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 2048
    # The run-time attention finiteness check (kernels/finiteness.py) built into rope_store_kv and the
    # attention combine: a deployment choice, so part of the shape the plan is sealed for.
    check_finite: bool = True
    # The sorted distinct sliding windows the layers use (0: full causal attention; Gemma3 and
    # Mistral use windows): one attention entry (and combine) per window in the plan.
    attention_windows: tuple[int, ...] = (0,)
    attn_softcap: float = 0.0  # attention logit softcapping c * tanh(s / c) (Gemma2); 0: off
    # Gemma3: RMSNorms weigh by (1 + w) with one rounding (Gemma3RMSNorm), the embedding is scaled by
    # sqrt(hidden_size) rounded to the dtype, the MLP is GeGLU with tanh-GELU, attention scores are
    # scaled by query_pre_attn_scalar ** -0.5 (0.0: head_dim ** -0.5), the attention and MLP outputs
    # are normalised before their residual add (post_norms), and logits may be softcapped.
    norm_offset: bool = False
    embed_scale: bool = False
    activation: str = "silu"  # "silu" (SwiGLU) or "gelu_tanh" (GeGLU)
    query_pre_attn_scalar: float = 0.0
    post_norms: bool = False
    final_logit_softcap: float = 0.0

    @property
    def attention_scale(self) -> float:
        """The attention score scale: query_pre_attn_scalar ** -0.5, else head_dim ** -0.5."""
        return (self.query_pre_attn_scalar or self.head_dim) ** -0.5

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                     "intermediate_size", "vocab_size", "page_size", "max_position_embeddings"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ModelShape.{name} must be positive, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even for RoPE")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype {self.dtype!r} is not float32 or bfloat16")
        windows = self.attention_windows
        if not isinstance(windows, tuple) or not windows or \
                any(not isinstance(w, int) or isinstance(w, bool) or w < 0 for w in windows) or \
                list(windows) != sorted(set(windows)):
            raise ValueError(f"ModelShape.attention_windows must be a non-empty sorted tuple of distinct "
                             f"non-negative ints (0: full attention), got {windows!r}")
        if not isinstance(self.attn_softcap, (int, float)) or not 0 <= self.attn_softcap < float("inf"):
            raise ValueError(f"ModelShape.attn_softcap must be a finite non-negative number (0: off), "
                             f"got {self.attn_softcap!r}")
        if self.activation not in ("silu", "gelu_tanh"):
            raise ValueError(f"activation {self.activation!r} is not 'silu' or 'gelu_tanh'")
        for name in ("query_pre_attn_scalar", "final_logit_softcap"):
            if getattr(self, name) < 0:
                raise ValueError(f"ModelShape.{name} must be >= 0, got {getattr(self, name)}")


PRESETS: dict[str, ModelShape] = {
    # CPU tests and the embedded default: small enough for the Triton interpreter.
    "tiny": ModelShape(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                       intermediate_size=128, vocab_size=256, page_size=16),
    "small": ModelShape(hidden_size=256, num_layers=4, num_heads=8, num_kv_heads=4, head_dim=32,
                        intermediate_size=688, vocab_size=2048, page_size=16, has_qkv_bias=True),
    # Llama-3.2-1B shape (weights random-initialised; none are downloaded).
    "llama-1b": ModelShape(hidden_size=2048, num_layers=16, num_heads=32, num_kv_heads=8, head_dim=64,
                           intermediate_size=8192, vocab_size=128256, page_size=16, dtype="bfloat16",
                           tie_word_embeddings=True, rope_theta=500000.0,
                           max_position_embeddings=131072),
    # Qwen3 (per-head q/k RMSNorm) and Mistral for CPU tests: head_dim 32 != hidden / heads, as
    # Qwen3 configs allow; Mistral's 4:1 grouped KV heads and RoPE base as in Mistral-7B.
    "qwen3-tiny": ModelShape(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=32,
                             intermediate_size=128, vocab_size=256, page_size=16, has_qk_norm=True,
                             tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6),
    "mistral-tiny": ModelShape(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=1, head_dim=16,
                               intermediate_size=224, vocab_size=256, page_size=16, rope_theta=1000000.0),
    # Gemma3 for CPU tests: sliding layers (window 32, so CI prompts cross it) and full ones, head_dim
    # 32 != hidden / heads, a query_pre_attn_scalar unlike head_dim (as Gemma3-27B's), tied embeddings.
    "gemma3-tiny": ModelShape(hidden_size=64, num_layers=4, num_heads=4, num_kv_heads=2, head_dim=32,
                              intermediate_size=128, vocab_size=256, page_size=16, has_qk_norm=True,
                              tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6,
                              attention_windows=(0, 32), norm_offset=True, embed_scale=True,
                              activation="gelu_tanh", query_pre_attn_scalar=64.0, post_norms=True),
    # Qwen3-0.6B and Mistral-7B-v0.3 shapes (weights random-initialised; none are downloaded).
    "qwen3-0.6b": ModelShape(hidden_size=1024, num_layers=28, num_heads=16, num_kv_heads=8, head_dim=128,
                             intermediate_size=3072, vocab_size=151936, page_size=16, dtype="bfloat16",
                             has_qk_norm=True, tie_word_embeddings=True, rope_theta=1000000.0,
                             rms_norm_eps=1e-6, max_position_embeddings=40960),
    "mistral-7b": ModelShape(hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128,
                             intermediate_size=14336, vocab_size=32768, page_size=16, dtype="bfloat16",
                             rope_theta=1000000.0, max_position_embeddings=32768),
    # Gemma3-1B shape: 5 sliding layers (window 512) to 1 full, one KV head of head_dim 256.
    "gemma3-1b": ModelShape(hidden_size=1152, num_layers=26, num_heads=4, num_kv_heads=1, head_dim=256,
                            intermediate_size=6912, vocab_size=262144, page_size=16, dtype="bfloat16",
                            has_qk_norm=True, tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6,
                            max_position_embeddings=32768, attention_windows=(0, 512), norm_offset=True,
                            embed_scale=True, activation="gelu_tanh", query_pre_attn_scalar=256.0, post_norms=True),
}


def preset(name: str) -> ModelShape:
    """The named preset shape; a clear error lists the known names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}") from None
