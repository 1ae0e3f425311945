"""RMSNorm (with its residual add) in the prologue of a decode matmul, against rms_norm then the matmul.

    PYTHONPATH=. python3 bench/norm_prologue.py --out DIR

A prototype, not part of any plan: ``norm_matmul_kernel`` is the decode bucket's matmul (16-row
tiles, llama-1b's qkv with two K ranges side by side, or gate/up with SiLU·up in its epilogue)
that adds the residual to its x tiles, computes each row's sum of squares itself (a loop over
STAT_K-wide slices of the row, the squares cut exactly into two bf16 halves and summed by
``tl.dot`` with ones, so the sum would not depend on the tile's layout) and normalises every x
tile before its dot; the program in column 0 writes the new residual. Each program repeats its
rows' statistic and normalisation: that is the cost this measures against the launch it saves.
Variants: ``full`` (the statistic, normalised tiles; the values are the fused op's) and three
timing variants whose values are wrong:
``no_statistic`` (normalised tiles with inv = rsqrt(eps)), ``statistic_only`` (tiles not
normalised), ``residual_only`` (neither: what removing the norm's launch alone saves). Each
against ``ops.rms_norm`` then ``ops.linear`` / ``ops.gate_up_silu_mul`` of the plan, at M = 4,
GPU µs per call from CUDA-graph replays over weight copies larger than L2 (bench/kernel_timing.py),
two interleaved passes; ``full`` also reports whether its output has the separate launches'
bits. Writes ``DIR/norm_prologue.json``; needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from bench.kernel_timing import L2_FLUSH_BYTES, time_calls  # noqa: E402
from kernels import ops  # noqa: E402
from kernels.launch import use_plan  # noqa: E402
from kernels.plan import preset_plan  # noqa: E402

# name: (STAT_MODE, NORM_MAIN, values are the fused op's)
VARIANTS = {"full": (1, True, True), "no_statistic": (0, True, False), "statistic_only": (1, False, False),
            "residual_only": (0, False, False)}
STAT_K = 128
EPS = 1e-5


@triton.jit
def _x_tile(x_ptr, res_ptr, nw_ptr, offs_m, k_idx, is_row, stride_xm, stride_res, inv, HAS_RESIDUAL: tl.constexpr,
            NORM_MAIN: tl.constexpr, DTYPE: tl.constexpr):
    """The x tile a dot takes: rows offs_m, columns k_idx, residual-added and rounded (and normalised)."""
    t = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :], mask=is_row, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        t = t + tl.load(res_ptr + offs_m[:, None] * stride_res + k_idx[None, :], mask=is_row, other=0.0).to(tl.float32)
    xn = t.to(DTYPE)
    if NORM_MAIN:
        nw = tl.load(nw_ptr + k_idx).to(tl.float32)
        xn = ((xn.to(tl.float32) * inv[:, None]).to(DTYPE).to(tl.float32) * nw[None, :]).to(DTYPE)
    return xn


@triton.jit(do_not_specialize=["M"])
def norm_matmul_kernel(x_ptr, res_ptr, nw_ptr, w_ptr, out_ptr, res_out_ptr, M, stride_xm, stride_res, stride_om,
                       N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, STAT_K: tl.constexpr, SPLITS: tl.constexpr, SILU: tl.constexpr,
                       HAS_RESIDUAL: tl.constexpr, EPS: tl.constexpr, DTYPE: tl.constexpr, PDL: tl.constexpr,
                       STAT_MODE: tl.constexpr, NORM_MAIN: tl.constexpr):
    # x, res, res_out: [M, K] (res_out contiguous); nw: [K]; w: [N, K] contiguous (SILU: gate rows, then up
    # rows); out: [M, N] or [M, N / 2]. STAT_MODE 0: no statistic (inv = rsqrt(eps)); NORM_MAIN False: x
    # tiles only residual-added and rounded, not normalised (timing variants whose values are wrong).
    if PDL:
        tl.extra.cuda.gdc_wait()
        if not SILU:
            tl.extra.cuda.gdc_launch_dependents()
    pid_n = tl.program_id(1)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    is_row = offs_m[:, None] < M
    offs_s = tl.arange(0, STAT_K)
    ones = tl.full([STAT_K, 16], 1.0, tl.float32).to(DTYPE)
    ss = tl.zeros([BLOCK_M, 16], dtype=tl.float32)
    for k0 in range(0, K if STAT_MODE == 1 else 0, STAT_K):  # the statistic
        r = tl.load(x_ptr + offs_m[:, None] * stride_xm + (k0 + offs_s)[None, :], mask=is_row, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            r = r + tl.load(res_ptr + offs_m[:, None] * stride_res + (k0 + offs_s)[None, :], mask=is_row,
                            other=0.0).to(tl.float32)
            tl.store(res_out_ptr + offs_m[:, None] * K + (k0 + offs_s)[None, :], r.to(DTYPE),
                     mask=is_row & (pid_n == 0))
        rf = r.to(DTYPE).to(tl.float32)
        sq = rf * rf
        hi = sq.to(DTYPE)
        lo = (sq - hi.to(tl.float32)).to(DTYPE)
        ss = tl.dot(hi, ones, ss, input_precision="ieee")
        ss = tl.dot(lo, ones, ss, input_precision="ieee")
    inv = tl.rsqrt(tl.max(ss, axis=1) / K + EPS)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    SPAN: tl.constexpr = K // SPLITS
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, SPAN, BLOCK_K):
        k_idx = k0 + offs_k
        xn = _x_tile(x_ptr, res_ptr, nw_ptr, offs_m, k_idx, is_row, stride_xm, stride_res, inv, HAS_RESIDUAL, NORM_MAIN,
                     DTYPE)
        w = tl.load(w_ptr + offs_n[None, :] * K + k_idx[:, None])
        if SILU:
            wu = tl.load(w_ptr + (N // 2 + offs_n[None, :]) * K + k_idx[:, None])
            acc = tl.dot(xn, w, acc, input_precision="ieee")
            acc1 = tl.dot(xn, wu, acc1, input_precision="ieee")
        else:
            acc = tl.dot(xn, w, acc, input_precision="ieee")
            if SPLITS == 2:
                k_idx2 = SPAN + k0 + offs_k
                xn2 = _x_tile(x_ptr, res_ptr, nw_ptr, offs_m, k_idx2, is_row, stride_xm, stride_res, inv, HAS_RESIDUAL,
                              NORM_MAIN, DTYPE)
                w2 = tl.load(w_ptr + offs_n[None, :] * K + k_idx2[:, None])
                acc1 = tl.dot(xn2, w2, acc1, input_precision="ieee")
    if PDL and SILU:
        tl.extra.cuda.gdc_launch_dependents()
    if SILU:
        gate = acc.to(DTYPE).to(tl.float32)
        up = acc1.to(DTYPE).to(tl.float32)
        act = (gate / (1.0 + tl.exp(-gate))).to(DTYPE).to(tl.float32)
        tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], (act * up).to(DTYPE), mask=is_row)
    else:
        if SPLITS == 2:
            acc = acc + acc1
        tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], acc.to(DTYPE), mask=is_row)


def fused(x, res, nw, w, *, silu: bool, splits: int, block_n: int, block_k: int, warps: int, stages: int,
          stat_mode: int, norm_main: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One launch of norm_matmul_kernel (PDL on, as the plan's bf16 kernels): (out, new residual)."""
    m, k = x.shape
    n = w.shape[0]
    out_n = n // 2 if silu else n
    out = torch.empty(m, out_n, dtype=x.dtype, device=x.device)
    res_out = torch.empty_like(x)
    grid = (triton.cdiv(m, 16), triton.cdiv(out_n, block_n))
    norm_matmul_kernel[grid](x, res, nw, w, out, res_out, m, x.stride(0), res.stride(0), out.stride(0),
                             N=n, K=k, BLOCK_M=16, BLOCK_N=block_n, BLOCK_K=block_k, STAT_K=STAT_K, SPLITS=splits,
                             SILU=silu, HAS_RESIDUAL=True, EPS=EPS, DTYPE=tl.bfloat16, PDL=True,
                             STAT_MODE=stat_mode, NORM_MAIN=norm_main, num_warps=warps, num_stages=stages,
                             launch_pdl=True)
    return out, res_out


