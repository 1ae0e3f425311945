"""The Triton kernels on CUDA: the CPU suite's invariance and accuracy properties, bf16 and fp32.

Run on a GPU machine: ``python -m pytest tests/gpu/test_kernels_gpu.py -q``. Besides the tiny
shape in both dtypes, the Llama-3.2-1B shape (bf16) is checked with batches that put the
selected rows at other offsets inside a BLOCK_M tile and in other tiles: the empirical check of
the premise that ``tl.dot`` gives a row the same bits wherever it sits in the tile.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
import torch

from kernels import configs, ops
from kernels.launch import use_plan
from kernels.matmul import matmul_kernel
from kernels.matmul_combine import matmul_combine_kernel
from kernels.matmul_split import matmul_split_kernel
from kernels.plan import plan_for, preset_plan
from kernels.shapes import preset
from tests.kernels import reference
from tests.kernels.attention_cases import (POISONS, Step, chunk_bounds, make_request, one_kernel_attention, run_steps,
                                          schedule_failures)
from tests.kernels.invariance import Case, bits_equal, row_invariance_failures, sweep
from tests.kernels.rowwise_ops import ROWWISE_OPS, scenario

pytestmark = pytest.mark.gpu
DEVICE = "cuda"
# Selected rows (up to 3) at in-tile offsets 0, 1, 63 and in later tiles, up to a 4096-row prefill.
TILE_CASES = [Case(67, 63, "random", 1), Case(130, 64, "nan", 2), Case(200, 1, "huge", 3),
              Case(1000, 937, "zero", 4), Case(4096, 4000, "random", 5)]


def _plan(dtype: str):
    return plan_for(replace(preset("tiny"), dtype=dtype))


@pytest.fixture(params=["float32", "bfloat16"])
def tiny(request):
    plan = _plan(request.param)
    with use_plan(plan):
        yield plan


def _dtype(plan) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[plan.shape.dtype]


@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("op", ROWWISE_OPS)
def test_tiny_rows_are_invariant_over_batch_sizes(tiny, op, strided):
    s = scenario(op, tiny.shape, _dtype(tiny), seed=1, num_selected=2, strided=strided, device=DEVICE)
    with use_plan(plan_for(s.shape)):
        failures = row_invariance_failures(s.fn, s.selected, s.make_others, sweep(2) + TILE_CASES[:3])
    assert not failures, failures[:3]


@pytest.mark.parametrize("op", [op for op in ROWWISE_OPS if op != "linear_bias"])
def test_llama_1b_rows_are_invariant_across_tiles(op):
    plan = preset_plan("llama-1b")
    s = scenario(op, plan.shape, torch.bfloat16, seed=2, num_selected=3, device=DEVICE)
    with use_plan(plan if s.shape == plan.shape else plan_for(s.shape)):  # Gemma's ops: its variant's plan
        failures = row_invariance_failures(s.fn, s.selected, s.make_others, sweep(3)[::4] + TILE_CASES)
    assert not failures, failures[:3]


def _scale(plan) -> float:
    return plan.shape.head_dim ** -0.5


def _seg(plan) -> int:
    """Keys per KV segment of the plan's attention."""
    return next(e for e in plan.entries if e.kernel == "paged_attention").constexpr_dict()["SEG"]


