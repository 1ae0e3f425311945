"""The Triton kernels themselves, run by Triton's CPU interpreter at small shapes.

Run as ``TRITON_INTERPRET=1 python -m tests.kernels.interpreter_checks``; prints one JSON object
``{check: {"status": "ok" | "fail" | "unsupported", "detail": str}}``. test_interpreter.py runs it in a subprocess because
the interpreter must be chosen before triton.language is imported.

What the interpreter can and cannot show: it executes each program's tile operations with
numpy, so it checks the kernels' indexing, masking, loop bounds and arithmetic. Its own
``tl.dot`` is a numpy matmul of the tile, whose bits for a row may depend on the row's position
inside the tile (BLAS micro-kernel edges); on the GPU, that ``tl.dot`` gives a row the same bits
wherever it sits is a trusted premise (checked empirically by tests/gpu). Here ``tl.dot`` is
replaced by a product sum that is row-position independent by construction (fp32 products,
a fixed pairwise tree over K, then the accumulator added), so the checks exercise everything
else bitwise: rows of matmul at any in-tile offset, and attention queries at any offset of
their query block, with the block's extra fully masked KV tiles. Two Triton 3.6 interpreter
limits also apply: bf16 ``tl.dot`` operands are multiplied as raw uint16 bit patterns (bf16
matmul and attention are reported unsupported), and fp32 -> bf16 casts truncate instead of
rounding to nearest even, so bf16 results are compared within tolerance, never bitwise,
against the CPU path.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import traceback
from concurrent.futures import ProcessPoolExecutor
from dataclasses import fields, replace
from typing import Callable

import torch

from kernels import configs, cpu_ops, metadata, ops
from kernels.attention import launch_attention_partial, split_scratch
from kernels.attention_combine import launch_attention_combine
from kernels.attention_prefill import launch_attention_prefill
from kernels.embedding import launch_embedding
from kernels.greedy import greedy_argmax
from kernels.step_io import DeviceSlots, put_outputs, take_tokens
from kernels.launch import require, use_plan
from kernels.matmul import launch_matmul
from kernels.matmul_combine import launch_matmul_combine
from kernels.matmul_combine_norm import launch_matmul_combine_norm
from kernels.matmul_silu import launch_matmul_silu
from kernels.matmul_split import launch_matmul_split, split_partials
from kernels.launch_config import LaunchConfig
from kernels.matmul_configs import SPLIT_BLOCK_K_FP32
from kernels.plan import PlanEntry, plan_for
from kernels.rmsnorm import launch_rms_norm
from kernels.rope_store_kv import launch_rope_store_kv
from kernels.shapes import ModelShape
from kernels.silu_mul import launch_silu_mul
from kernels.tensors import dtype_name
from bench.greedy_tokens import adversarial_rows
from engine.host_logits import allocate_device_slots
from tests.kernels import reference
from tests.kernels.attention_cases import Step, make_request, one_kernel_attention, run_steps, schedule_failures
from tests.kernels.gemma_checks import check_gemma
from tests.kernels.finiteness_cases import attention_flag_failures, combine_flag_failures, rope_store_kv_flag_failures
from tests.kernels.invariance import Case, bits_equal, fill_rows, row_invariance_failures

# Small enough for the interpreter: 2 query heads share 1 KV head, 16-slot pages.
# The down projection (N = 32, K = 128) takes the fixed split-K pair in float32.
SHAPE = ModelShape(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16, intermediate_size=128,
                   vocab_size=64, page_size=16)
CASES = [Case(2, 0, "random", 1), Case(5, 3, "nan", 2), Case(9, 6, "huge", 3), Case(17, 0, "zero", 4)]


def _dt(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def triton_linear(x: torch.Tensor, weight: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    out_dtype = out_dtype or x.dtype
    entry = require(configs.matmul_config(n=weight.shape[0], k=weight.shape[1], dtype=dtype_name(x.dtype),
                                          has_bias=False, out_dtype=dtype_name(out_dtype)))
    out = torch.empty(x.shape[0], weight.shape[0], dtype=out_dtype)
    launch_matmul(x, weight, None, out, entry)
    return out


def triton_split_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The plan's split-K pair, launched as ops.linear launches it on CUDA."""
    split, combine = (require(c) for c in configs.linear_configs(
        n=weight.shape[0], k=weight.shape[1], dtype=dtype_name(x.dtype), has_bias=False, out_dtype=dtype_name(x.dtype)))
    partial = split_partials(x, split)
    out = torch.empty(x.shape[0], weight.shape[0], dtype=x.dtype)
    launch_matmul_split(x, weight, partial, split)
    launch_matmul_combine(partial, None, out, combine)
    return out


