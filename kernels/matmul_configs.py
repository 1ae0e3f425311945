"""Launch configurations of the matmuls: one-launch tiles, the decode and prefill buckets, fixed split-K
(across programs, and fixed K ranges inside one program) and its folds.

Chosen from (N, K, dtype) only, except that :func:`linear_configs` takes M to pick the decode or
prefill bucket (DESIGN.md §5's tile shapes per M bucket; same BLOCK_K, splits and K order in every
bucket). Torch- and Triton-free; kernels/configs.py re-exports the public names.
"""

from __future__ import annotations

from functools import lru_cache

from kernels.launch_config import (LaunchConfig, _as_float32, _check_dtype, _check_positive, _make, _next_pow2,
                                   _row_warps)

__all__ = ["matmul_config", "decode_matmul_config", "prefill_matmul_config", "matmul_splits", "matmul_ranges",
           "matmul_split_config",
           "matmul_combine_config", "matmul_combine_norm_config", "linear_configs", "matmul_silu_configs"]

# bf16 matmul: the widest column tile (of 128, 64, 32) that still gives this many column tiles,
# so a decode launch (M <= BLOCK_M, one row tile) spreads a weight over about one wave of a
# 132-SM GPU; narrower weights get 32-column tiles. Depends on N only, never on M.
MIN_COLUMN_PROGRAMS = 128
# Contraction depth from which a narrow weight's K is cut into RANGES_DEEP ranges (matmul_ranges).
# Such a weight took 256-deep K steps before it had ranges; with them a 128-deep step streams it as
# fast at decode (llama-1b's down_proj, M = 4 on an H100: 15.1 against 15.3 us) and its prefill tile
# is wider (128 x 128 at 3 stages against 128 x 64 at 2): 468 against 566 us at M = 4,096
# (bench/decode_splits.py --block-k 128,256, docs/performance.md).
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
# Prefill bucket (the same rule): a single-launch bf16 matmul of at least PREFILL_ROWS rows runs
# 128-row warpgroup tiles with 8 warps, as wide as shared memory allows at the weight's own BLOCK_K
# (PREFILL_TILES by BLOCK_K; DEEP_PREFILL_TILES for four K ranges), since a prefill launch has column
# and row tiles enough to fill the GPU and the other tile's 32-wide columns ran at 135-220 TFLOP/s.
# Chosen from bench/prefill_tiles.py on an H200 (docs/performance.md). float32 plans get a bucket from 64 rows
# (their other tile, 64 columns wide), so the CPU path and CI run its choice on short prompts.
PREFILL_ROWS = {"bfloat16": 1024, "float32": 64}
PREFILL_TILES = {64: (128, 256, 64, 8, 4), 128: (128, 128, 128, 8, 3)}
# The prefill tile of a weight with RANGES_DEEP ranges (K >= DEEP_K): a program holds two fp32 tiles
# (the ranges' sum and the current range's); at 128 x 128 over 8 warps that left llama-1b's down_proj
# at 916 us for 8,192 rows on an H100, against 499 for the same tile without ranges and 342 for
# cuBLAS, and 128 x 64 at 4 stages took 663. Two-range weights keep PREFILL_TILES: 128 x 64 made
# qkv and o slower (302 against 277 us, 202 against 155). bench/deep_prefill.py, docs/performance.md.
DEEP_PREFILL_TILES = {128: (128, 64, 128, 8, 4)}
# A prefill-bucket weight of at most this many bytes is walked column tile first (N_MAJOR: grid
# axis 0 over column tiles), so the programs running together share rows of x and the weight
# stays in L2 while x streams once; a larger weight walks row tiles first (x stays in L2 instead).
# Either order gives each tile the same arithmetic. About 3/4 of an H200's 50 MB L2.
L2_RESIDENT_BYTES = 40 * 2**20
DTYPE_BYTES = {"bfloat16": 2, "float32": 4}
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
# Fixed split-K inside one program (matmul_ranges): a bf16 weight whose decode tile is at most
# NARROW_DECODE_N columns wide has its K cut into RANGES_DEEP equal ranges if K >= DEEP_K, else
# RANGES_SHALLOW; each range accumulates from zero and the sums are added in ascending order, in
# every bucket. The decode bucket advances the ranges side by side (LOCKSTEP, its own accumulator
# each, 2 warps), the other buckets one after another. A decode program of such a weight holds a
# 16 x 16 or 16 x 32 tile, so one accumulator's chain of dependent MMAs over all of K, not the
# weight's bytes, set its time: on an H200, 2026-12-06 (bench/decode_splits.py, M = 4, cold L2),
# down 16.8 -> 12.9 us with 4 ranges, qkv 7.2 -> 6.3 and o 6.6 -> 6.4 with 2, while a 4,096-row
# prefill took 3-6% longer (docs/performance.md).
NARROW_DECODE_N = 32
RANGES_DEEP, RANGES_SHALLOW = 4, 2
# Shared memory a decode-bucket program of a ranged weight may fill with its stages (of 227 KiB).
RANGED_STAGE_BYTES = 200 * 1024