@pytest.mark.parametrize("page_size", [4, 16, 32])
@pytest.mark.parametrize("poison", POISONS)
def test_tiny_attention_prefill_chunks_and_decode_agree(tiny, poison, page_size):
    plan = plan_for(replace(tiny.shape, page_size=page_size))
    s, dtype = plan.shape, _dtype(tiny)
    gen = torch.Generator().manual_seed(3)
    seg = _seg(plan)  # the request crosses a segment boundary: chunks around it, decode across it
    length = seg + 70
    request = make_request(length, s.num_heads, s.num_kv_heads, s.head_dim, dtype, gen)
    neighbour = make_request(40, s.num_heads, s.num_kv_heads, s.head_dim, dtype, gen, fill="nan")
    chunks = chunk_bounds(length, [16, 17, 40, 63, 64, 65, 66, seg - 1, seg, seg + 1, seg + 40] +
                          list(range(seg + 60, length)))
    companions = [[Step(neighbour, 0, 40)] if i % 2 else [] for i in range(len(chunks))]
    # decode steps beside a decoding neighbour (one token per request: the decode bucket's tile)
    decodes = [(p, p + 1) for p in range(seg - 2, seg + 3)]
    with use_plan(plan):
        failures = schedule_failures(request, chunks, companions, [i % 2 for i in range(len(chunks))],
                                     page_size=page_size, scale=_scale(plan), seed=3, poison=poison, device=DEVICE)
        failures += schedule_failures(request, decodes, [[Step(neighbour, 39, 40)]] * len(decodes),
                                      [i % 2 for i in range(len(decodes))], page_size=page_size, scale=_scale(plan),
                                      seed=4, poison=poison, device=DEVICE)
    assert not failures, failures[:3]


def test_llama_1b_attention_prefill_chunks_and_decode_agree():
    plan = preset_plan("llama-1b")
    s = plan.shape
    gen = torch.Generator().manual_seed(4)
    seg = _seg(plan)  # SEG = 1024: the request spans two segments
    length = seg + 300
    request = make_request(length, s.num_heads, s.num_kv_heads, s.head_dim, torch.bfloat16, gen)
    others = [make_request(n, s.num_heads, s.num_kv_heads, s.head_dim, torch.bfloat16, gen, fill=f)
              for n, f in ((seg + 129, "random"), (33, "huge"), (17, "nan"))]
    chunks = chunk_bounds(length, [128, 256, 257, 271, seg - 1, seg, seg + 1, seg + 256, seg + 257, seg + 271])
    companions = [[Step(o, 0, o.length) for o in others[: i % 4]] for i in range(len(chunks))]
    with use_plan(plan):
        failures = schedule_failures(request, chunks, companions, [i % 3 for i in range(len(chunks))],
                                     page_size=s.page_size, scale=_scale(plan), seed=4, poison="nan", device=DEVICE)
        decode = schedule_failures(request, [(p, p + 1) for p in range(length - 20, length)], [[] for _ in range(20)],
                                   [0] * 20, page_size=s.page_size, scale=_scale(plan), seed=5, poison="inf",
                                   device=DEVICE)
        # decode steps of 1-4 requests, each one token (the decode bucket's 16-row tiles), against
        # the full prefill's 64-row tiles: the trusted dot-tile-shape assumption's attention probe
        positions = [0, 1, 37, 127, 128, seg - 1, seg, seg + 1, length - 1]
        batched = schedule_failures(request, [(p, p + 1) for p in positions],
                                    [[Step(o, o.length - 1, o.length) for o in others[: i % 4]]
                                     for i in range(len(positions))], [i % 3 for i in range(len(positions))],
                                    page_size=s.page_size, scale=_scale(plan), seed=6, poison="nan", device=DEVICE)
    assert not failures and not decode and not batched, (failures + decode + batched)[:3]


def test_llama_1b_one_kernel_attention_has_the_pairs_bits():
    """kernels/attention_prefill.py against the pair on the same launches, bitwise: fresh prompts
    crossing segment boundaries, a chunk after cached context, NaN and huge neighbours, and short
    launches and decode rows past one segment (the decode bucket's entry), which ops.paged_attention
    gives the pair."""
    plan = preset_plan("llama-1b")
    s = plan.shape
    gen = torch.Generator().manual_seed(9)
    make = lambda n, fill="random": make_request(n, s.num_heads, s.num_kv_heads, s.head_dim,  # noqa: E731
                                                 torch.bfloat16, gen, fill)
    long, other = make(2 * _seg(plan) + 300), make(1500)
    launches = [[Step(long, 0, long.length)], [Step(long, 1400, long.length)],
                [Step(other, 0, 1500), Step(make(33, "huge"), 0, 33), Step(make(17, "nan"), 16, 17)],
                [Step(long, long.length - 1, long.length), Step(other, 1499, 1500)], [Step(other, 100, 164)],
                [Step(other, 700, 701), Step(make(33, "huge"), 32, 33), Step(make(5, "nan"), 4, 5)]]
    one = one_kernel_attention(kernel=True)
    pair = functools.partial(ops.paged_attention, longest_kv_len=2**30)  # never long enough for the one kernel
    with use_plan(plan):
        for i, steps in enumerate(launches):
            got, want = (run_steps(steps, page_size=s.page_size, scale=_scale(plan),
                                   gen=torch.Generator().manual_seed(i), poison="nan", device=DEVICE, attention=fn)
                         for fn in (one, pair))
            for g, w, step in zip(got, want, steps):
                assert bits_equal(g, w), f"launch {i}: rows [{step.q_start}, {step.q_end}) differ"