def triton_attention(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, scale, seq_idx=None,
                     nonfinite=None):
    """The plan's attention kernels, launched as ops.paged_attention launches them on CUDA: the pair,
    or for a long launch or a KV of one segment the one-kernel form."""
    seq_idx = metadata.token_requests(query_start_loc, q.shape[0]) if seq_idx is None else seq_idx
    out = torch.empty_like(q)
    flags = torch.full((q.shape[0], q.shape[1]), -1.0) if nonfinite is None else nonfinite
    fused = ops.prefill_attention_entry(q, k_cache, block_table, scale)
    if fused is not None:
        launch_attention_prefill(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, out, flags,
                                 fused)
        return out
    entry, combine = ops.attention_entries(q, k_cache, block_table, scale)  # a decode step: the decode bucket
    m, l, acc = split_scratch(q, block_table, entry)
    launch_attention_partial(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx, m, l, acc, entry)
    launch_attention_combine(m, l, acc, query_start_loc, seq_lens, seq_idx, out, flags, combine)
    return out


class Unsupported(Exception):
    """The interpreter cannot run this check; the message says why."""


def bf16_dot_unsupported(what: str) -> Unsupported:
    return Unsupported("Triton 3.6's interpreter multiplies bf16 tl.dot operands as their raw uint16 bit patterns "
                       f"(create_dot has no bf16 conversion); bf16 {what} runs in tests/gpu")


def check_matmul(dtype: torch.dtype) -> str:
    if dtype == torch.bfloat16:
        raise bf16_dot_unsupported("matmul")
    gen = torch.Generator().manual_seed(0)
    x, w = fill_rows("random", (40, 32), dtype, gen), (torch.randn(64, 32, generator=gen) / 6).to(dtype)
    got = triton_linear(x, w, torch.float32)
    reference.assert_close(got, reference.linear(x, w), torch.float32, what="interpreted matmul")
    block_m = configs.matmul_config(n=64, k=32, dtype=dtype_name(dtype), has_bias=False,
                                    out_dtype="float32").constexpr_dict()["BLOCK_M"]
    cases = [Case(block_m + 3, block_m, "random", 5), Case(2 * block_m, 0, "nan", 6), Case(3, 0, "zero", 7),
             Case(9, 5, "random", 8)]
    failures = row_invariance_failures(lambda rows: triton_linear(rows, w, torch.float32), (x[:2],),
                                       lambda kind, n, g: (fill_rows(kind, (n, 32), dtype, g),), cases)
    assert not failures, failures
    return "rows equal at every in-tile offset"


def check_matmul_split(dtype: torch.dtype) -> str:
    if dtype == torch.bfloat16:
        raise bf16_dot_unsupported("split matmul")
    gen = torch.Generator().manual_seed(9)
    n, k = SHAPE.hidden_size, SHAPE.intermediate_size
    x, w = fill_rows("random", (40, k), dtype, gen), (torch.randn(n, k, generator=gen) / 11).to(dtype)
    got = triton_split_linear(x, w)
    reference.assert_close(got, reference.linear(x, w), dtype, what="interpreted split matmul")
    # The interpreter's dot here is the CPU path's product tree, so the same split arithmetic is the same bits.
    assert bits_equal(got, ops.linear(x, w)), "the interpreted split-K pair differs from the CPU path"
    block_m = configs.matmul_split_config(n=n, k=k, dtype=dtype_name(dtype)).constexpr_dict()["BLOCK_M"]
    cases = [Case(block_m + 3, block_m, "random", 5), Case(2 * block_m, 0, "nan", 6), Case(3, 0, "zero", 7),
             Case(9, 5, "huge", 8)]
    failures = row_invariance_failures(lambda rows: triton_split_linear(rows, w), (x[:2],),
                                       lambda kind, rows, g: (fill_rows(kind, (rows, k), dtype, g),), cases)
    assert not failures, failures
    fold = require(configs.matmul_combine_norm_config(hidden_size=n, splits=split_count(n, k, dtype),
                                                      eps=SHAPE.rms_norm_eps, dtype=dtype_name(dtype)))
    residual, norm_w = fill_rows("random", (40, n), dtype, gen), (torch.rand(n, generator=gen) + 0.5).to(dtype)
    partial = ops.linear_unfolded(x, w).partial  # the CPU path's partials
    fused = torch.empty(40, n, dtype=dtype), torch.empty(40, n, dtype=dtype)
    launch_matmul_combine_norm(partial, residual, norm_w, *fused, fold)
    norm = require(configs.rms_norm_config(hidden_size=n, eps=SHAPE.rms_norm_eps, has_residual=True,
                                           dtype=dtype_name(dtype)))
    separate = torch.empty(40, n, dtype=dtype), torch.empty(40, n, dtype=dtype)
    launch_rms_norm(got, residual, norm_w, *separate, norm)  # the interpreter's tl.sum in both
    assert all(bits_equal(a, b) for a, b in zip(fused, separate)), "the interpreted fold + norm differs"
    return "split-K rows equal at every in-tile offset and equal to the CPU path bitwise; fold + norm too"


