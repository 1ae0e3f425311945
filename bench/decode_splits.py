"""Split-K inside one program for decode matmuls: does cutting a weight's K into fixed ranges,
each with its own accumulator, advanced together and summed in ascending order at the end,
stream a narrow weight faster at decode M than one accumulator over the whole K?

    PYTHONPATH=. python3 bench/decode_splits.py --out DIR [--preset llama-1b] [--m 4] [--roles down,o]

A decode program's tile holds a handful of live rows, so its time is the weight's stream, and
with one accumulator every K step's MMA waits on the one before. S accumulators over S fixed K
ranges (from (N, K) only, as DESIGN.md §5 allows) give S independent chains per program with
no partial buffer and no second launch; a prefill tile runs the same ranges one after another
with the same per-range accumulation and the same final sum, so its rows keep the decode
rows' bits (checked here, bitwise, on adversarial values).

For each weight and candidate (BLOCK_N, warps, stages, splits) at the weight's own BLOCK_K it
times one call at M rows with cold L2 (CUDA-graph replays over weight copies larger than L2)
and with the weight L2-resident, and compares: the lockstep form against the sequential form
of the same splits (M rows), and the decode rows against the same rows of a 4,096-row launch of
the sequential form with the prefill bucket's tile. Writes ``DIR/decode_splits.json`` and
``DIR/decode_splits.md``.

The kernel here is the prototype the plan's form (kernels/matmul.py, ``SPLITS`` and ``LOCKSTEP``)
was taken from, kept as it ran so the figures in docs/performance.md can be reproduced; it also
times weight loads without the K and N masks (``--even``), which the plan's kernel does not take.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from bench.decode_tiles import adversarial, weights  # noqa: E402
from bench.kernel_timing import L2_FLUSH_BYTES, time_calls  # noqa: E402
from kernels import matmul_configs  # noqa: E402
from kernels.shapes import preset  # noqa: E402

PREFILL_M = 4096
PROBE_STARTS = (0, 1000, PREFILL_M - 4)
REPEATS = 9


@triton.jit
def _step(x_ptr, w_ptr, offs_m, offs_n, offs_k, k0, M, stride_xm, stride_wn, acc, N: tl.constexpr,
          K: tl.constexpr, EVEN: tl.constexpr):
    k_idx = k0 + offs_k
    if EVEN:  # N a multiple of BLOCK_N and K of BLOCK_K: only x's rows need a mask
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :], mask=offs_m[:, None] < M, other=0.0)
        w = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None])
    else:
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                    mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
        w = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None],
                    mask=(offs_n[None, :] < N) & (k_idx[:, None] < K), other=0.0)
    return tl.dot(x, w, acc, input_precision="ieee")


@triton.jit(do_not_specialize=["M"])
def split_matmul_kernel(x_ptr, w_ptr, out_ptr, M, stride_xm, stride_wn, stride_om, N: tl.constexpr,
                        K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        SPLITS: tl.constexpr, LOCKSTEP: tl.constexpr, OUT_DTYPE: tl.constexpr,
                        EVEN: tl.constexpr = False):
    # x: [M, K]; w: [N, K]; out: [M, N]. K range s = [s * K / SPLITS, (s + 1) * K / SPLITS).
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    KS: tl.constexpr = K // SPLITS
    if LOCKSTEP:
        acc0 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc3 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, KS, BLOCK_K):
            acc0 = _step(x_ptr, w_ptr, offs_m, offs_n, offs_k, k0, M, stride_xm, stride_wn, acc0, N, K, EVEN)
            if SPLITS > 1:
                acc1 = _step(x_ptr, w_ptr, offs_m, offs_n, offs_k, KS + k0, M, stride_xm, stride_wn, acc1, N, K, EVEN)
            if SPLITS > 2:
                acc2 = _step(x_ptr, w_ptr, offs_m, offs_n, offs_k, 2 * KS + k0, M, stride_xm, stride_wn, acc2,
                             N, K, EVEN)
                acc3 = _step(x_ptr, w_ptr, offs_m, offs_n, offs_k, 3 * KS + k0, M, stride_xm, stride_wn, acc3,
                             N, K, EVEN)
        total = acc0
        if SPLITS > 1:
            total = total + acc1
        if SPLITS > 2:
            total = total + acc2
            total = total + acc3
    else:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLITS):
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(s * KS, (s + 1) * KS, BLOCK_K):
                acc = _step(x_ptr, w_ptr, offs_m, offs_n, offs_k, k0, M, stride_xm, stride_wn, acc, N, K, EVEN)
            if s == 0:
                total = acc
            else:
                total = total + acc
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], total.to(OUT_DTYPE),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def launch(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, tiles: tuple[int, ...], splits: int,
           lockstep: bool, even: bool = False) -> None:
    """out = x @ w.T with ``tiles`` = (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)."""
    bm, bn, bk, warps, stages = tiles
    m, k = x.shape
    n = w.shape[0]
    assert splits in (1, 2, 4) and k % (splits * bk) == 0, (k, splits, bk)
    out_dtype = tl.float32 if out.dtype == torch.float32 else tl.bfloat16
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    split_matmul_kernel[grid](x, w, out, m, x.stride(0), w.stride(0), out.stride(0), N=n, K=k, BLOCK_M=bm,
                              BLOCK_N=bn, BLOCK_K=bk, SPLITS=splits, LOCKSTEP=lockstep, OUT_DTYPE=out_dtype, EVEN=even and n % bn == 0,
                              num_warps=warps, num_stages=stages)


SMEM_BYTES = 227 * 1024
# The prefill tile the rows are compared with, by BLOCK_K: the plan's, and at 256 the one the
# plan ran while down_proj took 256-deep steps
PREFILL_TILES = {**matmul_configs.PREFILL_TILES, 256: (128, 64, 256, 8, 2)}


def candidates(n: int, k: int, dtype: str, splits_list: tuple[int, ...],
               block_ns: tuple[int, ...] = (), block_ks: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], int]]:
    """((BLOCK_M, BLOCK_N, BLOCK_K, warps, stages), splits) that fit shared memory, at the weight's
    own BLOCK_K or at each of ``block_ks``."""
    plan = matmul_configs._decode_tiles(n, k, dtype)
    out = []
    for bk, bn in [(bk, bn) for bk in sorted(set(block_ks) or {plan[2]}) for bn in sorted({plan[1], *block_ns})]:
        for warps in (2, 4):
            for splits in splits_list:
                if k % (splits * bk):
                    continue
                per_stage = splits * (16 + bn) * bk * 2
                for stages in (2, 3, 4, 5, 6):
                    if stages * per_stage <= SMEM_BYTES - 4096 and (splits, stages) != (1, 6):
                        out.append(((16, bn, bk, warps, stages), splits))
    return out


def sweep(role: str, n: int, k: int, dtype: str, out_dtype: str, m: int, splits_list: tuple[int, ...],
          block_ns: tuple[int, ...], evens: tuple[bool, ...], block_ks: tuple[int, ...] = ()) -> dict:
    torch_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}
    copies = max(1, min(64, -(-L2_FLUSH_BYTES // (2 * n * k))))
    ws = [(torch.randn(n, k, device="cuda") * k ** -0.5).to(torch_dtype[dtype]) for _ in range(copies)]
    xs = [torch.randn(m, k, device="cuda").to(torch_dtype[dtype]) for _ in range(copies)]
    outs = [torch.empty(m, n, dtype=torch_dtype[out_dtype], device="cuda") for _ in range(copies)]
    plan = matmul_configs._decode_tiles(n, k, dtype)
    row: dict = {"role": role, "n": n, "k": k, "m": m, "weight_bytes": 2 * n * k, "plan_tiles": list(plan),
                 "torch_us": time_calls([lambda x=x, w=w, o=o: torch.nn.functional.linear(x, w, out=o)
                                         for x, w, o in zip(xs, ws, outs)], device="cuda", repeats=REPEATS)[0],
                 "candidates": []}
    xa, wa = adversarial(PREFILL_M, k, dtype, 1), adversarial(n, k, dtype, 2)
    bits = torch.int32 if out_dtype == "float32" else torch.int16
    prefill = {}
    for (tiles, splits), even in [(c, e) for c in candidates(n, k, dtype, splits_list, block_ns, block_ks) for e in evens]:
        rec: dict = {"tiles": list(tiles), "splits": splits, "even": even}
        row["candidates"].append(rec)
        try:
            rec["us"] = time_calls([lambda x=x, w=w, o=o: launch(x, w, o, tiles, splits, True, even)
                                    for x, w, o in zip(xs, ws, outs)], device="cuda", repeats=REPEATS)[0]
            rec["hot_us"] = time_calls([lambda: launch(xs[0], ws[0], outs[0], tiles, splits, True, even)] * 8,
                                       device="cuda", repeats=REPEATS)[0]
            if (splits, tiles[2]) not in prefill:
                full = torch.empty(PREFILL_M, n, dtype=torch_dtype[out_dtype], device="cuda")
                launch(xa, wa, full, PREFILL_TILES[tiles[2]], splits, False)
                prefill[splits, tiles[2]] = full
            failures = []
            for start in PROBE_STARTS:
                rows = xa[start:start + m].contiguous()
                step = torch.empty(m, n, dtype=torch_dtype[out_dtype], device="cuda")
                seq = torch.empty_like(step)
                launch(rows, wa, step, tiles, splits, True, even)
                launch(rows, wa, seq, tiles, splits, False)
                want = prefill[splits, tiles[2]][start:start + m].view(bits)
                for name, got in (("lockstep vs sequential", step.view(bits) != seq.view(bits)),
                                  ("lockstep vs prefill tile", step.view(bits) != want)):
                    if bool(got.any()):
                        failures.append(f"{name}, rows from {start}: {int(got.sum())} elements differ")
            rec["failures"] = failures
        except Exception as exc:  # recorded per candidate; the sweep goes on
            rec["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        print(f"  {role} {tiles} S={splits} even={even}: {rec.get('us', rec.get('error'))}", file=sys.stderr, flush=True)
    # do the splits change the sums? (they should: another order)
    row["splits_change_bits"] = {f"S={s} BK={bk}": bool((p.view(bits) != prefill[1, bk].view(bits)).any())
                                 for (s, bk), p in prefill.items() if s != 1 and (1, bk) in prefill}
    row["prefill_us"] = {f"S={s} BK={bk}": time_calls([lambda s=s, bk=bk: launch(
        xa, wa, prefill[s, bk], PREFILL_TILES[bk], s, False)], device="cuda", repeats=5)[0]
        for s, bk in prefill}
    return row


def markdown(results: dict) -> str:
    lines = [f"# In-program split-K at decode ({results['preset']}, M = {results['m']}, {results['device']})", ""]
    for row in results["weights"]:
        timed = sorted((r for r in row["candidates"] if "us" in r), key=lambda r: r["us"])
        base = next((r for r in timed if r["tiles"] == row["plan_tiles"] and r["splits"] == 1 and not r["even"]), None)
        lines += [f"## {row['role']} {row['n']} x {row['k']}: torch {row['torch_us']:.1f} µs, plan tile "
                  f"{row['plan_tiles']}" + (f" {base['us']:.1f} µs (hot {base['hot_us']:.1f})" if base else ""),
                  "", f"prefill M = 4,096 by splits (µs): {row.get('prefill_us')}; "
                  f"splits change the sums: {row.get('splits_change_bits')}", "",
                  "| BM, BN, BK, warps, stages | splits | unmasked weight | µs | hot µs | GB/s | bits |",
                  "|---|---|---|---|---|---|---|"]
        for r in timed[:14]:
            gbps = row["weight_bytes"] / (r["us"] * 1e-6) / 1e9
            lines.append(f"| {r['tiles']} | {r['splits']} | {r['even']} | {r['us']:.1f} | {r['hot_us']:.1f} | {gbps:.0f} | "
                         f"{'; '.join(r['failures']) or 'equal'} |")
        errs = [r for r in row["candidates"] if "error" in r]
        lines += ["", f"{len(errs)} candidates failed: " + "; ".join(
            f"{r['tiles']} S={r['splits']}: {r['error']}" for r in errs[:4]), ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", default="llama-1b")
    parser.add_argument("--m", type=int, default=4, help="decode rows (the batch)")
    parser.add_argument("--roles", default="down,o,qkv,gate_up")
    parser.add_argument("--splits", default="1,2,4")
    parser.add_argument("--block-n", default="16,32", help="BLOCK_N values beside the plan's decode tile's")
    parser.add_argument("--block-k", default="", help="BLOCK_K values to sweep instead of the weight's own")
    parser.add_argument("--even", default="0,1", help="unmasked weight loads where N and K divide evenly: 0, 1 or both")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    splits_list = tuple(int(s) for s in args.splits.split(","))
    roles = args.roles.split(",")
    todo = sorted((w for w in weights(args.preset) if w[0] in roles), key=lambda w: roles.index(w[0]))
    results: dict = {"preset": args.preset, "m": args.m, "device": torch.cuda.get_device_name(), "weights": []}
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    for role, n, k, out_dtype in todo:
        print(f"{time.monotonic() - start:.0f} s: {role}", file=sys.stderr, flush=True)
        results["weights"].append(sweep(role, n, k, preset(args.preset).dtype, out_dtype, args.m, splits_list,
                                        tuple(int(b) for b in args.block_n.split(",") if b),
                                        tuple(bool(int(e)) for e in args.even.split(",")),
                                        tuple(int(b) for b in args.block_k.split(",") if b)))
        (args.out / "decode_splits.json").write_text(json.dumps(results, indent=1))
        (args.out / "decode_splits.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