def test_tiny_accuracy_against_float64_and_the_cpu_path(tiny):
    s, dtype = tiny.shape, _dtype(tiny)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(37, s.hidden_size, generator=gen).to(dtype)
    w = (torch.randn(s.intermediate_size * 2, s.hidden_size, generator=gen) / 8).to(dtype)
    got = ops.linear(x.to(DEVICE), w.to(DEVICE))
    reference.assert_close(got, reference.linear(x, w), dtype, what="linear (cuda)")
    reference.assert_close(got, ops.linear(x, w), dtype, what="linear cuda vs cpu")
    norm_w = (torch.rand(s.hidden_size, generator=gen) + 0.5).to(dtype)
    out, _ = ops.rms_norm(x.to(DEVICE), norm_w.to(DEVICE), s.rms_norm_eps, x.to(DEVICE))
    reference.assert_close(out, reference.rms_norm(x, norm_w, s.rms_norm_eps, x)[0], dtype, what="rms_norm (cuda)")
    gate_up = (torch.randn(9, 2 * s.intermediate_size, generator=gen) * 4).to(dtype)
    reference.assert_close(ops.silu_mul(gate_up.to(DEVICE)), reference.silu_mul(gate_up), dtype, what="silu (cuda)")
    table = reference.rope_table(256, s.head_dim, s.rope_theta)
    q = torch.randn(5, s.num_heads, s.head_dim, generator=gen).to(dtype)
    k = torch.randn(5, s.num_kv_heads, s.head_dim, generator=gen).to(dtype)
    pos = torch.tensor([0, 1, 17, 100, 255])
    v = torch.randn(5, s.num_kv_heads, s.head_dim, generator=gen).to(dtype)
    cache = [torch.zeros(2, s.page_size, s.num_kv_heads, s.head_dim, dtype=dtype, device=DEVICE) for _ in range(2)]
    slots = torch.tensor([20, 3, 4, 31, 0])
    q_out = ops.rope_store_kv(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), pos.to(DEVICE), table.to(DEVICE), *cache,
                              slots.to(DEVICE))
    k_out, v_out = (c.view(-1, s.num_kv_heads, s.head_dim)[slots.to(DEVICE)] for c in cache)
    reference.assert_close(q_out, reference.rope(q, pos, table), dtype, what="rope q (cuda)")
    reference.assert_close(k_out, reference.rope(k, pos, table), dtype, what="rope k (cuda)")
    assert torch.equal(v_out.cpu(), v), "v rows are not copied bit for bit"
    for length in (1, 16, 17, 70, _seg(tiny) + 5):
        request = make_request(length, s.num_heads, s.num_kv_heads, s.head_dim, dtype, gen)
        got = run_steps([Step(request, 0, length)], page_size=s.page_size, scale=_scale(tiny), gen=gen,
                        device=DEVICE)[0]
        reference.assert_close(got, reference.attention(request, _scale(tiny)), dtype, what=f"attention L={length}")


