"""Prefill-bucket matmul tiles: which (BLOCK_M, BLOCK_N, warps, stages) runs each weight fastest at
prefill M with the weight's own BLOCK_K, and whether its rows equal the other buckets' rows bitwise.

    PYTHONPATH=. python3 bench/prefill_tiles.py --out DIR [--preset llama-1b] [--ms 1024,2048,4096,8192]

DESIGN.md §5 allows tile shapes per M bucket when BLOCK_K, the splits and the K order are those of
every other bucket of the weight; cross-bucket equality then rests on the trusted assumption
trusted.dot-tile-shape, with GPU row probes as its evidence. For each weight of the preset this
script

1. times every candidate (at the weight's BLOCK_K, and at 128 beside a 256-deep one) at each M
   of ``--ms`` (CUDA-graph replays, as bench/kernel_timing.py does), beside the plan's tile for
   that M and torch's ``F.linear`` (cuBLAS) on the same inputs;
2. probes the fastest candidates: rows of the decode bucket's tile and of the plan's other tile at
   M = 1, 4, 37 and 128, and the whole 4,096-row launch of the plan's other tile, against the same
   rows of a 4,096-row launch of the candidate, bitwise, on adversarial inputs (exponents spread
   over 2^-12 .. 2^12).

Writes ``DIR/prefill_tiles.json`` and ``DIR/prefill_tiles.md`` after every weight.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from bench.decode_tiles import (PREFILL_M, Linear, _dtype, adversarial, compile_all, probe,  # noqa: E402
                                probe_lines, weights)
from bench.kernel_timing import L2_FLUSH_BYTES, time_calls  # noqa: E402
from kernels import configs, matmul_configs  # noqa: E402
from kernels.plan import PlanEntry  # noqa: E402
from kernels.shapes import preset  # noqa: E402

REPEATS = 5
DECODE_M = 4
SMEM_BYTES = 227 * 1024  # an H200 block's shared memory


def block_ks(n: int, k: int, dtype: str) -> tuple[int, ...]:
    """The weight's own BLOCK_K, and 128 beside a 256-deep one (whose wide tiles barely fit)."""
    own = matmul_configs._matmul_tiles(n, k, dtype)[2]
    return (own, 128) if own == 256 else (own,)


def candidates(n: int, k: int, dtype: str) -> list[tuple[int, ...]]:
    """(BM, BN, BK, warps, stages, splits) at :func:`block_ks` that fit in shared memory."""
    out = []
    for bk, bm, bn, warps, stages in itertools.product(block_ks(n, k, dtype), (64, 128), (64, 128, 256), (4, 8),
                                                       (2, 3, 4, 5)):
        if (bm + bn) * bk * 2 * stages > SMEM_BYTES or (bm == 128 and bn == 256 and warps == 4):
            continue
        out.append((bm, bn, bk, warps, stages, 1))
    return out


def plan_tiles(n: int, k: int, dtype: str, m: int, block_k: int | None = None) -> tuple[int, ...]:
    """The plan's tile for a launch of M rows (decode bucket or the other tile), splits appended;
    ``block_k`` replaces the plan's BLOCK_K."""
    if m <= matmul_configs.DECODE_ROWS and matmul_configs._decode_tiles(n, k, dtype) is not None:
        bm, bn, bk, warps, stages = matmul_configs._decode_tiles(n, k, dtype)
    else:
        bm, bn, bk, warps, stages = matmul_configs._matmul_tiles(n, k, dtype)
    return bm, bn, block_k or bk, warps, stages, 1


def in_order(lin: Linear, n_major: bool) -> Linear:
    """``lin`` walking column tiles (N_MAJOR) or row tiles first on grid axis 0."""
    e = lin.entry
    config = configs.LaunchConfig(kernel=e.kernel, key=f"{e.key}_n{int(n_major)}", num_warps=e.num_warps,
                                  constexprs=tuple(sorted({**e.constexpr_dict(), "N_MAJOR": n_major}.items())),
                                  num_stages=e.num_stages, static=e.static)
    lin.entry = PlanEntry.from_config(config, ("bench",))
    return lin