def _matmul_tiles(n: int, k: int, dtype: str) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) of a matmul from (N, K, dtype) alone."""
    if dtype == "float32":
        return 32, 32, 64, 4, 2
    block_n = next((b for b in (128, 64) if -(-n // b) >= MIN_COLUMN_PROGRAMS), 32)
    return 64, block_n, 64 if block_n == 128 else 128, 4, 4


def _decode_block_n(n: int) -> int:
    """The decode bucket's bf16 BLOCK_N: the widest of 128/64/32/16 still giving DECODE_COLUMN_PROGRAMS column tiles."""
    return next((b for b in (128, 64, 32) if -(-n // b) >= DECODE_COLUMN_PROGRAMS), 16)


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
    block_n = _decode_block_n(n)
    ranges = matmul_ranges(n=n, k=k, dtype=dtype)
    if ranges == 1:
        return DECODE_ROWS, block_n, block_k, 4, 5
    stage_bytes = ranges * (DECODE_ROWS + block_n) * block_k * DTYPE_BYTES[dtype]
    return DECODE_ROWS, block_n, block_k, 2, max(2, min(5, RANGED_STAGE_BYTES // stage_bytes))


@lru_cache(maxsize=None)
def matmul_ranges(*, n: int, k: int, dtype: str) -> int:
    """The number of fixed K ranges an ``[N, K]`` weight's one-launch matmul adds up inside each program
    (1: one range), from (N, K, dtype) only: every bucket runs the same ranges, so prefill and
    decode rows agree. bf16 weights whose decode tile is at most NARROW_DECODE_N columns wide get
    them (see RANGES_DEEP); float32 plans split across programs instead (:func:`matmul_splits`).
    """
    _check_positive(n=n, k=k)
    _check_dtype(dtype)
    if dtype != "bfloat16" or n >= WIDE_N or matmul_splits(n=n, k=k, dtype=dtype) > 1:
        return 1
    if _decode_block_n(n) > NARROW_DECODE_N:
        return 1
    ranges = RANGES_DEEP if k >= DEEP_K else RANGES_SHALLOW
    block_k = _matmul_tiles(n, k, dtype)[2]
    return ranges if k % (ranges * block_k) == 0 else 1


def _prefill_tiles(n: int, k: int, dtype: str) -> tuple[int, int, int, int, int] | None:
    """The prefill bucket's (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), or None (no bucket)."""
    block_m, _, block_k, warps, stages = _matmul_tiles(n, k, dtype)
    if dtype == "float32":
        return block_m, 64, block_k, warps, stages
    if n >= WIDE_N:
        return None
    if matmul_ranges(n=n, k=k, dtype=dtype) == RANGES_DEEP:
        return DEEP_PREFILL_TILES[block_k]
    return PREFILL_TILES[block_k]


def _matmul_entry(n: int, k: int, dtype: str, has_bias: bool, out_dtype: str, tiles: tuple[int, ...],
                  bucket: str = "", n_major: bool = False, lockstep: bool = False, **bounds: int) -> LaunchConfig:
    """A one-launch matmul configuration of ``tiles`` with the weight's :func:`matmul_ranges`;
    ``bucket`` ends the key, ``bounds`` (max_rows or min_rows) go into its static values."""
    block_m, block_n, block_k, warps, stages = tiles
    suffix = f"n{n}_k{k}" + ("_bias" if has_bias else "") + ("" if out_dtype == dtype else "_out_" + out_dtype)
    constexprs = {"N": n, "K": k, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k,
                  "HAS_BIAS": bool(has_bias), "OUT_DTYPE": out_dtype, "N_MAJOR": n_major}
    ranges = matmul_ranges(n=n, k=k, dtype=dtype)
    if ranges > 1:  # only then: the entries of one-range weights keep their constexprs and digests
        constexprs.update(SPLITS=ranges, LOCKSTEP=lockstep)
    return _make("matmul", suffix + bucket, constexprs,
                 warps, stages, {"n": n, "k": k, "dtype": dtype, "out_dtype": out_dtype, **bounds})


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
    Every such tile takes 128-deep K steps, 64-deep for 128-column tiles (see DEEP_K for why
    narrow weights with a deep K no longer take 256).
    fp32 uses IEEE-precision dots (no TF32) on a fixed small tile.
    Weights with :func:`matmul_splits` > 1 run :func:`matmul_split_config` and
    :func:`matmul_combine_config` instead (see :func:`linear_configs`); weights with
    :func:`matmul_ranges` > 1 add that many fixed K ranges inside each program, in every bucket.
    """
    _check_matmul_shape(n, k, dtype, out_dtype)
    return _matmul_entry(n, k, dtype, has_bias, out_dtype, _matmul_tiles(n, k, dtype))


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
    return _matmul_entry(n, k, dtype, has_bias, out_dtype, tiles, f"_m{DECODE_ROWS}", lockstep=True,
                         max_rows=DECODE_ROWS)


@lru_cache(maxsize=None)
def prefill_matmul_config(*, n: int, k: int, dtype: str, has_bias: bool, out_dtype: str) -> LaunchConfig | None:
    """:func:`matmul_config`'s launch for at least PREFILL_ROWS[dtype] rows, or None where the weight has no
    prefill bucket.

    Same N, K, BLOCK_K and K order as :func:`matmul_config`; other tile rows, columns, warps and
    stages (see PREFILL_ROWS). The key ends in ``_p<rows>``; ``min_rows`` in its static values is
    the bucket's bound, which the launch contract checks.
    """
    _check_matmul_shape(n, k, dtype, out_dtype)
    tiles = _prefill_tiles(n, k, dtype)
    if tiles is None:
        return None
    rows = PREFILL_ROWS[dtype]
    return _matmul_entry(n, k, dtype, has_bias, out_dtype, tiles, f"_p{rows}",
                         n_major=n * k * DTYPE_BYTES[dtype] <= L2_RESIDENT_BYTES, min_rows=rows)


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

    ``num_rows`` (M) only picks the bucket of a single-launch weight: the decode bucket's tile
    for at most DECODE_ROWS rows, the prefill bucket's for at least PREFILL_ROWS[dtype]; the
    splits, BLOCK_K and K order are the same for every M.
    """
    splits = matmul_splits(n=n, k=k, dtype=dtype)
    if splits == 1:
        bucket = None
        if num_rows is not None and num_rows <= DECODE_ROWS:
            bucket = decode_matmul_config(n=n, k=k, dtype=dtype, has_bias=has_bias, out_dtype=out_dtype)
        elif num_rows is not None and num_rows >= PREFILL_ROWS[dtype]:
            bucket = prefill_matmul_config(n=n, k=k, dtype=dtype, has_bias=has_bias, out_dtype=out_dtype)
        if bucket is not None:
            return (bucket,)
        return (matmul_config(n=n, k=k, dtype=dtype, has_bias=has_bias, out_dtype=out_dtype),)
    return (matmul_split_config(n=n, k=k, dtype=dtype),
            matmul_combine_config(n=n, splits=splits, dtype=dtype, has_bias=has_bias, out_dtype=out_dtype))


def matmul_silu_configs(*, intermediate_size: int, k: int, dtype: str,
                        num_rows: int | None = None) -> tuple[LaunchConfig, ...]:
    """The launches of the gate/up projection with SiLU-and-multiply in its epilogue
    (kernels/matmul_silu.py): every bucket's, or with ``num_rows`` (M) the one bucket's that
    :func:`linear_configs` would pick for the ``[2 I, K]`` weight; () where that weight is split
    (its K order is then not one pass, and the projection runs as :func:`linear_configs` then
    silu_mul).

    Each is the gate/up weight's own tile with its columns shared between gate and up: BLOCK_N
    halved, so a program streams as many weight rows as the matmul's; same BLOCK_K and K order.
    """
    mid, decode, prefill = _matmul_silu_buckets(intermediate_size, k, dtype)
    if mid is None:
        return ()
    if num_rows is None:
        return tuple(c for c in (mid, decode, prefill) if c is not None)
    if num_rows <= DECODE_ROWS and decode is not None:
        return (decode,)
    if num_rows >= PREFILL_ROWS[dtype] and prefill is not None:
        return (prefill,)
    return (mid,)


@lru_cache(maxsize=None)
def _matmul_silu_buckets(intermediate_size: int, k: int, dtype: str) -> tuple[LaunchConfig | None, ...]:
    """(middle, decode, prefill) bucket configs of :func:`matmul_silu_configs`; all None for a split weight."""
    n = 2 * intermediate_size
    _check_matmul_shape(n, k, dtype, dtype)
    if matmul_splits(n=n, k=k, dtype=dtype) > 1 or matmul_ranges(n=n, k=k, dtype=dtype) > 1:
        return None, None, None
    suffix = f"i{intermediate_size}_k{k}"
    static = {"intermediate_size": intermediate_size, "k": k, "dtype": dtype}

    def entry(tiles: tuple[int, int, int, int, int], bucket: str = "", n_major: bool = False,
              **bounds: int) -> LaunchConfig:
        block_m, block_n, block_k, warps, stages = tiles
        return _make("matmul_silu", suffix + bucket,
                     {"I": intermediate_size, "K": k, "BLOCK_M": block_m, "BLOCK_N": block_n // 2,
                      "BLOCK_K": block_k, "DTYPE": dtype, "N_MAJOR": n_major}, warps, stages, {**static, **bounds})

    decode, prefill = _decode_tiles(n, k, dtype), _prefill_tiles(n, k, dtype)
    rows = PREFILL_ROWS[dtype]
    return (entry(_matmul_tiles(n, k, dtype)),
            None if decode is None else entry(decode, f"_m{DECODE_ROWS}", max_rows=DECODE_ROWS),
            None if prefill is None else entry(prefill, f"_p{rows}", min_rows=rows,
                                               n_major=n * k * DTYPE_BYTES[dtype] <= L2_RESIDENT_BYTES))