def ranged_matmul_entry(n: int, k: int, splits: int, lockstep: bool, block_m: int) -> PlanEntry:
    """A float32 one-launch matmul entry with ``splits`` K ranges (bf16 plans hold these; float32 plans
    split across programs instead), 16-deep K steps as the split pair's."""
    constexprs = {"N": n, "K": k, "BLOCK_M": block_m, "BLOCK_N": 32, "BLOCK_K": SPLIT_BLOCK_K_FP32, "HAS_BIAS": False,
                  "OUT_DTYPE": "float32", "N_MAJOR": False, "SPLITS": splits, "LOCKSTEP": lockstep}
    config = LaunchConfig(kernel="matmul", key=f"matmul.n{n}_k{k}_r{splits}" + ("_lockstep" if lockstep else ""),
                          constexprs=tuple(sorted(constexprs.items())), num_warps=4, num_stages=2,
                          static=(("dtype", "float32"), ("k", k), ("n", n), ("out_dtype", "float32")))
    return PlanEntry.from_config(config, ("check",))


def check_matmul_ranges(dtype: torch.dtype) -> str:
    """K ranges inside one program: side by side (the decode bucket's form) and one after another give
    the split-K pair's bits and the CPU path's, and rows stay invariant."""
    if dtype == torch.bfloat16:
        raise bf16_dot_unsupported("ranged matmul")
    gen = torch.Generator().manual_seed(10)
    n, k = SHAPE.hidden_size, SHAPE.intermediate_size
    x, w = fill_rows("random", (40, k), dtype, gen), (torch.randn(n, k, generator=gen) / 11).to(dtype)
    pair = triton_split_linear(x, w)
    splits = split_count(n, k, dtype)

    def ranged(rows: torch.Tensor, entry: PlanEntry) -> torch.Tensor:
        out = torch.empty(rows.shape[0], n, dtype=dtype)
        launch_matmul(rows, w, None, out, entry)
        return out
    failures = []
    for lockstep, block_m in ((True, 16), (False, 32)):
        entry = ranged_matmul_entry(n, k, splits, lockstep, block_m)
        got = ranged(x, entry)
        cpu = torch.empty_like(got)
        cpu_ops.matmul(x, w, None, cpu, entry)
        assert bits_equal(got, pair), f"{entry.key} differs from the split-K pair with the same ranges"
        assert bits_equal(got, cpu), f"{entry.key} differs from the CPU path"
        cases = [Case(block_m + 3, block_m, "random", 5), Case(2 * block_m, 0, "nan", 6), Case(9, 5, "huge", 8)]
        failures += row_invariance_failures(lambda rows, e=entry: ranged(rows, e), (x[:2],),
                                            lambda kind, rows, g: (fill_rows(kind, (rows, k), dtype, g),), cases)
    assert not failures, failures
    return f"{splits} ranges side by side and in sequence equal the split-K pair and the CPU path bitwise; rows invariant"


