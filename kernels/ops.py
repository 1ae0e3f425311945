"""Public kernel API used by the engine: one function per op, dispatched on the tensor's device.

Every op derives its launch configuration from static shapes only (kernels/configs.py), is
admitted and recorded against the active sealed plan (kernels/launch.py), then runs the Triton
kernel on CUDA or the CPU path (kernels/cpu_ops.py, kernels/cpu_attention.py) on CPU. Both
paths check the same launch contract. Outputs are new tensors; activations and weights are
float32 or bfloat16 with fp32 accumulation everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels import configs, cpu_attention, cpu_ops, metadata
from kernels.attention import launch_attention_partial, split_scratch
from kernels.attention_combine import launch_attention_combine
from kernels.attention_prefill import launch_attention_prefill
from kernels.embedding import launch_embedding
from kernels.gelu_mul import launch_gelu_tanh_mul
from kernels.launch import active_plan, metadata_checks_enabled, require
from kernels.matmul import launch_matmul
from kernels.matmul_combine import launch_matmul_combine
from kernels.matmul_combine_norm import launch_matmul_combine_norm
from kernels.matmul_silu import launch_matmul_silu
from kernels.matmul_split import launch_matmul_split, split_partials
from kernels.plan import PlanEntry
from kernels.rmsnorm import launch_rms_norm
from kernels.rope_store_kv import launch_rope_store_kv
from kernels.silu_mul import launch_silu_mul
from kernels.softcap import launch_logit_softcap
from kernels.tensors import dtype_name

__all__ = ["Partials", "embedding", "rms_norm", "linear", "linear_unfolded", "select_rows", "silu_mul",
           "gate_up_silu_mul", "gelu_tanh_mul", "logit_softcap", "rope_store_kv", "attention_entries",
           "prefill_attention_entry",
           "paged_attention", "logits", "token_requests"]

token_requests = metadata.token_requests


def _on_cuda(*tensors: torch.Tensor) -> bool:
    kinds = {t.device.type for t in tensors}
    if kinds == {"cuda"}:
        return True
    if kinds == {"cpu"}:
        return False
    raise ValueError(f"tensors must all be on CUDA or all on CPU, got devices {sorted(kinds)}")


def embedding(token_ids: torch.Tensor, weight: torch.Tensor, *, scaled: bool = False) -> torch.Tensor:
    """Rows of ``weight`` [V, H] for ``token_ids`` [T] int64 -> [T, H]; ``scaled`` (Gemma3): times
    sqrt(H) rounded to the dtype (kernels/configs.py ``embedding_scale``)."""
    entry = require(configs.embedding_config(vocab_size=weight.shape[0], hidden_size=weight.shape[-1],
                                             dtype=dtype_name(weight.dtype), scaled=scaled))
    if metadata_checks_enabled():
        metadata.check_token_ids(token_ids, weight.shape[0])
    out = torch.empty(token_ids.shape[0], weight.shape[-1], dtype=weight.dtype, device=weight.device)
    if _on_cuda(token_ids, weight):
        launch_embedding(token_ids, weight, out, entry)
    else:
        cpu_ops.embedding(token_ids, weight, out, entry)
    return out


@dataclass(frozen=True, slots=True)
class Partials:
    """A split-K matmul's output before its fold: fp32 partials [SPLITS, T, N] (see :func:`linear_unfolded`)."""

    partial: torch.Tensor

    @property
    def num_rows(self) -> int:
        return self.partial.shape[1]


