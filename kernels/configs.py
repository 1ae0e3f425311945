"""Launch configurations, chosen only from static shapes.

Every function here takes static shape values (hidden size, head counts, head dim, vocabulary,
page size, the (N, K) of a weight, dtypes) and nothing else: no batch size, token count or KV
length can reach a configuration, so a request's kernels run the same code whatever it is
batched with. The one exception is DESIGN.md §5's M bucket: a matmul of at most DECODE_ROWS
rows takes another tile shape with the same BLOCK_K, splits and K order (decode_matmul_config). The plan (kernels/plan.py) and the launch wrappers (kernels/ops.py) call the
same functions, and a launch is refused unless its configuration is in the active plan. They
are pure, so they are memoised: an op pays a dict lookup, not a rebuild, per launch.

Torch- and Triton-free so the plan, the verifier and the case loader can import it anywhere.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

__all__ = [
    "DTYPES",
    "KERNELS",
    "LaunchConfig",
    "embedding_config",
    "rms_norm_config",
    "matmul_config",
    "decode_matmul_config",
    "matmul_splits",
    "matmul_split_config",
    "matmul_combine_config",
    "matmul_combine_norm_config",
    "linear_configs",
    "rope_config",
    "silu_mul_config",
    "gelu_tanh_mul_config",
    "logit_softcap_config",
    "embedding_scale",
    "store_kv_config",
    "attention_keys",
    "paged_attention_config",
    "attention_combine_config",
]

DTYPES = ("float32", "bfloat16")
KERNELS = ("embedding", "rms_norm", "matmul", "matmul_split", "matmul_combine", "matmul_combine_norm", "rope",
           "silu_mul", "gelu_tanh_mul", "logit_softcap", "store_kv", "paged_attention", "attention_combine")
_KEY_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")  # no ':' or spaces: safe as a DOT id

# bf16 matmul: the widest column tile (of 128, 64, 32) that still gives this many column tiles,
# so a decode launch (M <= BLOCK_M, one row tile) spreads a weight over about one wave of a
# 132-SM GPU; narrower weights get 32-column tiles. Depends on N only, never on M.
MIN_COLUMN_PROGRAMS = 128
# Contraction depth from which 32-column bf16 matmul tiles take 256-deep K steps.
DEEP_K = 8192
# Decode bucket (DESIGN.md §5, tile shapes per M bucket): a single-launch matmul of at most
# DECODE_ROWS rows runs 16-row tiles (mma.sync instead of a 64-row warpgroup MMA wasting 60 of
# 64 rows at batch 4), the widest BLOCK_N of 128/64/32/16 that still gives DECODE_COLUMN_PROGRAMS
# column tiles, and 5 stages, with the same BLOCK_K and K order as the weight's other tile (so
# splits and accumulation order are those of every other M). That a row's bits do not change with
# the tile shape is the trusted assumption trusted.dot-tile-shape, probed on the GPU
# (tests/gpu/test_kernels_gpu.py, bench/decode_tiles.py). Weights of at least WIDE_N rows
# (vocabulary projections) keep one tile: theirs streams at the copy rate already.
DECODE_ROWS = 16
DECODE_COLUMN_PROGRAMS = 96
WIDE_N = 32768
# Fixed split-K, by dtype: the number of K ranges a narrow weight's reduction is cut into. bf16:
# weights too narrow for MIN_COLUMN_PROGRAMS column tiles (llama-1b's qkv, o and down) get 4
# splits, so a decode launch runs 4x the programs, each streaming a quarter of the weight; wide
# weights (gate_up, lm_head) already fill the GPU and keep one. float32 plans serve the CPU path
# and the tests: 4 splits wherever N <= K, with 16-deep K steps, so the tiny preset's o and down
# projections run the split path with 1 and 2 steps per split (a wrong fold order changes bits).
# A split needs K to be a multiple of SPLITS * BLOCK_K (else the weight keeps one launch).
# bfloat16 plans keep one launch per weight for now: 4 splits of llama-1b's narrow weights measured
# slower on an H200 (2,050 against about 2,900 decode tokens/s at batch 4; docs/performance.md) with
# these untuned tiles. float32 plans split, so the CPU path and CI prove and test the split arithmetic.
SPLIT_K = {"bfloat16": 1, "float32": 4}
SPLIT_BLOCK_K_FP32 = 16
# Output columns per program of the split combine (one row per program).
COMBINE_COLUMNS = 1024
# Paged attention tile: query tokens per block (times the head group, the tile rows; >= 16 for
# tl.dot) and keys per KV tile.
ATTENTION_QUERIES = 16
ATTENTION_KEYS = 128
# head_dim from which a KV tile holds ATTENTION_KEYS // 2 keys (see attention_keys).
WIDE_HEAD_DIM = 256
ATTENTION_WARPS = 4
ATTENTION_STAGES = 2
# KV tiles per segment of the split KV walk, by dtype. bf16 plans serve long contexts on a GPU:
# 8 tiles of 128 keys, so a 16K context splits into 16 segments that run in parallel. float32
# plans serve the CPU path and the tests, whose prompts are short: one tile per segment, so that
# a prompt of a few hundred tokens already crosses segment boundaries and exercises the merge.
SEGMENT_TILES = {"bfloat16": 8, "float32": 1}


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """One kernel specialisation: its constexprs, launch options and the static shape behind them."""

    kernel: str
    key: str
    constexprs: tuple[tuple[str, Any], ...]  # sorted by name; dtype-valued ones spelled "float32"/"bfloat16"
    num_warps: int
    num_stages: int
    static: tuple[tuple[str, Any], ...]  # sorted by name; the shape values the choice was made from

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(f"unknown kernel {self.kernel!r}; known kernels: {', '.join(KERNELS)}")
        if not _KEY_RE.match(self.key) or not self.key.startswith(self.kernel + "."):
            raise ValueError(f"key {self.key!r} must look like '{self.kernel}.<lowercase_words>'")
        for name, pairs in (("constexprs", self.constexprs), ("static", self.static)):
            names = [n for n, _ in pairs]
            if names != sorted(set(names)):
                raise ValueError(f"{self.key}: {name} names must be unique and sorted, got {names}")
        if self.num_warps not in (1, 2, 4, 8, 16) or self.num_stages < 1:
            raise ValueError(f"{self.key}: bad launch options num_warps={self.num_warps} "
                             f"num_stages={self.num_stages}")

    def constexpr_dict(self) -> dict[str, Any]:
        """The constexprs as a dict (the kernel's keyword arguments)."""
        return dict(self.constexprs)

    def static_dict(self) -> dict[str, Any]:
        """The static shape values as a dict."""
        return dict(self.static)

    def launch_options(self) -> dict[str, Any]:
        """Constexprs plus num_warps/num_stages: everything that selects the compiled variant."""
        return {**self.constexpr_dict(), "num_warps": self.num_warps, "num_stages": self.num_stages}


def _make(kernel: str, key_suffix: str, constexprs: Mapping[str, Any], num_warps: int, num_stages: int,
          static: Mapping[str, Any]) -> LaunchConfig:
    return LaunchConfig(kernel=kernel, key=f"{kernel}.{key_suffix}",
                        constexprs=tuple(sorted(constexprs.items())), num_warps=num_warps,
                        num_stages=num_stages, static=tuple(sorted(static.items())))


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _as_float32(value: float) -> float:
    """Round to float32: float constexprs are used at fp32, so 1/sqrt(d) and d**-0.5 agree."""
    return struct.unpack("f", struct.pack("f", float(value)))[0]


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {DTYPES}")


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def _unchecked(check_finite: bool) -> str:
    """Key suffix of a kernel built without the run-time finiteness check."""
    return "" if check_finite else "_unchecked"


def _row_warps(block: int, max_warps: int) -> int:
    """Warps for a one-row-per-program kernel: about 256 elements per warp."""
    return max(1, min(max_warps, block // 256))


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


def _matmul_tiles(n: int, k: int, dtype: str) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) of a matmul from (N, K, dtype) alone."""
    if dtype == "float32":
        return 32, 32, 64, 4, 2
    block_n = next((b for b in (128, 64) if -(-n // b) >= MIN_COLUMN_PROGRAMS), 32)
    block_k = 64 if block_n == 128 else 128
    if block_n == 32 and k >= DEEP_K:
        block_k = 256
    return 64, block_n, block_k, 4, 4


def _decode_tiles(n: int, k: int, dtype: str) -> tuple[int, int, int, int, int] | None:
    """The decode bucket's (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), or None (one tile for every M).

    float32 plans get one too (16 rows, their other tiles), so the CPU path and CI run the bucket
    choice; the CPU path's arithmetic does not depend on BLOCK_M at all.
    """
    _, block_n, block_k, warps, stages = _matmul_tiles(n, k, dtype)
    if dtype == "float32":
        return DECODE_ROWS, block_n, block_k, warps, stages
    if n >= WIDE_N:
        return None
    block_n = next((b for b in (128, 64, 32) if -(-n // b) >= DECODE_COLUMN_PROGRAMS), 16)
    return DECODE_ROWS, block_n, block_k, 4, 5


def _check_matmul_shape(n: int, k: int, dtype: str, out_dtype: str) -> None:
    _check_positive(n=n, k=k)
    _check_dtype(dtype)
    _check_dtype(out_dtype)


def _split_tiles(n: int, k: int, dtype: str) -> tuple[int, int, int, int, int]:
    """The tiles of a split-K matmul: :func:`_matmul_tiles`, with 16-deep K steps in float32."""
    block_m, block_n, block_k, warps, stages = _matmul_tiles(n, k, dtype)
    return block_m, block_n, SPLIT_BLOCK_K_FP32 if dtype == "float32" else block_k, warps, stages


@lru_cache(maxsize=None)
def matmul_splits(*, n: int, k: int, dtype: str) -> int:
    """The number of fixed K ranges of an ``[N, K]`` weight's matmul (1: no split), from (N, K, dtype) only.

    Never from M: prefill and decode rows of one weight run the same splits, so their bits agree.
    """
    _check_positive(n=n, k=k)
    _check_dtype(dtype)
    _, block_n, block_k, _, _ = _split_tiles(n, k, dtype)
    splits = SPLIT_K[dtype]
    narrow = n <= k if dtype == "float32" else -(-n // block_n) < MIN_COLUMN_PROGRAMS
    return splits if narrow and k % (splits * block_k) == 0 else 1


@lru_cache(maxsize=None)
def matmul_config(*, n: int, k: int, dtype: str, has_bias: bool, out_dtype: str) -> LaunchConfig:
    """``out[M, N] = x[M, K] @ weight[N, K].T (+ bias)`` in one launch: tile sizes from (N, K, dtype) only.

    bf16 uses tensor cores with BLOCK_M = 64 (a Hopper warpgroup MMA) and the widest BLOCK_N
    of 128/64/32 that still gives MIN_COLUMN_PROGRAMS column tiles (32 when none does), so decode
    (one row tile) streams the weight over most SMs while prefill gets tiles wide enough for
    the tensor cores; the trade-off for narrow weights was measured (docs/performance.md).
    Narrow weights with a deep K (at least DEEP_K) take 256-deep K steps: a decode program then
    keeps twice the weight bytes in flight, which was faster at decode and no slower at prefill
    for such weights only.
    fp32 uses IEEE-precision dots (no TF32) on a fixed small tile.
    Weights with :func:`matmul_splits` > 1 run :func:`matmul_split_config` and
    :func:`matmul_combine_config` instead (see :func:`linear_configs`).
    """
    _check_matmul_shape(n, k, dtype, out_dtype)
    block_m, block_n, block_k, warps, stages = _matmul_tiles(n, k, dtype)
    suffix = f"n{n}_k{k}" + ("_bias" if has_bias else "") + ("" if out_dtype == dtype else "_out_" + out_dtype)
    return _make("matmul", suffix,
                 {"N": n, "K": k, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k,
                  "HAS_BIAS": bool(has_bias), "OUT_DTYPE": out_dtype},
                 warps, stages, {"n": n, "k": k, "dtype": dtype, "out_dtype": out_dtype})


@lru_cache(maxsize=None)
def decode_matmul_config(*, n: int, k: int, dtype: str, has_bias: bool, out_dtype: str) -> LaunchConfig | None:
    """:func:`matmul_config`'s launch for at most DECODE_ROWS rows, or None where the weight has no decode bucket.

    Same N, K, BLOCK_K and K order as :func:`matmul_config`; other tile rows, columns, warps and
    stages (see DECODE_ROWS). The key ends in ``_m16``; ``max_rows`` in its static values is the
    bucket's bound, which the launch contract checks.
    """
    _check_matmul_shape(n, k, dtype, out_dtype)
    tiles = _decode_tiles(n, k, dtype)
    if tiles is None:
        return None
    block_m, block_n, block_k, warps, stages = tiles
    suffix = f"n{n}_k{k}" + ("_bias" if has_bias else "") + ("" if out_dtype == dtype else "_out_" + out_dtype)
    return _make("matmul", f"{suffix}_m{DECODE_ROWS}",
                 {"N": n, "K": k, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k,
                  "HAS_BIAS": bool(has_bias), "OUT_DTYPE": out_dtype},
                 warps, stages, {"n": n, "k": k, "dtype": dtype, "out_dtype": out_dtype, "max_rows": DECODE_ROWS})


@lru_cache(maxsize=None)
def matmul_split_config(*, n: int, k: int, dtype: str) -> LaunchConfig:
    """First half of a split-K matmul: fp32 partial products of SPLITS fixed K ranges of K / SPLITS.

    The tiles are :func:`matmul_config`'s for the same (N, K, dtype) (16-deep K steps in
    float32, see SPLIT_K); split s covers K columns
    [s * K / SPLITS, (s + 1) * K / SPLITS) in ascending BLOCK_K steps from zero.
    """
    _check_matmul_shape(n, k, dtype, dtype)
    splits = matmul_splits(n=n, k=k, dtype=dtype)
    if splits == 1:
        raise ValueError(f"an [{n}, {k}] {dtype} weight is not split (matmul_splits is 1); use matmul_config")
    block_m, block_n, block_k, warps, stages = _split_tiles(n, k, dtype)
    return _make("matmul_split", f"n{n}_k{k}_s{splits}",
                 {"N": n, "K": k, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "SPLITS": splits},
                 warps, stages, {"n": n, "k": k, "dtype": dtype})


@lru_cache(maxsize=None)
def matmul_combine_config(*, n: int, splits: int, dtype: str, has_bias: bool, out_dtype: str) -> LaunchConfig:
    """Second half of a split-K matmul: one program per (row, COMBINE_COLUMNS columns) folds the
    row's SPLITS fp32 partials in ascending split order, adds the bias and casts to ``out_dtype``."""
    _check_positive(n=n, splits=splits)
    _check_dtype(dtype)
    _check_dtype(out_dtype)
    if splits < 2:
        raise ValueError(f"a split combine needs at least 2 splits, got {splits}")
    block_n = min(_next_pow2(n), COMBINE_COLUMNS)
    suffix = f"n{n}_s{splits}" + ("_bias" if has_bias else "") + ("" if out_dtype == dtype else "_out_" + out_dtype)
    return _make("matmul_combine", suffix,
                 {"N": n, "BLOCK_N": block_n, "SPLITS": splits, "HAS_BIAS": bool(has_bias), "OUT_DTYPE": out_dtype},
                 4, 1, {"n": n, "splits": splits, "dtype": dtype, "out_dtype": out_dtype})


@lru_cache(maxsize=None)
def matmul_combine_norm_config(*, hidden_size: int, splits: int, eps: float, dtype: str) -> LaunchConfig:
    """The split combine of a residual branch (o_proj, down_proj) fused with the residual RMSNorm after
    it: one program per token row folds its SPLITS partials in ascending order, adds the residual
    and normalises, as :func:`rms_norm_config` with a residual does."""
    _check_positive(hidden_size=hidden_size, splits=splits)
    _check_dtype(dtype)
    if splits < 2:
        raise ValueError(f"a split combine needs at least 2 splits, got {splits}")
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps!r}")
    block = _next_pow2(hidden_size)
    return _make("matmul_combine_norm", f"h{hidden_size}_s{splits}",
                 {"H": hidden_size, "BLOCK_H": block, "SPLITS": splits, "EPS": _as_float32(eps), "DTYPE": dtype},
                 _row_warps(block, 16), 1, {"hidden_size": hidden_size, "splits": splits, "dtype": dtype})


