"""Launch configurations of paged attention: the split KV walk and the merge of its segments.

Chosen from head counts, head_dim, page size, window, softcap and dtype only; segment
boundaries are fixed multiples of SEG, never sized from the batch or the length.
Torch- and Triton-free; kernels/configs.py re-exports the public names.
"""

from __future__ import annotations

from functools import lru_cache

from kernels.launch_config import (LaunchConfig, _as_float32, _check_dtype, _check_positive, _is_pow2, _make,
                                   _unchecked)

__all__ = ["attention_keys", "paged_attention_config", "decode_attention_config", "attention_combine_config",
           "prefill_combine_heads", "prefill_attention_config", "takes_prefill_attention"]

# Paged attention tile: query tokens per block (times the head group, the tile rows; >= 16 for
# tl.dot) and keys per KV tile.
ATTENTION_QUERIES = 16
# The decode bucket's tile rows (decode_attention_config): the fewest tl.dot accepts.
DECODE_TILE_ROWS = 16
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
# Heads a merge program takes in launches with more tokens than requests (prefill): one program
# per token and head made a 4 x 4,096 prefill's 16 merges 10 ms on an H200, 8 heads 2.4 ms; a
# decode step keeps one head per program (its few tokens need the parallelism at long contexts).
PREFILL_COMBINE_HEADS = 8
# Launches that run attention in one kernel (kernels/attention_prefill.py: the segments one after
# another in the program of a query block, merged as they end) instead of the pair: at least this
# many tokens, by dtype, and at least half as many as the launch's longest KV, so that the query
# blocks fill the GPU and no single block's serial walk outlasts the rest: on an H100 the one kernel
# took 312 against the pair's 524 us at a 4,096-token prompt and 492 against 602 at 2,048 tokens
# after 6,144 cached, but 288 against 186 at 256 tokens after 16,128 (bench/attention_fused.py);
# a short chunk or a decode row beside a long context keeps the pair's parallel segments. float32
# plans serve the CPU path and the tests: from 64 tokens, so short prompts run both forms. Any
# launch whose KV fits one segment takes the one kernel too (takes_prefill_attention).
PREFILL_ATTENTION_TOKENS = {"bfloat16": 1024, "float32": 64}


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
def decode_attention_config(*, num_heads: int, num_kv_heads: int, head_dim: int, page_size: int, scale: float,
                            dtype: str, window: int = 0, softcap: float = 0.0) -> LaunchConfig | None:
    """:func:`paged_attention_config`'s launch for decode steps (one query per request), or None
    where the head group already fills DECODE_TILE_ROWS rows with one query token.

    A decode step's block is one token, so a tile of ATTENTION_QUERIES tokens x BLOCK_G heads
    computes ATTENTION_QUERIES - 1 empty tokens per KV tile. This one holds DECODE_TILE_ROWS //
    BLOCK_G tokens; BLOCK_N, SEG, D and every other constexpr are the other entry's, so a row
    visits the same KV tiles in the same order with the same per-row arithmetic. That a row's
    bits do not depend on how many rows its ``tl.dot`` tiles hold is the trusted
    ``dot-tile-shape`` assumption (tested on the GPU); the row reductions that would depend on the
    tile's thread layout (the softmax denominator) are dots too (kernels/attention.py). The key
    ends in ``_q<tokens>``.
    """
    full = paged_attention_config(num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                                  page_size=page_size, scale=scale, dtype=dtype, window=window, softcap=softcap)
    c = full.constexpr_dict()
    block_q = max(DECODE_TILE_ROWS // c["BLOCK_G"], 1)
    if block_q >= c["BLOCK_Q"]:
        return None
    return _make("paged_attention", f"{full.key.split('.', 1)[1]}_q{block_q}", {**c, "BLOCK_Q": block_q},
                 full.num_warps, full.num_stages, {**full.static_dict(), "decode": True})


def prefill_combine_heads(num_heads: int) -> int:
    """Heads per merge program in launches with more tokens than requests: the largest power of
    two up to PREFILL_COMBINE_HEADS that divides ``num_heads`` (1: no prefill bucket)."""
    heads = PREFILL_COMBINE_HEADS
    while num_heads % heads:
        heads //= 2
    return heads


@lru_cache(maxsize=None)
def attention_combine_config(*, num_heads: int, head_dim: int, seg: int, dtype: str,
                             check_finite: bool = True, window: int = 0, block_h: int = 1) -> LaunchConfig:
    """Second half of the split KV walk: program (token, j) merges the segment states of query
    heads j * block_h .. (j + 1) * block_h - 1 of the token, each in ascending segment order.
    ``seg`` is the SEG of the paged_attention entry whose states it merges. One warp: a program
    merges a few [head_dim] rows. ``check_finite`` (CHECK) also flags a non-finite state or output
    (kernels/finiteness.py); off, the key ends in ``_unchecked``. ``window`` (WINDOW, key suffix
    ``_w512``, only when set) is the sliding window of that entry: the merge starts at the segment
    of the token's window start, the first one holding a key the token sees. ``block_h`` > 1
    (BLOCK_H, dividing num_heads; key suffix ``_h8``) is the prefill bucket's entry
    (:func:`prefill_combine_heads`): the same elementwise arithmetic per head.
    """
    _check_positive(num_heads=num_heads, head_dim=head_dim, seg=seg, block_h=block_h)
    _check_dtype(dtype)
    if not _is_pow2(head_dim):
        raise ValueError(f"attention combine needs a power-of-two head_dim, got {head_dim}")
    if num_heads % block_h or not _is_pow2(block_h):
        raise ValueError(f"attention combine heads per program {block_h} must be a power of two dividing "
                         f"the {num_heads} query heads")
    suffix = _window_suffix(window) + (f"_h{block_h}" if block_h > 1 else "") + _unchecked(check_finite)
    return _make("attention_combine", f"hq{num_heads}_d{head_dim}_s{seg}{suffix}",
                 {"D": head_dim, "SEG": seg, "DTYPE": dtype, "CHECK": int(check_finite),
                  **({"WINDOW": window} if window else {}), "BLOCK_H": block_h}, 1, 1,
                 {"num_heads": num_heads, "head_dim": head_dim, "seg": seg, "dtype": dtype,
                  "check_finite": check_finite, **({"window": window} if window else {})})


@lru_cache(maxsize=None)
def prefill_attention_config(*, num_heads: int, num_kv_heads: int, head_dim: int, page_size: int, scale: float,
                             dtype: str, softcap: float = 0.0, check_finite: bool = True,
                             decode: bool = False) -> LaunchConfig:
    """The pair's two halves in one kernel for full causal attention (kernels/attention_prefill.py):
    every constexpr of :func:`paged_attention_config`'s entry (the same tiles, segments and order),
    or with ``decode`` of :func:`decode_attention_config`'s where the shape has one (key suffix
    ``_q<tokens>``), and the merge's CHECK (key suffix ``_unchecked`` when off)."""
    shape = dict(num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, page_size=page_size,
                 scale=scale, dtype=dtype, softcap=softcap)
    walk = (decode_attention_config(**shape) if decode else None) or paged_attention_config(**shape)
    c = {k: v for k, v in walk.constexpr_dict().items() if k != "PDL"}  # _make adds it again by dtype
    return _make("attention_prefill", walk.key.split(".", 1)[1] + _unchecked(check_finite),
                 {**c, "CHECK": int(check_finite)}, walk.num_warps, walk.num_stages,
                 {**walk.static_dict(), "check_finite": check_finite})


def takes_prefill_attention(*, num_tokens: int, kv_len: int, seg: int, dtype: str, window: int = 0) -> bool:
    """Whether a launch of ``num_tokens`` tokens whose longest request holds ``kv_len`` keys (or an
    upper bound of it) runs :func:`prefill_attention_config`'s kernel; a choice of speed only, the
    pair's bits either way. Taken where ``kv_len`` fits in one segment of ``seg`` keys (the pair's
    walk then has one segment per block, so the one kernel runs the same programs without the
    merge's launch and scratch), and by long launches (PREFILL_ATTENTION_TOKENS says why).
    Sliding-window layers (``window`` > 0) always keep the pair (kernels/attention_prefill.py says why)."""
    _check_dtype(dtype)
    _check_positive(seg=seg)
    if window:
        return False
    return kv_len <= seg or (num_tokens >= PREFILL_ATTENTION_TOKENS[dtype] and 2 * num_tokens >= kv_len)