def test_llama_1b_accuracy_against_float64():
    plan = preset_plan("llama-1b")
    s = plan.shape
    gen = torch.Generator().manual_seed(6)
    with use_plan(plan):
        for n, k in [(3072, 2048), (2048, 2048), (16384, 2048), (2048, 8192)]:
            x = torch.randn(33, k, generator=gen).bfloat16()
            w = (torch.randn(n, k, generator=gen) / k ** 0.5).bfloat16()
            reference.assert_close(ops.linear(x.to(DEVICE), w.to(DEVICE)), reference.linear(x, w), torch.bfloat16,
                                   what=f"linear {n}x{k}")
        x = torch.randn(5, 2048, generator=gen).bfloat16()
        w = (torch.randn(s.vocab_size, 2048, generator=gen) / 45).bfloat16()
        reference.assert_close(ops.logits(x.to(DEVICE), w.to(DEVICE)), reference.linear(x, w), torch.float32,
                               what="logits")
        length = 2 * _seg(plan) + 200  # three segments merged
        request = make_request(length, s.num_heads, s.num_kv_heads, s.head_dim, torch.bfloat16, gen)
        got = run_steps([Step(request, 0, length)], page_size=s.page_size, scale=_scale(plan), gen=gen,
                        device=DEVICE)[0]
        reference.assert_close(got, reference.attention(request, _scale(plan)), torch.bfloat16, what="attention")


def test_matmul_compiles_once_for_every_batch_size():
    """``do_not_specialize`` on M: one binary per kernel and bucket serves M = 1 .. 4096 (no M-keyed specialisation),
    for the one-launch matmul (llama-1b's gate_up and o_proj, bf16) and both halves of the split-K
    pair (the tiny preset's down_proj, float32: the bf16 plans do not split yet)."""
    kernels = (matmul_kernel, matmul_split_kernel, matmul_combine_kernel)
    if any(getattr(k, "device_caches", None) is None for k in kernels):
        pytest.skip("this Triton version has no JITFunction.device_caches to inspect")
    cases = [(preset_plan("llama-1b"), torch.randn(n, 2048, device=DEVICE).bfloat16()) for n in (16384, 2048)]
    cases.append((preset_plan("tiny"), torch.randn(64, 128, device=DEVICE)))

    def run_all(m: int) -> None:
        for plan, w in cases:
            with use_plan(plan, check_metadata=False):
                ops.linear(torch.randn(m, w.shape[1], device=DEVICE).to(w.dtype), w)

    run_all(1)
    run_all(17)  # past the decode bucket (kernels/configs.py DECODE_ROWS): the other tile's binary
    run_all(1024)  # the prefill bucket (PREFILL_ROWS; the tiny float32 plan's from 64 rows)
    device = torch.cuda.current_device()
    before = [len(k.device_caches[device][0]) for k in kernels]
    assert all(before), "a kernel of the split-K pair or the one-launch matmul did not run"
    for m in (2, 3, 16, 63, 64, 65, 1000, 4096):
        run_all(m)
    assert [len(k.device_caches[device][0]) for k in kernels] == before


def test_folded_residual_norm_has_the_two_launch_bits():
    """down_proj's split-K partials folded by the next residual norm (one launch) give the bits of the
    separate combine and norm (two), at decode and prefill row counts (the tiny preset's float32
    plan: the bf16 plans do not split yet)."""
    from tests.kernels.invariance import bits_equal
    plan = preset_plan("tiny")
    gen = torch.Generator().manual_seed(13)
    w = (torch.randn(64, 128, generator=gen) / 10).to(DEVICE)
    norm_w = (torch.rand(64, generator=gen) + 0.5).to(DEVICE)
    with use_plan(plan):
        for rows in (1, 4, 37, 300):
            x = torch.randn(rows, 128, generator=gen).to(DEVICE)
            residual = (torch.randn(rows, 64, generator=gen) * 2).to(DEVICE)
            branch = ops.linear_unfolded(x, w)
            assert isinstance(branch, ops.Partials)
            fused = ops.rms_norm(branch, norm_w, plan.shape.rms_norm_eps, residual)
            separate = ops.rms_norm(ops.linear(x, w), norm_w, plan.shape.rms_norm_eps, residual)
            assert all(bits_equal(a.cpu(), b.cpu()) for a, b in zip(fused, separate)), rows