def linear_configs(*, n: int, k: int, dtype: str, has_bias: bool, out_dtype: str,
                   num_rows: int | None = None) -> tuple[LaunchConfig, ...]:
    """The launches of one ``x @ weight.T (+ bias)``: (matmul,) or (matmul_split, matmul_combine).

    ``num_rows`` (M) only picks the decode bucket's tile of a single-launch weight (at most
    DECODE_ROWS rows); the splits, BLOCK_K and K order are the same for every M.
    """
    splits = matmul_splits(n=n, k=k, dtype=dtype)
    if splits == 1:
        if num_rows is not None and num_rows <= DECODE_ROWS:
            decode = decode_matmul_config(n=n, k=k, dtype=dtype, has_bias=has_bias, out_dtype=out_dtype)
            if decode is not None:
                return (decode,)
        return (matmul_config(n=n, k=k, dtype=dtype, has_bias=has_bias, out_dtype=out_dtype),)
    return (matmul_split_config(n=n, k=k, dtype=dtype),
            matmul_combine_config(n=n, splits=splits, dtype=dtype, has_bias=has_bias, out_dtype=out_dtype))


@lru_cache(maxsize=None)
def rope_config(*, head_dim: int, dtype: str) -> LaunchConfig:
    """Rotary embedding (rotate-half): one program per (token, head)."""
    _check_positive(head_dim=head_dim)
    _check_dtype(dtype)
    if not _is_pow2(head_dim) or head_dim < 2:
        raise ValueError(f"rope needs a power-of-two head_dim >= 2, got {head_dim}")
    return _make("rope", f"d{head_dim}", {"HALF": head_dim // 2, "DTYPE": dtype}, 1, 1,
                 {"head_dim": head_dim, "dtype": dtype})


@lru_cache(maxsize=None)
def silu_mul_config(*, intermediate_size: int, dtype: str) -> LaunchConfig:
    """``silu(gate) * up``: one program per (token, column block)."""
    _check_positive(intermediate_size=intermediate_size)
    _check_dtype(dtype)
    block = min(_next_pow2(intermediate_size), 1024)
    return _make("silu_mul", f"i{intermediate_size}", {"I": intermediate_size, "BLOCK_I": block, "DTYPE": dtype},
                 4, 1, {"intermediate_size": intermediate_size, "dtype": dtype})


@lru_cache(maxsize=None)
def gelu_tanh_mul_config(*, intermediate_size: int, dtype: str) -> LaunchConfig:
    """GeGLU ``gelu_tanh(gate) * up``: one program per (token, column block), as :func:`silu_mul_config`."""
    _check_positive(intermediate_size=intermediate_size)
    _check_dtype(dtype)
    block = min(_next_pow2(intermediate_size), 1024)
    return _make("gelu_tanh_mul", f"i{intermediate_size}", {"I": intermediate_size, "BLOCK_I": block, "DTYPE": dtype},
                 4, 1, {"intermediate_size": intermediate_size, "dtype": dtype})


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


@lru_cache(maxsize=None)
def store_kv_config(*, num_kv_heads: int, head_dim: int, page_size: int, dtype: str,
                    check_finite: bool = True) -> LaunchConfig:
    """KV-cache write: one program per (token, KV head) copies one K and one V row to its slot.

    ``check_finite`` (CHECK) also flags a copied row holding inf or NaN (kernels/finiteness.py);
    off, the key ends in ``_unchecked``.
    """
    _check_positive(num_kv_heads=num_kv_heads, head_dim=head_dim, page_size=page_size)
    _check_dtype(dtype)
    if not _is_pow2(head_dim):
        raise ValueError(f"store_kv needs a power-of-two head_dim, got {head_dim}")
    return _make("store_kv", f"hkv{num_kv_heads}_d{head_dim}_p{page_size}{_unchecked(check_finite)}",
                 {"D": head_dim, "PAGE_SIZE": page_size, "CHECK": int(check_finite)}, 1, 1,
                 {"num_kv_heads": num_kv_heads, "head_dim": head_dim, "page_size": page_size, "dtype": dtype,
                  "check_finite": check_finite})


def _window_suffix(window: int) -> str:
    """Key suffix of a sliding-window attention entry (none for full causal attention)."""
    if not isinstance(window, int) or isinstance(window, bool) or window < 0:
        raise ValueError(f"window must be a non-negative int (0: full causal attention), got {window!r}")
    return f"_w{window}" if window else ""


def _softcap_suffix(softcap: float) -> str:
    """Key suffix of a logit-softcapped attention entry: ``_cap50``, ``_cap30p5`` (none when off)."""
    if not isinstance(softcap, (int, float)) or isinstance(softcap, bool) or not 0 <= softcap < float("inf"):
        raise ValueError(f"softcap must be a finite non-negative number (0: off), got {softcap!r}")
    if not softcap:
        return ""
    value = _as_float32(softcap)
    text = str(int(value)) if value.is_integer() and value < 1e9 else repr(value)
    return "_cap" + text.replace(".", "p").replace("+", "").replace("-", "m")


def attention_keys(head_dim: int, page_size: int) -> int:
    """BLOCK_N, the keys of one KV tile: ATTENTION_KEYS, halved from head_dim WIDE_HEAD_DIM on, at least a page.

    A function of head_dim and page_size only. Wide heads get half the keys because two pipeline
    stages of a K and a V tile of 128 keys x 256 x bf16 (256 KiB) exceed an H200's 227 KiB of
    shared memory per block; 64 keys (128 KiB, plus the query tile) fit.
    """
    return max(ATTENTION_KEYS // 2 if head_dim >= WIDE_HEAD_DIM else ATTENTION_KEYS, page_size)


@lru_cache(maxsize=None)
def paged_attention_config(*, num_heads: int, num_kv_heads: int, head_dim: int, page_size: int,
                           scale: float, dtype: str, window: int = 0, softcap: float = 0.0) -> LaunchConfig:
    """Paged causal attention, first half of the split KV walk: the GROUP query heads of one KV
    head x BLOCK_Q query tokens x one KV segment of SEG keys per program, KV tiles of BLOCK_N keys.

    The rows of one ``tl.dot`` tile are the BLOCK_Q = ATTENTION_QUERIES query tokens of a block
    times the head group, GROUP = num_heads / num_kv_heads padded to BLOCK_G, a power of two (at
    least 16 rows, what ``tl.dot`` needs): prefill reads each KV tile once per query block and
    KV head instead of once per token and query head, and a decode step's single query per
    request fills GROUP rows of the tile. A KV tile holds BLOCK_N = :func:`attention_keys` keys
    (several pages when pages are small; each key is read through its own block-table entry).
    A segment holds SEG = SEGMENT_TILES[dtype] * BLOCK_N keys at fixed boundaries;
    :func:`attention_combine_config` merges the segments. head_dim must be a power of two >= 16,
    page_size a power of two.

    ``window`` W > 0 (WINDOW) is a sliding window: the query at position i sees the keys
    i - W < j <= i (W keys including itself); 0 is full causal attention. ``softcap`` c > 0
    (SOFTCAP) caps the scaled scores to ``c * tanh(score / c)`` before masking (Gemma2's
    attn_logit_softcapping). Either adds a constexpr and a key suffix (``_w512``, ``_cap50``)
    only when set, so an entry without them is the full causal one, key and constexprs alike.
    """
    _check_positive(num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, page_size=page_size)
    _check_dtype(dtype)
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
    if not (_is_pow2(head_dim) and _is_pow2(page_size) and head_dim >= 16):
        raise ValueError(f"paged attention needs a power-of-two head_dim >= 16 and a power-of-two page_size, "
                         f"got {head_dim}, {page_size}")
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    suffix = _window_suffix(window) + _softcap_suffix(softcap)
    block_n = attention_keys(head_dim, page_size)
    group = num_heads // num_kv_heads
    block_g = 1 << (group - 1).bit_length()
    optional = {"WINDOW": window} if window else {}
    if softcap:
        optional["SOFTCAP"] = _as_float32(softcap)
    return _make("paged_attention", f"hq{num_heads}_hkv{num_kv_heads}_d{head_dim}_p{page_size}{suffix}",
                 {"GROUP": group, "BLOCK_G": block_g, "BLOCK_Q": ATTENTION_QUERIES, "D": head_dim,
                  "PAGE_SIZE": page_size, "BLOCK_N": block_n, "SEG": SEGMENT_TILES[dtype] * block_n,
                  "SCALE": _as_float32(scale), "DTYPE": dtype, **optional},
                 ATTENTION_WARPS, ATTENTION_STAGES,
                 {"num_heads": num_heads, "num_kv_heads": num_kv_heads, "head_dim": head_dim,
                  "page_size": page_size, "dtype": dtype, **({"window": window} if window else {}),
                  **({"softcap": float(softcap)} if softcap else {})})


@lru_cache(maxsize=None)
def attention_combine_config(*, num_heads: int, head_dim: int, seg: int, dtype: str,
                             check_finite: bool = True, window: int = 0) -> LaunchConfig:
    """Second half of the split KV walk: one program per (token, query head) merges the token's
    segment states in ascending order. ``seg`` is the SEG of the paged_attention entry whose
    states it merges. One warp: a program merges a few [head_dim] rows. ``check_finite`` (CHECK)
    also flags a non-finite state or output (kernels/finiteness.py); off, the key ends in
    ``_unchecked``. ``window`` (WINDOW, key suffix ``_w512``, only when set) is the sliding
    window of that entry: the merge starts at the segment of the token's window start, the
    first one holding a key the token sees.
    """
    _check_positive(num_heads=num_heads, head_dim=head_dim, seg=seg)
    _check_dtype(dtype)
    if not _is_pow2(head_dim):
        raise ValueError(f"attention combine needs a power-of-two head_dim, got {head_dim}")
    suffix = _window_suffix(window) + _unchecked(check_finite)
    return _make("attention_combine", f"hq{num_heads}_d{head_dim}_s{seg}{suffix}",
                 {"D": head_dim, "SEG": seg, "DTYPE": dtype, "CHECK": int(check_finite),
                  **({"WINDOW": window} if window else {})}, 1, 1,
                 {"num_heads": num_heads, "head_dim": head_dim, "seg": seg, "dtype": dtype,
                  "check_finite": check_finite, **({"window": window} if window else {})})