def measure() -> list[dict]:
    plan = preset_plan("llama-1b")
    s = plan.shape
    h = s.hidden_size
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(4, h, device="cuda", generator=gen).bfloat16()
    res = torch.randn(4, h, device="cuda", generator=gen).bfloat16()
    nw = (1 + torch.randn(h, device="cuda", generator=gen) / 10).bfloat16()
    # the plan's decode tiles: (N, SiLU epilogue, K ranges, BLOCK_N, BLOCK_K, warps, stages)
    cases = {"qkv": ((s.num_heads + 2 * s.num_kv_heads) * s.head_dim, False, 2, 32, 128, 2, 5),
             "gate_up": (2 * s.intermediate_size, True, 1, 64, 64, 4, 5)}
    results = []
    with use_plan(plan):
        for name, (n, silu, splits, block_n, block_k, warps, stages) in cases.items():
            copies = max(2, -(-L2_FLUSH_BYTES // (n * h * 2)))
            weights = [(torch.randn(n, h, device="cuda", generator=gen) / 45).bfloat16() for _ in range(copies)]

            def separate(w):
                y, _ = ops.rms_norm(x, nw, EPS, res)
                return ops.gate_up_silu_mul(y, w) if silu else ops.linear(y, w)
            for variant, (stat_mode, norm_main, is_exact) in VARIANTS.items():
                one = [lambda w=w: fused(x, res, nw, w, silu=silu, splits=splits, block_n=block_n, block_k=block_k,
                                         warps=warps, stages=stages, stat_mode=stat_mode, norm_main=norm_main)
                       for w in weights]
                two = [lambda w=w: separate(w) for w in weights]
                times: dict[str, list[float]] = {"fused": [], "separate": []}
                for _ in range(2):
                    times["fused"].append(time_calls(one, device="cuda", repeats=50)[0])
                    times["separate"].append(time_calls(two, device="cuda", repeats=50)[0])
                row = {"case": name, "variant": variant, "fused_us": times["fused"], "separate_us": times["separate"],
                       "ratio": statistics.median(times["separate"]) / statistics.median(times["fused"])}
                if is_exact:
                    row["bitwise_equal"] = torch.equal(one[0]()[0].view(torch.int16),
                                                       separate(weights[0]).view(torch.int16))
                results.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/norm_prologue.py needs a CUDA GPU", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    results = measure()
    (args.out / "norm_prologue.json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "m": 4,
                                                             "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