def _adversarial(rows: int, cols: int, seed: int) -> torch.Tensor:
    """bf16 values with exponents spread over 2^-12 .. 2^12 and random signs: a changed accumulation
    order inside ``tl.dot`` shows in the low bits of the sums."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    mantissa = torch.rand(rows, cols, device=DEVICE, generator=g) + 1.0
    exponent = torch.randint(-12, 13, (rows, cols), device=DEVICE, generator=g).float()
    sign = torch.randint(0, 2, (rows, cols), device=DEVICE, generator=g).float() * 2 - 1
    return (sign * mantissa * torch.exp2(exponent)).bfloat16()


@pytest.mark.parametrize("name", ["llama-1b", "qwen3-0.6b"])
def test_bucket_rows_equal_the_prefill_tile_rows_bitwise(name):
    """The evidence of trusted.dot-tile-shape (DESIGN.md §5): for every weight with a decode or
    prefill bucket, rows of launches of M = 1, 4, 37, 128 and 1,000 (16-row tiles up to 16 rows, the
    other tile past) equal the same rows of a 4,096-row launch (the prefill bucket's tile), bitwise,
    on adversarial values."""
    plan = preset_plan(name)
    bucketed = [e for e in plan.entries if e.kernel == "matmul" and e.static_dict().get("max_rows")]
    prefill = {e.key.removesuffix(f"_p{configs.PREFILL_ROWS['bfloat16']}") for e in plan.entries
               if e.kernel == "matmul" and e.static_dict().get("min_rows")}
    assert bucketed and prefill >= {e.key.removesuffix(f"_m{configs.DECODE_ROWS}") for e in bucketed}
    failures = []
    with use_plan(plan):
        for entry in bucketed:
            c = entry.constexpr_dict()
            out_dtype = torch.float32 if c["OUT_DTYPE"] == "float32" else torch.bfloat16
            bits = torch.int32 if out_dtype == torch.float32 else torch.int16
            x, w = _adversarial(4096, c["K"], 1), _adversarial(c["N"], c["K"], 2)
            full = ops.linear(x, w, out_dtype=out_dtype).view(bits)
            for m in (1, 4, 37, 128, 1000):
                for start in (0, 1000, 4096 - m):
                    got = ops.linear(x[start:start + m].contiguous(), w, out_dtype=out_dtype).view(bits)
                    if not torch.equal(got, full[start:start + m]):
                        failures.append(f"{entry.key} M={m} rows from {start}")
    assert not failures, failures[:5]


@pytest.mark.parametrize("name", ["llama-1b", "qwen3-0.6b"])
def test_gate_up_silu_has_the_two_launch_bits_in_every_bucket(name):
    """The gate/up projection with SiLU in its epilogue (one launch) gives the bits of the matmul then
    silu_mul (two launches) at M = 1, 4, 37, 128, 1,000 and 4,096 (decode, middle and prefill
    buckets), and its rows of a short launch equal those of the 4,096-row one, on adversarial values."""
    plan = preset_plan(name)
    s = plan.shape
    assert configs.matmul_silu_configs(intermediate_size=s.intermediate_size, k=s.hidden_size, dtype="bfloat16")
    x, w = _adversarial(4096, s.hidden_size, 3), _adversarial(2 * s.intermediate_size, s.hidden_size, 4)
    failures = []
    with use_plan(plan):
        full = ops.gate_up_silu_mul(x, w).view(torch.int16)
        for m in (1, 4, 37, 128, 1000, 4096):
            for start in sorted({0, 1000 % (4097 - m), 4096 - m}):
                rows = x[start:start + m].contiguous()
                fused = ops.gate_up_silu_mul(rows, w).view(torch.int16)
                if not torch.equal(fused, ops.silu_mul(ops.linear(rows, w)).view(torch.int16)):
                    failures.append(f"M={m} rows from {start}: fused != matmul then silu_mul")
                if not torch.equal(fused, full[start:start + m]):
                    failures.append(f"M={m} rows from {start}: rows differ from the 4,096-row launch")
    assert not failures, failures[:5]