def triton_gate_up_silu(x: torch.Tensor, gate_up: torch.Tensor) -> torch.Tensor:
    """The gate/up projection with SiLU in its epilogue, launched with the bucket ops picks for x's rows."""
    width = gate_up.shape[0] // 2
    entry, = (require(c) for c in configs.matmul_silu_configs(intermediate_size=width, k=gate_up.shape[1],
                                                              dtype=dtype_name(x.dtype), num_rows=x.shape[0]))
    out = torch.empty(x.shape[0], width, dtype=x.dtype)
    launch_matmul_silu(x, gate_up, out, entry)
    return out


def check_matmul_silu(dtype: torch.dtype) -> str:
    if dtype == torch.bfloat16:
        raise bf16_dot_unsupported("matmul_silu")
    gen = torch.Generator().manual_seed(11)
    width, k = SHAPE.intermediate_size, SHAPE.hidden_size
    x, w = fill_rows("random", (80, k), dtype, gen), (torch.randn(2 * width, k, generator=gen) / 2).to(dtype)
    got = triton_gate_up_silu(x, w)  # 80 rows: the prefill bucket
    reference.assert_close(got, reference.silu_mul(reference.linear(x, w)), dtype,
                           what="interpreted matmul_silu")
    # The two launches it replaces, interpreted too (tl.exp is numpy's here, not the CPU path's exp).
    silu_entry = require(configs.silu_mul_config(intermediate_size=width, dtype=dtype_name(dtype)))
    separate = torch.empty_like(got)
    launch_silu_mul(triton_linear(x, w), separate, silu_entry)
    assert bits_equal(got, separate), "the interpreted fused launch differs from matmul then silu_mul"
    cases = CASES + [Case(40, 20, "huge", 5), Case(70, 64, "random", 6)]  # the middle and prefill buckets
    failures = row_invariance_failures(lambda rows: triton_gate_up_silu(rows, w), (x[:2],),
                                       lambda kind, rows, g: (fill_rows(kind, (rows, k), dtype, g),), cases)
    assert not failures, failures
    return "rows equal in every bucket and at every in-tile offset, and equal to matmul then silu_mul bitwise"


def split_count(n: int, k: int, dtype: torch.dtype) -> int:
    return configs.matmul_splits(n=n, k=k, dtype=dtype_name(dtype))