def rms_norm(x: torch.Tensor | Partials, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None, *, offset: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out, residual_out)`` with ``residual_out = x (+ residual)``, ``out = rmsnorm(residual_out) * weight``
    (``offset``, Gemma3: ``* (1 + weight)`` with one rounding).

    ``x`` may be the :class:`Partials` of a residual branch (``residual`` then required): its fold
    runs in the same launch as the residual add and the norm, with the separate fold's bits.
    """
    # x, residual, out, residual_out: [T, H]; weight: [H]
    if isinstance(x, Partials):
        if offset:
            raise ValueError("split-K partials are folded by Llama-style norms only; fold them with linear()")
        if residual is None:
            raise ValueError("rms_norm of split-K partials needs the residual they are added to")
        return _fold_norm(x, weight, eps, residual)
    entry = require(configs.rms_norm_config(hidden_size=x.shape[-1], eps=eps, has_residual=residual is not None,
                                            dtype=dtype_name(x.dtype), offset=offset))
    out, residual_out = torch.empty_like(x, memory_format=torch.contiguous_format), \
        torch.empty_like(x, memory_format=torch.contiguous_format)
    tensors = (x, weight) if residual is None else (x, weight, residual)
    if _on_cuda(*tensors):
        launch_rms_norm(x, residual, weight, out, residual_out, entry)
    else:
        cpu_ops.rms_norm(x, residual, weight, out, residual_out, entry)
    return out, residual_out


def _fold_norm(x: Partials, weight: torch.Tensor, eps: float,
               residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    entry = require(configs.matmul_combine_norm_config(hidden_size=residual.shape[-1], splits=x.partial.shape[0],
                                                       eps=eps, dtype=dtype_name(residual.dtype)))
    out = torch.empty(residual.shape, dtype=residual.dtype, device=residual.device)
    residual_out = torch.empty_like(out)
    if _on_cuda(x.partial, weight, residual):
        launch_matmul_combine_norm(x.partial, residual, weight, out, residual_out, entry)
    else:
        cpu_ops.matmul_combine_norm(x.partial, residual, weight, out, residual_out, entry)
    return out, residual_out


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """``x`` [T, K] @ ``weight`` [N, K]^T (+ ``bias`` [N]) -> [T, N] in ``out_dtype`` (default x.dtype).

    One launch, or for weights with a fixed split-K (kernels/matmul_configs.py ``matmul_splits``) two:
    fp32 partials of the K ranges, then their fold in ascending split order with the bias.
    """
    out_dtype = x.dtype if out_dtype is None else out_dtype
    planned = configs.linear_configs(n=weight.shape[0], k=weight.shape[-1], dtype=dtype_name(weight.dtype),
                                     has_bias=bias is not None, out_dtype=dtype_name(out_dtype), num_rows=x.shape[0])
    entries = [require(c) for c in planned]
    out = torch.empty(x.shape[0], weight.shape[0], dtype=out_dtype, device=x.device)
    on_cuda = _on_cuda(x, weight) if bias is None else _on_cuda(x, weight, bias)
    if len(entries) == 1:
        (launch_matmul if on_cuda else cpu_ops.matmul)(x, weight, bias, out, entries[0])
        return out
    split, combine = entries
    partial = split_partials(x, split)  # [SPLITS, T, N] fp32
    (launch_matmul_split if on_cuda else cpu_ops.matmul_split)(x, weight, partial, split)
    (launch_matmul_combine if on_cuda else cpu_ops.matmul_combine)(partial, bias, out, combine)
    return out


def linear_unfolded(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor | Partials:
    """``x @ weight.T`` of a residual branch: the output [T, N], or for a split-K weight its
    :class:`Partials`, which the :func:`rms_norm` after the branch folds (one launch fewer)."""
    planned = configs.linear_configs(n=weight.shape[0], k=weight.shape[-1], dtype=dtype_name(weight.dtype),
                                     has_bias=False, out_dtype=dtype_name(weight.dtype))
    if len(planned) == 1:
        return linear(x, weight)
    split = require(planned[0])
    partial = split_partials(x, split)  # [SPLITS, T, N] fp32
    (launch_matmul_split if _on_cuda(x, weight) else cpu_ops.matmul_split)(x, weight, partial, split)
    return Partials(partial)


def select_rows(x: torch.Tensor | Partials, rows: torch.Tensor) -> torch.Tensor | Partials:
    """Rows ``rows`` [S] int64 of ``x`` (of each split's partial for :class:`Partials`): an exact gather."""
    if isinstance(x, Partials):
        return Partials(x.partial.index_select(1, rows))
    return x.index_select(0, rows)


def logits(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Float32 logits ``x`` [T, H] @ ``weight`` [V, H]^T -> [T, V]."""
    return linear(x, weight, out_dtype=torch.float32)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """``silu(gate_up[:, :I]) * gate_up[:, I:]`` for ``gate_up`` [T, 2*I] -> [T, I]."""
    width = gate_up.shape[-1] // 2
    entry = require(configs.silu_mul_config(intermediate_size=width, dtype=dtype_name(gate_up.dtype)))
    out = torch.empty(gate_up.shape[0], width, dtype=gate_up.dtype, device=gate_up.device)
    if _on_cuda(gate_up):
        launch_silu_mul(gate_up, out, entry)
    else:
        cpu_ops.silu_mul(gate_up, out, entry)
    return out


def gate_up_silu_mul(x: torch.Tensor, gate_up: torch.Tensor) -> torch.Tensor:
    """``silu(x @ gate.T) * (x @ up.T)`` for ``x`` [T, K] and ``gate_up`` [2*I, K] = [gate | up] -> [T, I].

    One launch with the activation in the matmul's epilogue (kernels/matmul_silu.py), with the bits of
    :func:`silu_mul` of :func:`linear`; where the weight is split-K, those two.
    """
    width = gate_up.shape[0] // 2
    planned = configs.matmul_silu_configs(intermediate_size=width, k=gate_up.shape[-1],
                                          dtype=dtype_name(gate_up.dtype), num_rows=x.shape[0])
    if not planned:
        return silu_mul(linear(x, gate_up))
    entry = require(planned[0])
    out = torch.empty(x.shape[0], width, dtype=x.dtype, device=x.device)
    (launch_matmul_silu if _on_cuda(x, gate_up) else cpu_ops.matmul_silu)(x, gate_up, out, entry)
    return out


def gelu_tanh_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """GeGLU ``gelu_tanh(gate_up[:, :I]) * gate_up[:, I:]`` for ``gate_up`` [T, 2*I] -> [T, I]."""
    width = gate_up.shape[-1] // 2
    entry = require(configs.gelu_tanh_mul_config(intermediate_size=width, dtype=dtype_name(gate_up.dtype)))
    out = torch.empty(gate_up.shape[0], width, dtype=gate_up.dtype, device=gate_up.device)
    (launch_gelu_tanh_mul if _on_cuda(gate_up) else cpu_ops.gelu_tanh_mul)(gate_up, out, entry)
    return out


def logit_softcap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    """``cap * tanh(logits / cap)`` of float32 ``logits`` [S, V] -> new [S, V] float32."""
    entry = require(configs.logit_softcap_config(vocab_size=logits.shape[-1], cap=cap))
    out = torch.empty(logits.shape, dtype=torch.float32, device=logits.device)
    (launch_logit_softcap if _on_cuda(logits) else cpu_ops.logit_softcap)(logits, out, entry)
    return out


def _checks_finite() -> bool:
    """Whether the active plan was sealed with the run-time finiteness check (kernels/finiteness.py)."""
    plan = active_plan()
    return plan is None or plan.shape.check_finite  # no plan: require() refuses the launch anyway


def _flags(nonfinite: torch.Tensor | None, num_tokens: int, num_heads: int, device: torch.device) -> torch.Tensor:
    """The caller's ``[T, H]`` float32 flag view, or a scratch one for a caller that does not read them."""
    if nonfinite is not None:
        return nonfinite
    return torch.empty(num_tokens, num_heads, dtype=torch.float32, device=device)


def rope_store_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor,
                  k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
                  nonfinite: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate ``q`` [T, Hq, D] and ``k`` [T, Hkv, D] by ``positions`` [T]; write the rotated k and ``v``
    [T, Hkv, D] into the caches [num_pages, page_size, Hkv, D] at ``slot_mapping`` [T]; return the
    rotated q as a new contiguous [T, Hq, D] tensor. One launch.

    ``cos_sin`` [max_pos, D] float32 holds cos in its first D/2 columns and sin in its last D/2.
    ``nonfinite`` [T, Hkv] float32 receives the finiteness flag of each written K/V row (1.0: inf
    or NaN; 0.0 everywhere when the plan is sealed without the check). On CUDA the kernel reads
    ``positions``, ``slot_mapping`` and ``cos_sin`` before it waits for the previous launch
    (programmatic dependent launch): the launch just before this call must not write them (a forward
    stages them before its layers).
    """
    entry = require(configs.rope_store_kv_config(
        num_heads=q.shape[1], num_kv_heads=k_cache.shape[2], head_dim=k_cache.shape[3], page_size=k_cache.shape[1],
        dtype=dtype_name(k_cache.dtype), check_finite=_checks_finite()))
    if metadata_checks_enabled():
        metadata.check_positions(positions, cos_sin.shape[0])
        metadata.check_slots(slot_mapping, k_cache.shape[0] * k_cache.shape[1])
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    flags = _flags(nonfinite, k.shape[0], k_cache.shape[2], k.device)
    args = (q, k, v, positions, cos_sin, q_out, k_cache, v_cache, slot_mapping, flags, entry)
    on_cuda = _on_cuda(q, k, v, positions, cos_sin, k_cache, v_cache, slot_mapping)
    (launch_rope_store_kv if on_cuda else cpu_ops.rope_store_kv)(*args)
    return q_out


def attention_entries(q: torch.Tensor, k_cache: torch.Tensor, block_table: torch.Tensor, scale: float, *,
                      window: int = 0, softcap: float = 0.0) -> tuple[PlanEntry, PlanEntry]:
    """The plan entries of :func:`paged_attention`'s two launches: the KV walk's, and the merge's.

    A launch of no more tokens than requests (one query per request: a decode step) takes the
    decode bucket's tile where the shape has one (kernels/attention_configs.py
    ``decode_attention_config``); the choice changes no bits (the trusted ``dot-tile-shape``).
    Other launches merge several heads per program (``prefill_combine_heads``): elementwise
    arithmetic, the same per head.
    """
    # q: [T, Hq, D]; k_cache: [num_pages, page_size, Hkv, D]; block_table: [B, max_pages]
    shape = dict(num_heads=q.shape[1], num_kv_heads=k_cache.shape[2], head_dim=q.shape[-1],
                 page_size=k_cache.shape[1], scale=scale, dtype=dtype_name(q.dtype), window=window, softcap=softcap)
    is_decode = q.shape[0] <= block_table.shape[0]
    decode = configs.decode_attention_config(**shape) if is_decode else None
    entry = require(decode or configs.paged_attention_config(**shape))
    combine = require(configs.attention_combine_config(num_heads=q.shape[1], head_dim=q.shape[-1],
                                                       seg=entry.constexpr_dict()["SEG"], dtype=dtype_name(q.dtype),
                                                       check_finite=_checks_finite(), window=window,
                                                       block_h=1 if is_decode else configs.prefill_combine_heads(
                                                           q.shape[1])))
    return entry, combine


def prefill_attention_entry(q: torch.Tensor, k_cache: torch.Tensor, block_table: torch.Tensor, scale: float, *,
                            window: int = 0, softcap: float = 0.0, longest_kv_len: int = 0) -> PlanEntry | None:
    """The plan entry of the one-kernel form (kernels/attention_prefill.py) where :func:`paged_attention`
    takes it for this launch (kernels/attention_configs.py ``takes_prefill_attention``: full causal
    attention whose KV fits one segment, or long enough to fill the GPU with query blocks, none of
    which walks far longer than the rest), else None (the pair of :func:`attention_entries`). A
    launch of no more tokens than requests takes the decode bucket's tile, as the pair's walk does.
    ``longest_kv_len``: the launch's longest KV, a host int (0: not known, then the block table's
    width bounds it)."""
    # q: [T, Hq, D]; k_cache: [num_pages, page_size, Hkv, D]; block_table: [B, max_pages]
    dtype = dtype_name(q.dtype)
    if window:
        return None
    config = configs.prefill_attention_config(
        num_heads=q.shape[1], num_kv_heads=k_cache.shape[2], head_dim=q.shape[-1], page_size=k_cache.shape[1],
        scale=scale, dtype=dtype, softcap=softcap, check_finite=_checks_finite(),
        decode=q.shape[0] <= block_table.shape[0])
    longest = longest_kv_len or block_table.shape[1] * k_cache.shape[1]
    if not configs.takes_prefill_attention(num_tokens=q.shape[0], kv_len=longest, seg=config.constexpr_dict()["SEG"],
                                           dtype=dtype):
        return None
    return require(config)


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                    query_start_loc: torch.Tensor, seq_lens: torch.Tensor, scale: float,
                    seq_idx: torch.Tensor | None = None, nonfinite: torch.Tensor | None = None, *,
                    window: int = 0, softcap: float = 0.0, longest_kv_len: int = 0) -> torch.Tensor:
    """Causal attention of ``q`` [T, Hq, D] over each request's paged KV -> [T, Hq, D].

    Request b's queries are rows ``query_start_loc[b]:query_start_loc[b+1]``; ``seq_lens[b]``
    counts its KV including this step's tokens (already stored); query i sits at position
    ``seq_lens[b] - q_len_b + i`` and attends to keys 0..position, page by page in order; with a
    sliding ``window`` W > 0 only to the keys position - W < j <= position (W keys including its
    own, as transformers' sliding-window layers). ``softcap`` c > 0 replaces each scaled score s
    by ``c * tanh(s / c)`` before masking (attention logit softcapping); 0 is off. Both select the
    plan entries (``_w<W>``, ``_cap<c>``), so the plan must hold them.
    ``seq_idx`` [T] int32, each token's request, is :func:`token_requests` of ``query_start_loc``; a
    forward passes it in so that every layer does not recompute it. On CUDA the kernels read
    ``seq_idx``, ``query_start_loc`` and ``seq_lens`` before they wait for the previous launch
    (programmatic dependent launch): the launch just before this call must not write them (a forward
    stages them before its layers).

    Two launches (their entries: :func:`attention_entries`): the KV walk cut into segments of SEG
    keys (kernels/attention.py) stores each token's softmax state per segment to fp32 scratch
    allocated here, sized from the block table's width (so a captured graph, one table width,
    serves every decode step); the combine (kernels/attention_combine.py) merges a token's
    segments in ascending order and writes ``nonfinite`` [T, Hq] float32, the finiteness flag of
    each (token, head) (kernels/finiteness.py). A long launch, or one whose KV fits one segment
    (:func:`prefill_attention_entry`; ``longest_kv_len``, a host int, is its longest request's KV
    length, 0 if not known), runs both halves' arithmetic in one kernel instead
    (kernels/attention_prefill.py), without the scratch.
    """
    num_tokens = q.shape[0]
    fused = prefill_attention_entry(q, k_cache, block_table, scale, window=window, softcap=softcap,
                                    longest_kv_len=longest_kv_len)
    if metadata_checks_enabled():
        metadata.check_attention_metadata(query_start_loc, seq_lens, block_table, num_tokens,
                                          k_cache.shape[0], k_cache.shape[1])
        if seq_idx is not None:
            metadata.check_seq_idx(seq_idx, query_start_loc, num_tokens)
    # The kernels read seq_idx before their PDL wait (contract: immutable); computed here, by the launch
    # just before theirs, it is read only after that launch ends.
    early = seq_idx is not None
    if seq_idx is None:
        seq_idx = metadata.token_requests(query_start_loc, num_tokens)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    flags = _flags(nonfinite, num_tokens, q.shape[1], q.device)
    on_cuda = _on_cuda(q, k_cache, v_cache, block_table, query_start_loc, seq_lens)
    if fused is not None:
        if on_cuda:
            launch_attention_prefill(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, flags,
                                     fused, early=early)
        else:
            cpu_attention.attention_prefill(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out,
                                            flags, fused)
        return out
    entry, combine = attention_entries(q, k_cache, block_table, scale, window=window, softcap=softcap)
    m, l, acc = split_scratch(q, block_table, entry)  # m, l: [T, Hq, NUM_SEG]; acc: [T, Hq, NUM_SEG, D]
    if on_cuda:
        launch_attention_partial(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, m, l, acc,
                                 entry, early=early)
        launch_attention_combine(m, l, acc, query_start_loc, seq_lens, seq_idx, out, flags, combine)
    else:
        cpu_attention.attention_partial(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, m, l,
                                        acc, entry)
        cpu_attention.attention_combine(m, l, acc, query_start_loc, seq_lens, seq_idx, out, flags, combine)
    return out