def _time(lin: Linear, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> float:
    return time_calls([lin.call(x, w, out, None)], device="cuda", repeats=REPEATS)[0]


def full_probe(base: Linear, cand: Linear, n: int, k: int, dtype: str, out_dtype: str) -> list[str]:
    """Every row of one PREFILL_M-row launch of each tile, bitwise."""
    x, w = adversarial(PREFILL_M, k, dtype, 3), adversarial(n, k, dtype, 4)
    bits = torch.int32 if out_dtype == "float32" else torch.int16
    a = torch.empty(PREFILL_M, n, dtype=_dtype(out_dtype), device="cuda")
    b = torch.empty_like(a)
    base.call(x, w, a, None)()
    cand.call(x, w, b, None)()
    differ = int((a.view(bits) != b.view(bits)).sum())
    return [f"M={PREFILL_M}: {differ} elements differ"] if differ else []


def sweep_weight(role: str, n: int, k: int, dtype: str, out_dtype: str, ms: list[int], errors: dict) -> dict:
    w = (torch.randn(n, k, device="cuda") * k ** -0.5).to(_dtype(dtype))
    row: dict = {"role": role, "n": n, "k": k, "flops_per_row": 2 * n * k, "torch_us": {}, "plan": {},
                 "candidates": [], "probes": []}
    xs = {m: torch.randn(m, k, device="cuda").to(_dtype(dtype)) for m in ms}
    outs = {m: torch.empty(m, n, dtype=_dtype(out_dtype), device="cuda") for m in ms}
    for m in ms:
        row["torch_us"][m] = time_calls([lambda m=m: outs[m].copy_(torch.nn.functional.linear(xs[m], w))],
                                        device="cuda", repeats=REPEATS)[0]
        tiles = plan_tiles(n, k, dtype, m)
        row["plan"][m] = {"tiles": list(tiles), "us": _time(Linear(n, k, dtype, out_dtype, tiles), xs[m], w, outs[m])}
    for tiles in candidates(n, k, dtype):
        rec: dict = {"tiles": list(tiles), "us": {}}
        row["candidates"].append(rec)
        if errors.get((n, k, tiles)):
            rec["error"] = errors[(n, k, tiles)]
            continue
        try:
            lin = Linear(n, k, dtype, out_dtype, tiles)
            for m in ms:
                rec["us"][m] = _time(lin, xs[m], w, outs[m])
        except Exception as exc:
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    # The plan's prefill-bucket tile in both grid orders (kernels/matmul_configs.py L2_RESIDENT_BYTES).
    bucket = matmul_configs._prefill_tiles(n, k, dtype)
    if bucket is not None:
        row["order"] = {"tiles": list(bucket), "plan_n_major": bool(matmul_configs.prefill_matmul_config(
            n=n, k=k, dtype=dtype, has_bias=False, out_dtype=out_dtype).constexpr_dict()["N_MAJOR"])}
        for n_major in (False, True):
            lin = in_order(Linear(n, k, dtype, out_dtype, (*bucket, 1)), n_major)
            row["order"]["n_major" if n_major else "m_major"] = {m: _time(lin, xs[m], w, outs[m]) for m in ms}
        fails = full_probe(Linear(n, k, dtype, out_dtype, plan_tiles(n, k, dtype, PREFILL_M)),
                           in_order(Linear(n, k, dtype, out_dtype, (*bucket, 1)), True), n, k, dtype, out_dtype)
        row["probes"].append({"tiles": list(bucket) + ["n_major"], "failures": fails})
    # Decode (M = DECODE_M, weights cold) with the decode bucket's tile at each BLOCK_K swept.
    copies = max(1, min(64, -(-L2_FLUSH_BYTES // (2 * n * k))))
    ws = [w] + [w.clone() for _ in range(copies - 1)]
    xd = [torch.randn(DECODE_M, k, device="cuda").to(_dtype(dtype)) for _ in range(copies)]
    od = [torch.empty(DECODE_M, n, dtype=_dtype(out_dtype), device="cuda") for _ in range(copies)]
    row["decode_us"] = {}
    for bk in block_ks(n, k, dtype):
        lin = Linear(n, k, dtype, out_dtype, plan_tiles(n, k, dtype, 1, bk))
        row["decode_us"][bk] = time_calls([lin.call(x, wc, o, None) for x, wc, o in zip(xd, ws, od)],
                                          device="cuda", repeats=REPEATS)[0]
    del ws, xd, od
    top = max(ms)
    timed = sorted((r for r in row["candidates"] if top in r["us"]), key=lambda r: r["us"][top])
    probed = [r for bk in block_ks(n, k, dtype) for r in [t for t in timed if t["tiles"][2] == bk][:3]]
    for r in probed:
        bk = r["tiles"][2]
        cand = Linear(n, k, dtype, out_dtype, tuple(r["tiles"]))
        base = Linear(n, k, dtype, out_dtype, plan_tiles(n, k, dtype, PREFILL_M, bk))
        small = [base] + ([Linear(n, k, dtype, out_dtype, plan_tiles(n, k, dtype, 1, bk))]
                          if plan_tiles(n, k, dtype, 1) != plan_tiles(n, k, dtype, PREFILL_M) else [])
        try:
            fails = full_probe(base, cand, n, k, dtype, out_dtype)
            for lin in small:
                fails += [f"{lin.entry.constexpr_dict()['BLOCK_M']}-row tile {f}"
                          for f in probe(lin, cand, n, k, dtype, out_dtype)]
            row["probes"].append({"tiles": r["tiles"], "failures": fails})
        except Exception as exc:
            row["probes"].append({"tiles": r["tiles"], "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
    del w, xs, outs
    torch.cuda.empty_cache()
    return row


def markdown(results: dict) -> str:
    ms = results["ms"]
    lines = [f"# Prefill-bucket matmul tiles ({results['preset']})", "",
             "µs per call (TFLOP/s); the plan's tile and torch (cuBLAS) at each M beside the best candidates", ""]
    for row in results["weights"]:
        def cell(us: float, m: int) -> str:
            return f"{us:.0f} ({row['flops_per_row'] * m / (us * 1e-6) / 1e12:.0f})"
        timed = sorted((r for r in row["candidates"] if max(ms) in r["us"]), key=lambda r: r["us"][max(ms)])
        lines += [f"## {row['role']} {row['n']} x {row['k']}", "",
                  "| tile BM, BN, BK, warps, stages, splits | " + " | ".join(f"M = {m}" for m in ms) + " |",
                  "|---" * (len(ms) + 1) + "|",
                  "| torch | " + " | ".join(cell(row["torch_us"][m], m) for m in ms) + " |",
                  "| plan | " + " | ".join(f"{cell(row['plan'][m]['us'], m)} {row['plan'][m]['tiles'][:2]}"
                                            for m in ms) + " |"]
        lines += [f"| {r['tiles']} | " + " | ".join(cell(r["us"][m], m) for m in ms) + " |" for r in timed[:8]]
        if "order" in row:
            o = row["order"]
            for order, key in (("row", "m_major"), ("column", "n_major")):
                plan = " (plan)" if (order == "column") == o["plan_n_major"] else ""
                lines.append(f"| bucket {o['tiles']}, {order} first{plan} | "
                             + " | ".join(cell(o[key][m], m) for m in ms) + " |")
        lines += ["", "decode (M = 4, the decode bucket's tile, weights cold) by BLOCK_K: " + ", ".join(
            f"{bk}: {us:.1f} µs" for bk, us in row["decode_us"].items())]
        lines += ["", "cross-bucket probes (candidate at 4,096 rows against the plan's tiles):", ""]
        lines += probe_lines(row["probes"])
        errs = sum(1 for r in row["candidates"] if "error" in r)
        lines += ["", f"{errs} of {len(row['candidates'])} candidates failed to compile or run", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", default="llama-1b")
    parser.add_argument("--ms", default="256,512,1024,2048,4096,8192", help="prefill row counts to time")
    parser.add_argument("--workers", type=int, default=14, help="parallel compile processes")
    parser.add_argument("--roles", default="qkv,o,gate_up,down")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    ms = sorted(int(m) for m in args.ms.split(","))
    dtype = preset(args.preset).dtype
    todo = [w for w in weights(args.preset) if w[0] in set(args.roles.split(","))]
    start = time.monotonic()
    jobs = [(n, k, dtype, out_dtype, t) for _, n, k, out_dtype in todo for t in candidates(n, k, dtype)]
    errors = compile_all(jobs, args.workers)
    results: dict = {"preset": args.preset, "ms": ms, "compile_s": time.monotonic() - start, "weights": [],
                     "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    args.out.mkdir(parents=True, exist_ok=True)
    for role, n, k, out_dtype in todo:
        print(f"{time.monotonic() - start:.0f} s: {role}", file=sys.stderr, flush=True)
        results["weights"].append(sweep_weight(role, n, k, dtype, out_dtype, ms, errors))
        (args.out / "prefill_tiles.json").write_text(json.dumps(results, indent=1))
        (args.out / "prefill_tiles.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
