"""Paged causal attention of long launches in one kernel: the split KV walk's segments, merged as they end.

The plan's attention is a pair (kernels/attention.py, kernels/attention_combine.py): program
(block, KV head, segment) walks one segment of SEG keys and stores its rows' fp32 softmax
state (m, l, acc) to scratch, and a second launch merges a token's segments in ascending order.
A decode step needs the segments in parallel (one query per request); a long prefill already
has query blocks enough to fill the GPU, and its scratch round trip (66 floats per token, head
and segment, written and read back) and second launch made its attention 1.7x this kernel's
time at a 4,096-token prompt on an H100 (bench/attention_fused.py, docs/performance.md). This kernel runs the same segments one after another inside the program of (block, KV
head): segment s of a block starts from the empty state (-inf, +0, +0) and visits the same KV
tiles with the same per-tile arithmetic as program (block, KV head, s) of the pair (written out
here line for line), and when it ends, each row that the combine would merge it into merges it
with the combine's arithmetic:

    segment 0 is taken as it is; a later one s <= pos // SEG gives
    m' = max(m, m_s), l' = l * exp(m - m') + l_s * exp(m_s - m'), acc' = acc * exp(m - m') + acc_s * exp(m_s - m'),

then ``acc / l`` is stored, and with CHECK the combine's finiteness flag (kernels/finiteness.py).
Segments past the row's own are never merged into it (their states are the empty one for it,
tiles wholly past its position being exact identity steps, but merging even an empty state is
not an identity on a -0 accumulator). So a row gets the pair's values in
the pair's order: the same bits wherever the same code compiles to the same float operations,
which tests/gpu checks (decode rows, always the pair, against prefill rows). The verifier
proves this kernel's own contract (kernels/contracts/attention_prefill.toml): a row's output in
two launches of it is bitwise equal whatever else the launches hold. SOFTCAP is the pair's.

Full causal attention only: sliding-window layers (the pair's WINDOW) keep the pair, since the
verifier took 75 to 380 s for each windowed form of this kernel on the development machine
(against 9 to 16 s for the full causal ones), beyond what a plan's proofs may take.

Which launches take it is a choice of speed only (kernels/ops.py ``prefill_attention_entry``,
kernels/attention_configs.py ``takes_prefill_attention``): a launch whose KV fits one segment
(the pair's walk then has one segment per block, and this kernel runs the same programs without
the merge's launch and scratch; a decode step takes the decode bucket's tile here too), and a
launch of at least PREFILL_ATTENTION_TOKENS tokens and at least half as many as its longest
request's KV, whose query blocks fill the GPU; decode steps past one segment, and short chunks
or decode rows beside a long context, keep the pair's parallel segments. The name is the
first use's.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.plan import PlanEntry
from kernels.tensors import MAX_INDEX, dtype_name, launch_kwargs, max_offset

__all__ = ["attention_prefill_kernel", "check_attention_prefill", "launch_attention_prefill"]


@triton.jit(do_not_specialize=["num_tokens", "stride_ot", "stride_oh", "stride_ft", "stride_bt"])
def attention_prefill_kernel(q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, flag_ptr, block_table_ptr, query_start_ptr,
                             seq_lens_ptr, seq_idx_ptr, num_tokens, stride_qt, stride_qh, stride_ot, stride_oh,
                             stride_ft, stride_bt, stride_page, stride_slot, stride_head,
                             GROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_Q: tl.constexpr, D: tl.constexpr,
                             PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, SEG: tl.constexpr, SCALE: tl.constexpr,
                             DTYPE: tl.constexpr, CHECK: tl.constexpr, SOFTCAP: tl.constexpr = 0.0,
                             PDL: tl.constexpr = False):
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; block_table: [B, max_pages] int32
    # flag: [T, Hq] float32 (unit stride on the head); query_start: [B + 1] int32; seq_lens: [B] int32
    # (KV length incl. this step); seq_idx: [T] int32
    # The step's metadata is staged (seq_idx: computed once) before the forward's layers and written by
    # none of their launches (contract: immutable), so it is read before the PDL wait, as the previous
    # launch drains.
    program = tl.program_id(0)
    kv_head = tl.program_id(1)
    # The query block of the pair's program (program, kv_head, *): kernels/attention.py says why
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
    offs_r = tl.arange(0, BLOCK_Q * BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    rows = block_start + offs_r // BLOCK_G  # the block's packed tokens
    heads = kv_head * GROUP + offs_r % BLOCK_G
    is_row = (rows < block_end) & (offs_r % BLOCK_G < GROUP)
    positions = context + (rows - q_start)
    last = context + (block_end - 1 - q_start)  # the block's last position
    num_tiles = tl.where(block_end > block_start, last // BLOCK_N + 1, 0)
    q = tl.load(q_ptr + rows[:, None] * stride_qt + heads[:, None] * stride_qh + offs_d[None, :], mask=is_row[:, None],
                other=0.0)
    ones = tl.full([BLOCK_N, 16], 1.0, tl.float32).to(DTYPE)  # l as a dot, as in the pair
    m_all = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32) - float("inf")
    l_all = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32)
    acc_all = tl.zeros([BLOCK_Q * BLOCK_G, D], dtype=tl.float32)
    bad = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32)
    for segment in range(0, tl.cdiv(num_tiles, SEG // BLOCK_N)):
        # program (block, kv_head, segment) of the pair
        first_tile = segment * (SEG // BLOCK_N)
        end_tile = tl.minimum(num_tiles, first_tile + SEG // BLOCK_N)
        m_i = tl.zeros([BLOCK_Q * BLOCK_G], dtype=tl.float32) - float("inf")
        l_acc = tl.zeros([BLOCK_Q * BLOCK_G, 16], dtype=tl.float32)
        acc = tl.zeros([BLOCK_Q * BLOCK_G, D], dtype=tl.float32)
        for j in range(first_tile, end_tile):
            keys = j * BLOCK_N + offs_n
            is_stored = keys <= last
            pages = tl.load(block_table_ptr + seq * stride_bt + keys // PAGE_SIZE, mask=is_stored, other=0)
            slots = pages * stride_page + (keys % PAGE_SIZE) * stride_slot + kv_head * stride_head
            k = tl.trans(tl.load(k_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0))
            v = tl.load(v_cache_ptr + slots[:, None] + offs_d[None, :], mask=is_stored[:, None], other=0.0)
            scores = tl.dot(q, k, input_precision="ieee") * SCALE
            if SOFTCAP > 0:
                e = tl.exp(tl.minimum(-2.0 * (scores / SOFTCAP), 88.0))
                scores = SOFTCAP * (2.0 / (1.0 + e) - 1.0)
            scores = tl.where(keys[None, :] <= positions[:, None], scores, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(scores, axis=1))
            m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
            alpha = tl.exp(m_i - m_safe)
            p = tl.exp(scores - m_safe[:, None])
            l_acc = tl.dot(p.to(DTYPE), ones, l_acc * alpha[:, None], input_precision="ieee")
            acc = tl.dot(p.to(DTYPE), v, acc * alpha[:, None], input_precision="ieee")
            m_i = m_new
        l_i = tl.max(l_acc, axis=1)
        # the combine's merge, for the rows it would merge this segment into (written relative to
        # the context, as the pair's store mask, since a padding row's position may pass 2**31)
        is_merged = segment * SEG - context <= rows - q_start
        is_first = segment == 0
        if CHECK:  # a segment of m = -inf (no finite score) would otherwise merge with weight 0
            bad = tl.where(is_merged, tl.maximum(bad, tl.where(tl.abs(m_i) < float("inf"), 0.0, 1.0)), bad)
        m_new = tl.maximum(m_all, m_i)
        alpha = tl.exp(m_all - m_new)
        beta = tl.exp(m_i - m_new)
        l_merged = l_all * alpha + l_i * beta
        acc_merged = acc_all * alpha[:, None] + acc * beta[:, None]
        m_all = tl.where(is_merged, tl.where(is_first, m_i, m_new), m_all)
        l_all = tl.where(is_merged, tl.where(is_first, l_i, l_merged), l_all)
        acc_all = tl.where(is_merged[:, None], tl.where(is_first[:, None], acc, acc_merged), acc_all)
    quotient = acc_all / l_all[:, None]
    out = quotient.to(DTYPE)
    tl.store(out_ptr + rows[:, None] * stride_ot + heads[:, None] * stride_oh + offs_d[None, :], out,
             mask=is_row[:, None])
    if CHECK:  # a non-finite l or acc of any merged segment stays non-finite through the merge
        bad = tl.maximum(bad, tl.where(tl.abs(l_all) < float("inf"), 0.0, 1.0))
        # the combine checks the quotient and its DTYPE rounding; the rounding of an inf or NaN is
        # inf or NaN, so the rounding alone flags the same rows (one reduction for the verifier)
        bad = tl.maximum(bad, tl.max(tl.where(tl.abs(out) < float("inf"), 0.0, 1.0), axis=1))
    tl.store(flag_ptr + rows * stride_ft + heads, bad, mask=is_row)


def check_attention_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                            query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor,
                            out: torch.Tensor, nonfinite: torch.Tensor, entry: PlanEntry) -> None:
    """The launch contract of attention_prefill_kernel (shared with the CPU path): the pair's input
    contract (kernels/attention.py ``check_paged_attention``, the same metadata premises left to
    kernels/metadata.py) and the combine's outputs. Written out here, not called, so that the
    verifier reads these asserts as this wrapper's (it reads the module's own functions)."""
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, page_size, Hkv, D]; block_table: [B, max_pages] int32
    # nonfinite: [T, Hq] fp32
    c, static = entry.constexpr_dict(), entry.static_dict()
    assert entry.kernel == "attention_prefill", f"entry {entry.key} is not an attention_prefill entry"
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
    assert tuple(out.shape) == tuple(q.shape) and out.is_contiguous() and out.dtype == q.dtype, \
        f"out must be a contiguous {q.dtype} tensor of q's shape {tuple(q.shape)}, got {tuple(out.shape)} {out.dtype}"
    assert tuple(nonfinite.shape) == (q.shape[0], num_heads) and nonfinite.dtype == torch.float32, \
        f"nonfinite must be [{q.shape[0]}, {num_heads}] float32, got {tuple(nonfinite.shape)} {nonfinite.dtype}"
    assert nonfinite.stride(1) == 1 and nonfinite.stride(0) >= num_heads, \
        f"nonfinite needs a unit head stride and rows that do not overlap, got {nonfinite.stride()}"
    devices = {t.device for t in (q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out,
                                  nonfinite)}
    assert len(devices) == 1, f"all tensors must be on one device, got {devices}"
    assert max(max_offset(q), max_offset(k_cache), max_offset(block_table), max_offset(out),
               max_offset(nonfinite)) <= MAX_INDEX, "a tensor is too large for 32-bit offsets"


def launch_attention_prefill(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                             query_start_loc: torch.Tensor, seq_lens: torch.Tensor, seq_idx: torch.Tensor,
                             out: torch.Tensor, nonfinite: torch.Tensor, entry: PlanEntry, *,
                             early: bool = True) -> None:
    """Check the contract, then launch attention_prefill_kernel on grid (cdiv(T, BLOCK_Q) + B, Hkv)
    (``early``: as in kernels/tensors.py ``launch_kwargs``)."""
    # q, out: [T, Hq, D]; k_cache, v_cache: [num_pages, PAGE_SIZE, Hkv, D]; nonfinite: [T, Hq] fp32
    check_attention_prefill(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, nonfinite,
                            entry)
    if q.shape[0] == 0:
        return
    grid = (triton.cdiv(q.shape[0], entry.constexpr_dict()["BLOCK_Q"]) + block_table.shape[0], k_cache.shape[2])
    attention_prefill_kernel[grid](
        q, k_cache, v_cache, out, nonfinite, block_table, query_start_loc, seq_lens, seq_idx, q.shape[0], q.stride(0),
        q.stride(1), out.stride(0), out.stride(1), nonfinite.stride(0), block_table.stride(0), k_cache.stride(0),
        k_cache.stride(1), k_cache.stride(2), **launch_kwargs(entry, early=early))
