"""Paged causal attention, first half: the KV walk of a query block, cut into fixed segments.

Optionally with a sliding window (WINDOW = W > 0: the query at position i sees the keys
i - W < j <= i, W keys including its own, as transformers' sliding-window layers; 0 is full
causal attention) and attention logit softcapping (SOFTCAP = c > 0: each scaled score s becomes
c * tanh(s / c) before masking, tanh written as 2 / (1 + exp(-2x)) - 1 with exp's argument
clamped to stay finite; 0 is off). Both are constexprs that default to off.

Program (i, g, s) computes one *query block* for the GROUP query heads of KV head g over KV
segment s, the keys [s * SEG, (s + 1) * SEG): up to BLOCK_Q consecutive query tokens of one
request times the head group, the rows of a [BLOCK_Q * BLOCK_G, D] ``tl.dot`` tile. Tile row r
is token r // BLOCK_G of the block and query head g * GROUP + r % BLOCK_G; BLOCK_G is GROUP
rounded up to a power of two, and rows past the block or the group are padding, never stored.
Blocks come from the packed token order, without any host-side block list: packed
block i < cdiv(T, BLOCK_Q) (program cdiv(T, BLOCK_Q) - 1 - i, so the longest causal blocks start
first) owns the tokens of [i*BLOCK_Q, (i+1)*BLOCK_Q) that belong to the request of token
i*BLOCK_Q; program cdiv(T, BLOCK_Q) + b owns the tokens of request b from its first token up to
the next multiple of BLOCK_Q, when that first token is not itself a multiple (so every token
has exactly one program per KV head and segment, and decode batches of one token per request
run one program per request, KV head and segment). A token's request comes from ``seq_idx``;
its position is ``seq_lens[b] - q_len_b + (t - query_start_loc[b])``.

Why head groups: a decode step has one query per request, so a tile of one head's BLOCK_Q tokens
would use one row and read every KV tile once per query head; with the group in the rows it uses
GROUP rows and reads each KV tile once per KV head. In prefill a tile of BLOCK_Q tokens x GROUP
heads reads as much KV per query row as a one-head tile of BLOCK_Q * GROUP tokens would.

Why segments: a decode step has one query per request, so the single KV walk of a long context
is serial in one program per (request, KV head). Segments at fixed boundaries (multiples of SEG,
never sized from the batch or the length) run in parallel; the second half
(kernels/attention_combine.py) merges a token's segments 0 .. pos // SEG in ascending order.
The number of segments comes from the block table's width, so one CUDA graph (one table width)
serves every decode step; programs of segments past a block's last position visit no tile.

Within segment s the block visits KV tiles of BLOCK_N consecutive key positions, j = s * SEG /
BLOCK_N .. min(last // BLOCK_N, (s + 1) * SEG / BLOCK_N - 1), in ascending order, where
``last`` is the position of the block's last token. Each key's page is
``block_table[b, key // PAGE_SIZE]``; keys past ``last`` are masked on load (neither their
block-table entry nor their slot is read, so poisoned future slots cannot leak). A row scores
keys past its own position -inf and weights them +0. Online softmax in fp32 with the -inf clamp
(``m_safe``); scores, the weighted sum and the denominator l are ``tl.dot`` on tensor cores in
bf16 (P rounded to bf16, fp32 accumulation into the running output; l is P times a tile of ones,
so it sums the same rounded weights as the output) and IEEE fp32 dots in fp32. l is a dot rather
than a row sum because a row sum's order follows the tile's thread layout, which changes with
BLOCK_Q (the decode bucket, kernels/attention_configs.py), while a dot's does not (trusted).
Each row that sees a key of the segment (s * SEG <= its position) stores its unnormalised state
(m, l, acc) to fp32 scratch; the other rows store nothing, and the combine never reads their slots.

Why a query's segment state does not depend on the batch or the chunking: its row sees the same
key tiles of the segment with the same values in any launch (its q row, its request's KV up to
pos); tiles of its block past its own last tile are fully masked for it and are exact identity
steps (max(m, -inf) = m, alpha = exp(+0) = 1, p = exp(-inf) = +0, and ``tl.dot`` with an
all-+0 left operand returns its accumulator, l's and the output's alike); keys of its last tile
past pos get p = +0, whose terms do not change the dot when the V rows there are finite. Those rows
are the request's own KV at positions up to the block's last token, written before this launch;
that they are finite (no inf/NaN activations) is a premise of the contract
(kernels/contracts/paged_attention.toml), unlike the unwritten slots, which may hold anything;
rope_store_kv and the combine check it, and the absence of overflow, at run time (kernels/finiteness.py).
A row's position inside the tile changes with the chunking; ``tl.dot`` is trusted to give a
row the same bits wherever it sits (tests/gpu checks it).

With a window each row masks the keys at or before its own ``position - W`` (from its own
position, never the block's: a block's rows have different window starts, and which rows share
a block depends on the chunking). The block skips the tiles that lie wholly before ``lowest``,
its first row's window start, and masks keys before it on load (their block-table entries and
slots are not read). Why that is exact: every row of the block sits at or after the first row,
so its window starts at or after ``lowest``; a skipped tile holds only keys it masks. For a row
the tiles of a segment that lie wholly before its own window start are fully masked, whether
the block visits them or not; visited with the row's state still empty, such a tile is an exact
identity step from that state: m stays max(-inf, -inf) = -inf, the clamp gives m_safe = 0,
alpha = p = exp(-inf) = +0, and ``tl.dot`` with an all-+0 left operand returns its accumulator,
l's and the output's (+0 * +0 = +0). So a row's state for a segment wholly before its window
is (-inf, +0, +0) in every launch, and otherwise the same tiles with visible keys in the same
order; the combine merges only the segments from the one holding the row's window start (it
holds a visible key: the visible keys are contiguous up to the row's own).

Why BLOCK_N is a function of head_dim (kernels/attention_configs.py: attention_keys): a K and a V tile of
128 keys x 256 x bf16 in two pipeline stages take 256 KiB, more than an H200's shared memory per
block; heads of 256 take 64-key tiles, and SEG stays a multiple of BLOCK_N.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, launch_kwargs, dtype_name, max_offset

__all__ = ["attention_partial_kernel", "check_paged_attention", "segment_count", "split_scratch",
           "launch_attention_partial"]


@triton.jit(do_not_specialize=["num_tokens", "stride_mt", "stride_mh", "stride_at", "stride_ah", "stride_bt"])
def attention_partial_kernel(q_ptr, k_cache_ptr, v_cache_ptr, m_ptr, l_ptr, acc_ptr, block_table_ptr,
                             query_start_ptr, seq_lens_ptr, seq_idx_ptr, num_tokens, stride_qt, stride_qh, stride_mt,
                             stride_mh, stride_at, stride_ah, stride_bt, stride_page, stride_slot, stride_head,
                             GROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_Q: tl.constexpr, D: tl.constexpr,
                             PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, SEG: tl.constexpr, SCALE: tl.constexpr,
                             DTYPE: tl.constexpr, WINDOW: tl.constexpr = 0, SOFTCAP: tl.constexpr = 0.0,
                             PDL: tl.constexpr = False):
    # q: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # query_start: [B + 1] int32; seq_lens: [B] int32 (KV length incl. this step); seq_idx: [T] int32
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32 (segment stride D, unit stride on D)
    # The step's metadata is staged (seq_idx: computed once) before the forward's layers and written by
    # none of their launches (contract: immutable), so it is read before the PDL wait, as the previous
    # launch drains.
    program = tl.program_id(0)
    kv_head = tl.program_id(1)
    segment = tl.program_id(2)  # keys [segment * SEG, (segment + 1) * SEG)
    num_packed = tl.cdiv(num_tokens, BLOCK_Q)
    is_packed = program < num_packed  # else: the program of request (program - num_packed)'s first block
    packed_start = tl.where(is_packed, num_packed - 1 - program, 0) * BLOCK_Q  # the longest causal blocks first
    seq = tl.where(is_packed, tl.load(seq_idx_ptr + packed_start, mask=is_packed, other=0), program - num_packed)
    q_start = tl.load(query_start_ptr + seq)
    q_end = tl.load(query_start_ptr + seq + 1)
    context = tl.load(seq_lens_ptr + seq) - (q_end - q_start)  # KV positions cached before this step
    if PDL:  # launched early (programmatic dependent launch): nothing else before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    first_end = tl.where(q_start % BLOCK_Q == 0, q_start, tl.minimum(q_end, (q_start // BLOCK_Q + 1) * BLOCK_Q))
    block_start = tl.where(is_packed, packed_start, q_start)
    block_end = tl.where(is_packed, tl.minimum(q_end, packed_start + BLOCK_Q), first_end)
    # Tile row r is token r // BLOCK_G of the block and query head kv_head * GROUP + r % BLOCK_G
    # (rows with r % BLOCK_G >= GROUP pad the head group to a power of two and are never stored).
    offs_r = tl.arange(0, BLOCK_Q * BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    rows = block_start + offs_r // BLOCK_G  # the block's packed tokens
    heads = kv_head * GROUP + offs_r % BLOCK_G
    is_row = (rows < block_end) & (offs_r % BLOCK_G < GROUP)
    positions = context + (rows - q_start)
    last = context + (block_end - 1 - q_start)  # the block's last position
    num_tiles = tl.where(block_end > block_start, last // BLOCK_N + 1, 0)
    # The segment's tiles, fixed by the segment alone; the block's last position only ends the walk
    # early (a segment past it visits none), so a row's tiles are the same in every launch.
    first_tile = segment * (SEG // BLOCK_N)
    end_tile = tl.minimum(num_tiles, first_tile + SEG // BLOCK_N)
    if WINDOW > 0:  # the block's first row has the earliest window start: no row sees a key before it
        lowest = tl.maximum(context + (block_start - q_start) - WINDOW + 1, 0)
        first_tile = tl.maximum(first_tile, lowest // BLOCK_N)  # tiles wholly before it are skipped
    q = tl.load(q_ptr + rows[:, None] * stride_qt + heads[:, None] * stride_qh + offs_d[None, :], mask=is_row[:, None],
                other=0.0)
    m_i = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32) - float("inf")
    # l as a dot of P with ones, like acc: its sum order is the dot's, not a row reduction's, whose
    # order follows the tile's thread layout (so it would differ between BLOCK_Q buckets)
    ones = tl.full([BLOCK_N, 16], 1.0, tl.float32).to(DTYPE)  # 16 columns: tl.dot's narrowest
    l_acc = tl.zeros([BLOCK_Q * BLOCK_G, 16], dtype=tl.float32)  # every column the same l
    acc = tl.zeros([BLOCK_Q * BLOCK_G, D], dtype=tl.float32)
    for j in range(first_tile, end_tile):
        keys = j * BLOCK_N + offs_n
        is_stored = keys <= last
        if WINDOW > 0:  # keys before every row's window: neither block-table entry nor slot is read
            is_stored = is_stored & (keys >= lowest)
        pages = tl.load(block_table_ptr + seq * stride_bt + keys // PAGE_SIZE, mask=is_stored, other=0)
        slots = pages * stride_page + (keys % PAGE_SIZE) * stride_slot + kv_head * stride_head
        # K loaded one key per row, as stored, then transposed for the dot
        k = tl.trans(tl.load(k_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0))
        v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0)
        scores = tl.dot(q, k, input_precision="ieee") * SCALE
        if SOFTCAP > 0:  # SOFTCAP * tanh(scores / SOFTCAP), tanh(x) = 2 / (1 + exp(-2x)) - 1
            # exp's argument clamped to 88 so it stays finite (tanh(x) rounds to -1 from x < -9 on)
            e = tl.exp(tl.minimum(-2.0 * (scores / SOFTCAP), 88.0))
            scores = SOFTCAP * (2.0 / (1.0 + e) - 1.0)
        visible = keys[None, :] <= positions[:, None]
        if WINDOW > 0:  # each row's own window start, from its own position
            visible = visible & (keys[None, :] > positions[:, None] - WINDOW)
        scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(scores - m_safe[:, None])
        l_acc = tl.dot(p.to(DTYPE), ones, l_acc * alpha[:, None], input_precision="ieee")
        acc = tl.dot(p.to(DTYPE), v, acc * alpha[:, None], input_precision="ieee")
        m_i = m_new
    l_i = tl.max(l_acc, axis=1)  # the columns are equal: max picks that value exactly
    # Only rows that see a key of the segment (segment * SEG <= position) store: the combine reads
    # exactly those. Written relative to the context, since a padding row's position may pass 2**31.
    sees = is_row & (segment * SEG - context <= rows - q_start)
    state = rows * stride_mt + heads * stride_mh + segment
    tl.store(m_ptr + state, m_i, mask=sees)
    tl.store(l_ptr + state, l_i, mask=sees)
    tl.store(acc_ptr + rows[:, None] * stride_at + heads[:, None] * stride_ah + segment * D + offs_d[None, :], acc,
             mask=sees[:, None])


def check_paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                          query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor,
                          entry: PlanEntry) -> None:
    """The launch contract of paged attention's inputs (shared by both halves' launches and the CPU path).

    Premises not checked here (kernels/metadata.py checks them when metadata checks are on):
    query_start_loc starts at 0, never decreases and ends at T; seq_lens[b] >= q_len_b; seq_idx
    names each token's request; every page a request visits,
    ``block_table[b, 0 .. (seq_lens[b] - 1) // PAGE_SIZE]``, is in [0, num_pages).
    """
    # q: [T, Hq, D]; k_cache, v_cache: [num_pages, page_size, Hkv, D]; block_table: [B, max_pages] int32
    c, static = entry.constexpr_dict(), entry.static_dict()
    assert entry.kernel == "paged_attention", f"entry {entry.key} is not a paged_attention entry"
    assert c["SEG"] % c["BLOCK_N"] == 0, f"SEG {c['SEG']} is not a multiple of BLOCK_N {c['BLOCK_N']}"
    num_heads, num_kv_heads, head_dim = static["num_heads"], static["num_kv_heads"], c["D"]
    assert num_heads == num_kv_heads * c["GROUP"], "plan entry heads are inconsistent"
    assert c["GROUP"] <= c["BLOCK_G"] < 2 * c["GROUP"] and c["BLOCK_G"] & (c["BLOCK_G"] - 1) == 0, \
        f"BLOCK_G {c['BLOCK_G']} is not GROUP {c['GROUP']} rounded up to a power of two"
    assert q.dim() == 3 and tuple(q.shape[1:]) == (num_heads, head_dim), \
        f"q shape {tuple(q.shape)} is not [T, {num_heads}, {head_dim}]"
    assert q.stride(2) == 1, f"q needs a unit stride on head_dim, got {q.stride()}"
    assert dtype_name(q.dtype) == c["DTYPE"], f"q must be {c['DTYPE']}"
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        assert cache.dim() == 4 and tuple(cache.shape[1:]) == (c["PAGE_SIZE"], num_kv_heads, head_dim), \
            f"{name} shape {tuple(cache.shape)} is not [num_pages, {c['PAGE_SIZE']}, {num_kv_heads}, {head_dim}]"
        assert cache.is_contiguous() and cache.dtype == q.dtype, f"{name} must be contiguous {q.dtype}"
    assert k_cache.shape == v_cache.shape, "k_cache and v_cache differ in shape"
    assert block_table.dim() == 2 and block_table.dtype == torch.int32 and block_table.stride(1) == 1, \
        f"block_table must be [B, max_pages] int32 with unit column stride, got {tuple(block_table.shape)}"
    num_seqs = block_table.shape[0]
    for name, t, length in (("query_start_loc", query_start_loc, num_seqs + 1), ("seq_lens", seq_lens, num_seqs),
                            ("seq_idx", seq_idx, q.shape[0])):
        assert tuple(t.shape) == (length,) and t.dtype == torch.int32 and t.is_contiguous(), \
            f"{name} must be a contiguous [{length}] int32 tensor, got {tuple(t.shape)} {t.dtype}"
    devices = {t.device for t in (q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx)}
    assert len(devices) == 1, f"all tensors must be on one device, got {devices}"
    assert max(max_offset(q), max_offset(k_cache), max_offset(block_table)) <= MAX_INDEX, \
        "a tensor is too large for 32-bit offsets"


def segment_count(block_table: torch.Tensor, entry: PlanEntry) -> int:
    """NUM_SEG = cdiv(max_pages * PAGE_SIZE, SEG): segments covering the block table's widest request."""
    c = entry.constexpr_dict()
    return (block_table.shape[1] * c["PAGE_SIZE"] + c["SEG"] - 1) // c["SEG"]


def split_scratch(q: torch.Tensor, block_table: torch.Tensor,
                  entry: PlanEntry) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Uninitialised fp32 scratch (m, l, acc) for the segment states of every (token, head, segment).

    Only the states a token sees are written (by the first half) and read (by the combine).
    """
    # q: [T, Hq, D]; block_table: [B, max_pages] -> m, l: [T, Hq, NUM_SEG]; acc: [T, Hq, NUM_SEG, D]
    num_tokens, num_heads, head_dim = q.shape
    num_segs = segment_count(block_table, entry)
    m = torch.empty(num_tokens, num_heads, num_segs, dtype=torch.float32, device=q.device)
    acc = torch.empty(num_tokens, num_heads, num_segs, head_dim, dtype=torch.float32, device=q.device)
    return m, torch.empty_like(m), acc


def check_split_scratch(q: torch.Tensor, block_table: torch.Tensor, m: torch.Tensor, l: torch.Tensor,
                        acc: torch.Tensor, entry: PlanEntry) -> None:
    """The scratch layout the first half writes: contiguous fp32, NUM_SEG segments per (token, head)."""
    # q: [T, Hq, D]; m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32
    c = entry.constexpr_dict()
    # segment_count() written out, so that the verifier reads this as the check of its premise on num_segs
    num_segs = (block_table.shape[1] * c["PAGE_SIZE"] + c["SEG"] - 1) // c["SEG"]
    for name, t in (("m", m), ("l", l)):
        assert tuple(t.shape) == (q.shape[0], q.shape[1], num_segs), \
            f"{name} shape {tuple(t.shape)} is not [T, Hq, {num_segs}]"
        assert t.dtype == torch.float32 and t.is_contiguous(), f"{name} must be contiguous float32"
    assert tuple(acc.shape) == (q.shape[0], q.shape[1], num_segs, c["D"]), \
        f"acc shape {tuple(acc.shape)} is not [T, Hq, {num_segs}, {c['D']}]"
    assert acc.dtype == torch.float32 and acc.is_contiguous(), "acc must be contiguous float32"
    assert len({t.device for t in (q, m, l, acc)}) == 1, "scratch must be on q's device"
    assert max_offset(acc) <= MAX_INDEX, "the scratch is too large for 32-bit offsets"


def launch_attention_partial(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                             block_table: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
                             seq_idx: torch.Tensor, m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor,
                             entry: PlanEntry, *, early: bool = True) -> None:
    """Check the contract, then launch attention_partial_kernel on grid (cdiv(T, BLOCK_Q) + B, Hkv, NUM_SEG)
    (``early``: as in kernels/tensors.py ``launch_kwargs``)."""
    # q: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # m, l: [T, Hq, NUM_SEG] fp32; acc: [T, Hq, NUM_SEG, D] fp32 (from split_scratch)
    check_paged_attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, entry)
    check_split_scratch(q, block_table, m, l, acc, entry)
    if q.shape[0] == 0:
        return
    grid = (triton.cdiv(q.shape[0], entry.constexpr_dict()["BLOCK_Q"]) + block_table.shape[0], k_cache.shape[2],
            m.shape[2])
    attention_partial_kernel[grid](
        q, k_cache, v_cache, m, l, acc, block_table, query_start_loc, seq_lens, seq_idx, q.shape[0], q.stride(0),
        q.stride(1), m.stride(0), m.stride(1), acc.stride(0), acc.stride(1), block_table.stride(0), k_cache.stride(0),
        k_cache.stride(1), k_cache.stride(2), **launch_kwargs(entry, early=early))