def check_rowwise(dtype: torch.dtype) -> str:
    gen = torch.Generator().manual_seed(1)
    h, eps = SHAPE.hidden_size, SHAPE.rms_norm_eps
    weight = (torch.rand(h, generator=gen) + 0.5).to(dtype)
    entry = require(configs.rms_norm_config(hidden_size=h, eps=eps, has_residual=True, dtype=dtype_name(dtype)))

    def norm(x, res):
        out, res_out = torch.empty_like(x), torch.empty_like(x)
        launch_rms_norm(x, res, weight, out, res_out, entry)
        return out, res_out
    selected = (fill_rows("random", (2, h), dtype, gen), fill_rows("random", (2, h), dtype, gen))
    failures = row_invariance_failures(norm, selected, lambda k, n, g: (fill_rows(k, (n, h), dtype, g),) * 2, CASES)
    out, res_out = norm(*selected)
    cpu_out, cpu_res = torch.empty_like(out), torch.empty_like(out)
    cpu_ops.rms_norm(*selected, weight, cpu_out, cpu_res, entry)
    reference.assert_close(out, reference.rms_norm(*selected[:1], weight, eps, selected[1])[0], dtype, what="rms")
    if dtype == torch.float32:  # the interpreter truncates fp32 -> bf16 casts (module docstring)
        assert bits_equal(res_out, cpu_res), "residual_out differs from the CPU path"

    silu_entry = require(configs.silu_mul_config(intermediate_size=SHAPE.intermediate_size, dtype=dtype_name(dtype)))

    def silu(gu):
        out = torch.empty(gu.shape[0], gu.shape[1] // 2, dtype=dtype)
        launch_silu_mul(gu, out, silu_entry)
        return out
    width = 2 * SHAPE.intermediate_size
    gate_up = (fill_rows("random", (2, width), dtype, gen) * 4,)
    failures += row_invariance_failures(silu, gate_up, lambda k, n, g: (fill_rows(k, (n, width), dtype, g),), CASES)
    reference.assert_close(silu(*gate_up), reference.silu_mul(*gate_up), dtype, what="silu_mul")

    emb_entry = require(configs.embedding_config(vocab_size=64, hidden_size=h, dtype=dtype_name(dtype)))
    emb_table = fill_rows("random", (64, h), dtype, gen)
    ids = torch.tensor([5, 0, 63])
    out = torch.empty(3, h, dtype=dtype)
    launch_embedding(ids, emb_table, out, emb_entry)
    assert bits_equal(out, emb_table[ids]), "embedding rows differ from the table"
    assert not failures, failures
    return "rms_norm, silu_mul rows invariant; embedding exact"


def check_rope_store_kv(dtype: torch.dtype) -> str:
    """RoPE of q and k plus the KV write: rows invariant, the CPU path's bits, only the named slots written."""
    gen = torch.Generator().manual_seed(2)
    hq, hkv, d = SHAPE.num_heads, SHAPE.num_kv_heads, SHAPE.head_dim
    entry = require(configs.rope_store_kv_config(num_heads=hq, num_kv_heads=hkv, head_dim=d, page_size=16,
                                                 dtype=dtype_name(dtype)))
    table = reference.rope_table(64, d, SHAPE.rope_theta)

    def fused(q, k, v, positions, slots, launch=launch_rope_store_kv):
        q_out = torch.empty_like(q)
        k_cache, v_cache = torch.full((4, 16, hkv, d), float("nan"), dtype=dtype), torch.zeros(4, 16, hkv, d,
                                                                                                dtype=dtype)
        flags = torch.full((q.shape[0], hkv), -1.0)
        launch(q, k, v, positions, table, q_out, k_cache, v_cache, slots, flags, entry)
        flat = k_cache.view(-1, hkv, d), v_cache.view(-1, hkv, d)
        return q_out, flat[0][slots], flat[1][slots], flags, k_cache, v_cache

    selected = (fill_rows("random", (2, hq, d), dtype, gen), fill_rows("random", (2, hkv, d), dtype, gen),
                fill_rows("random", (2, hkv, d), dtype, gen), torch.tensor([0, 63]), torch.tensor([40, 3]))

    def rows(q, k, v, positions, slots):
        return fused(q, k, v, positions, slots)[:4]

    def make_others(kind, n, g):  # companions take distinct slots other than the selected rows'
        free = torch.tensor([s for s in range(64) if s not in (40, 3)])
        return (fill_rows(kind, (n, hq, d), dtype, g), fill_rows(kind, (n, hkv, d), dtype, g),
                fill_rows(kind, (n, hkv, d), dtype, g), torch.randint(0, 64, (n,), generator=g),
                free[torch.randperm(len(free), generator=g)[:n]])
    failures = row_invariance_failures(rows, selected, make_others, CASES)
    q_out, k_rows, v_rows, flags, k_cache, v_cache = fused(*selected)
    cpu = fused(*selected, launch=cpu_ops.rope_store_kv)
    for name, got, want in (("q_out", q_out, cpu[0]), ("k", k_rows, cpu[1]), ("v", v_rows, cpu[2])):
        if dtype == torch.float32:  # the interpreter truncates fp32 -> bf16 casts (module docstring)
            assert bits_equal(got, want), f"{name} differs from the CPU path"
        else:
            reference.assert_close(got, want, dtype, what=f"interpreted {name}")
    reference.assert_close(q_out, reference.rope(selected[0], selected[3], table), dtype, what="rope q")
    reference.assert_close(k_rows, reference.rope(selected[1], selected[3], table), dtype, what="rope k")
    assert bits_equal(v_rows, selected[2]), "v rows are not copied bit for bit"
    assert (flags == 0).all(), f"finite rows flagged: {flags.flatten().tolist()}"
    untouched = torch.ones(64, dtype=torch.bool)
    untouched[selected[4]] = False
    assert torch.isnan(k_cache.view(64, -1)[untouched]).all() and (v_cache.view(64, -1)[untouched] == 0).all()
    assert not failures, failures
    return "q_out, K and V rows invariant and match the CPU path (bitwise in float32); only the named slots written"


def check_attention_small_pages(dtype: torch.dtype) -> str:
    """4-slot pages: one KV tile spans several pages, each key read through its own page id."""
    if dtype == torch.bfloat16:
        raise Unsupported("bf16 attention uses bf16 tl.dot (see check_attention)")
    scale = SHAPE.head_dim ** -0.5
    request = make_request(150, 2, 1, 16, dtype, torch.Generator().manual_seed(5))
    with use_plan(plan_for(replace(SHAPE, page_size=4))):
        got = run_steps([Step(request, 0, 150)], page_size=4, scale=scale, gen=torch.Generator().manual_seed(5),
                        attention=triton_attention)[0]
        failures = schedule_failures(request, [(0, 6), (6, 71), (71, 72), (72, 150)], [[], [], [], []], [0] * 4,
                                     page_size=4, scale=scale, seed=5, poison="inf", attention=triton_attention)
    reference.assert_close(got, reference.attention(request, scale), dtype, what="interpreted attention, 4-slot pages")
    assert not failures, failures
    return "KV tiles over 4-slot pages: accurate; prefill = chunked = decode bitwise"


def check_attention(dtype: torch.dtype) -> str:
    if dtype == torch.bfloat16:
        raise Unsupported("bf16 attention uses bf16 tl.dot, which Triton 3.6's interpreter multiplies as raw "
                          "uint16 bit patterns; bf16 attention runs in tests/gpu")
    scale = SHAPE.head_dim ** -0.5
    request = make_request(160, 2, 1, 16, dtype, torch.Generator().manual_seed(3))
    got = run_steps([Step(request, 0, 160)], page_size=16, scale=scale, gen=torch.Generator().manual_seed(3),
                    attention=triton_attention)[0]
    reference.assert_close(got, reference.attention(request, scale), dtype, what="interpreted attention")
    other = make_request(9, 2, 1, 16, dtype, torch.Generator().manual_seed(4), fill="nan")
    # a page-aligned chunk, a ragged one whose query blocks span KV tiles, a decode step, the rest
    chunks = [(0, 16), (16, 130), (130, 131), (131, 160)]
    companions = [[], [Step(other, 0, 9)], [Step(other, 3, 4)], []]
    failures = schedule_failures(request, chunks, companions, [0, 1, 0, 0], page_size=16, scale=scale, seed=3,
                                 poison="nan", attention=triton_attention)
    assert not failures, failures
    # KV of one segment: a short prompt and its decode step, both in the one-kernel form (decode's tile)
    short = make_request(40, 2, 1, 16, dtype, torch.Generator().manual_seed(5))
    failures = schedule_failures(short, [(0, 39), (39, 40)], [[], [Step(other, 3, 4)]], [0, 1], page_size=16,
                                 scale=scale, seed=5, poison="nan", attention=triton_attention)
    assert not failures, failures
    return ("prefill (the one-kernel form) = chunked (the pair, merges of 2 heads a program, and the one-kernel "
            "form) = decode (the pair, 1 head, past one segment; the one-kernel form's decode tile within one) "
            "bitwise, NaN neighbours and poisoned slots ignored")


def bf16_flags_unsupported() -> Unsupported:
    return Unsupported("bf16 attention uses bf16 tl.dot (see check_attention); bf16 flags run in tests/gpu")


def check_finiteness(dtype: torch.dtype) -> str:
    """The kernels' run-time finiteness flags (kernels/finiteness.py) on the cases the CPU path passes;
    the combine's are check_finiteness_combine's."""
    if dtype == torch.bfloat16:
        raise bf16_flags_unsupported()
    store = require(configs.rope_store_kv_config(num_heads=2, num_kv_heads=1, head_dim=16, page_size=16,
                                                 dtype="float32"))
    failures = rope_store_kv_flag_failures(launch_rope_store_kv, store)
    failures += attention_flag_failures(triton_attention, num_heads=2, num_kv_heads=1, head_dim=16, page_size=16)
    failures += [f"one kernel: {f}" for f in attention_flag_failures(one_kernel_attention(kernel=True), num_heads=2,
                                                                      num_kv_heads=1, head_dim=16, page_size=16)]
    assert not failures, failures[:5]
    return ("rope_store_kv, the pair and the one-kernel form flag exactly the poisoned (token, head); q, K/V and "
            "overflow caught")


def check_finiteness_combine(dtype: torch.dtype, block_h: int) -> str:
    """The combine's finiteness flags with ``block_h`` heads a program: 1 for decode steps, 2 for the
    prefill bucket (210 launches each, the slowest checks here)."""
    if dtype == torch.bfloat16:
        raise bf16_flags_unsupported()
    combine = require(configs.attention_combine_config(num_heads=2, head_dim=16, seg=128, dtype="float32",
                                                       block_h=block_h))
    failures = combine_flag_failures(launch_attention_combine, combine)
    assert not failures, failures[:5]
    return f"the combine ({block_h} head(s) a program) flags exactly the poisoned (token, head)"


def check_greedy(dtype: torch.dtype) -> str:
    """kernels/greedy.py's two launches give ``torch.argmax`` of each row at several part counts: ties
    across part boundaries, NaN, infinities, rows of -inf and of signed zeros."""
    if dtype == torch.bfloat16:
        raise Unsupported("logits are float32 in every plan: the greedy token has no bf16 form")
    vocab_size, counts = 4096, [1, 2, 16, 64, 256]
    zeros = torch.zeros(3, vocab_size)
    zeros[0, :7] = -0.0  # -0.0 before +0.0: the first of the equal zeros wins
    zeros[1, 2048:] = -0.0
    zeros[2] = -1.0
    zeros[2, 300], zeros[2, 4000] = -0.0, 0.0
    rows = adversarial_rows(4, vocab_size, counts, device="cpu") + [zeros]
    for logits in rows:
        for parts in counts:
            got, want = greedy_argmax(logits, parts), torch.argmax(logits, dim=-1)
            assert torch.equal(got, want), f"{parts} parts: {got.tolist()} != argmax {want.tolist()}"
    return f"{len(rows) * len(counts)} row sets x part counts equal to torch.argmax"


def check_step_io(dtype: torch.dtype) -> str:
    """kernels/step_io.py's two copies: a decode step's outputs land in the staged slot's bytes (those
    the copy to the host reads) and nowhere else, none at slot -1; taken tokens come from the
    staged source slot, rows without a source keep their staged id."""
    if dtype == torch.bfloat16:
        raise Unsupported("slot rows are float32 logits and int64 tokens in every plan: no bf16 form")
    num_slots, max_rows, vocab_size, num_flags = 4, 5, 1001, 7  # 1,001: a partial last block
    views, every = allocate_device_slots(num_slots, device=torch.device("cpu"), max_num_rows=max_rows,
                                         vocab_size=vocab_size, max_num_flags=num_flags)
    # the kernels see slots 1..3 as 0..2, so a write to "slot -1" would land in slot 0's bytes
    slots_of, views = DeviceSlots(*(getattr(every, f.name)[1:] for f in fields(DeviceSlots))), views[1:]
    block = every.flags.untyped_storage()
    before = torch.frombuffer(bytearray(bytes(block)), dtype=torch.uint8)  # zeros
    gen = torch.Generator().manual_seed(5)
    wide = torch.randn(4, vocab_size + 24, generator=gen)  # rows of stride V + 24
    wide[0, 3], wide[1, 1000], wide[2, 0], wide[3, 17] = float("nan"), float("inf"), -0.0, float("-inf")
    logits = wide[:, :vocab_size]
    tokens, ids = torch.tensor([7, 0, 1000, 5]), torch.tensor([11, 12, 13, 14])
    flags = torch.tensor([0.0, 1.0, float("nan"), 0.0])
    put_outputs(logits, tokens, ids, flags, torch.tensor([-1, 0]), slots_of, block=256)
    assert torch.equal(torch.frombuffer(bytearray(bytes(block)), dtype=torch.uint8), before), "slot -1 wrote"
    put_outputs(logits, tokens, ids, flags, torch.tensor([1, 0]), slots_of, block=256)
    slot = views[1]
    assert torch.equal(slot.logits[:4].view(torch.int32), logits.contiguous().view(torch.int32)), "rows differ"
    assert torch.equal(slot.tokens[:4], tokens) and torch.equal(slot.inputs[:4], ids), "tokens differ"
    assert torch.equal(slot.flags[:4].view(torch.int32), flags.view(torch.int32)), "flags differ"
    after = torch.frombuffer(bytearray(bytes(block)), dtype=torch.uint8)
    written = torch.zeros_like(after, dtype=torch.bool)
    base = every.flags.data_ptr()
    for field, count in ((slot.logits, 4 * vocab_size * 4), (slot.tokens, 32), (slot.inputs, 32), (slot.flags, 16)):
        start = field.data_ptr() - base
        written[start:start + count] = True
    changed = after != before
    assert not (changed & ~written).any(), "bytes outside slot 1's first four rows changed"
    slots_of.tokens[2, :4] = torch.tensor([101, 102, 103, 104])
    staged = torch.tensor([0, 0, 55, 0, 66])
    take_tokens(staged, torch.tensor([3, 0, -1, 3, -1]), torch.tensor([1, 2]), slots_of)
    assert staged.tolist() == [104, 101, 55, 104, 66], staged.tolist()
    return "outputs only in the staged slot's bytes (none at -1); tokens taken from the source slot"


# The slowest first: main() hands the checks to its workers in this order, so none is left
# running alone at the end.
CHECKS: dict[str, Callable[[torch.dtype], str]] = {
    "finiteness_combine_1": lambda dtype: check_finiteness_combine(dtype, 1),
    "finiteness_combine_2": lambda dtype: check_finiteness_combine(dtype, 2), "finiteness": check_finiteness,
    "matmul": check_matmul, "matmul_split": check_matmul_split, "matmul_ranges": check_matmul_ranges,
    "matmul_silu": check_matmul_silu,
    "rowwise": check_rowwise, "rope_store_kv": check_rope_store_kv, "attention": check_attention,
    "attention_small_pages": check_attention_small_pages, "gemma": lambda dtype: check_gemma(SHAPE, dtype),
    "greedy": check_greedy, "step_io": check_step_io}
DTYPES = ("float32", "bfloat16")


def _allow_scalar_loop_bounds() -> None:
    """Triton 3.6's interpreter turns a loaded scalar (a 1-element numpy array) into a Python int
    with ``int(array)``, which NumPy 2 rejects; attention's loop bound is such a scalar."""
    import triton.runtime.interpreter as interpreter

    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
    interpreter._patch_lang_tensor = patched


def _position_independent_dot() -> None:
    """Replace the interpreter's tl.dot (a numpy matmul) by a product sum whose bits for an output
    element depend only on its row of a, its column of b and its accumulator (module docstring)."""
    import numpy as np
    import triton.runtime.interpreter as interpreter

    original = interpreter.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.data.dtype != np.float32 or b.data.dtype != np.float32:
            return original(self, a, b, d, input_precision, max_num_imprecise_acc)
        terms = a.data[:, :, None] * b.data[None, :, :]  # [M, K, N] fp32 products
        width = 1 << (terms.shape[1] - 1).bit_length()
        terms = np.concatenate([terms, np.zeros((terms.shape[0], width - terms.shape[1], terms.shape[2]),
                                                np.float32)], axis=1)
        while width > 1:
            width //= 2
            terms = terms[:, :width] + terms[:, width:]
        return interpreter.TensorHandle(terms[:, 0] + d.data, d.dtype.scalar)
    interpreter.InterpreterBuilder.create_dot = create_dot


def prepare_interpreter_worker() -> bool:
    """Patch the interpreter for the checks (scalar loop bounds, position-independent fp32 dot) and
    use one thread; False, with a message, when this process does not run under the interpreter."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("run with TRITON_INTERPRET=1 (the interpreter is chosen at import time)", file=sys.stderr)
        return False
    _allow_scalar_loop_bounds()
    _position_independent_dot()
    torch.set_num_threads(1)
    return True


def in_workers(function: Callable, calls: list[tuple]) -> list:
    """``[function(*args) for args in calls]``, in worker processes under the interpreter (one a
    core, at most four), handed out in the order given: the interpreter runs on one thread, and
    these checks take minutes on one core."""
    workers = max(1, min(4, len(os.sched_getaffinity(0)), len(calls)))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=prepare_interpreter_worker) as pool:
        return list(pool.map(function, *zip(*calls)))


def run_check(name: str, dtype_label: str) -> dict:
    with use_plan(plan_for(replace(SHAPE, dtype=dtype_label))):
        try:
            return {"status": "ok", "detail": CHECKS[name](_dt(dtype_label))}
        except Unsupported as reason:
            return {"status": "unsupported", "detail": str(reason)}
        except Exception:  # every failure is reported, the other checks still run
            return {"status": "fail", "detail": traceback.format_exc()}


def main() -> int:
    if not prepare_interpreter_worker():
        return 2
    calls = [(name, dtype_label) for dtype_label in DTYPES for name in CHECKS]
    results = in_workers(run_check, calls)
    print(json.dumps({f"{name}-{dtype_label}": result for (name, dtype_label), result in zip(calls, results)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
