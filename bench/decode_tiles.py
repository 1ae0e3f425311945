"""Decode-bucket matmul tiles: which (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, splits) streams each
weight fastest at decode M, and whether its rows equal a prefill tile's rows bitwise.

    PYTHONPATH=. python3 bench/decode_tiles.py --out DIR [--preset llama-1b] [--m 4] [--workers 14]
        [--roles qkv,o] [--block-m 16,64] [--warps 2,4] [--stages 3,5] [--splits 1,2,4] [--own-block-k]

DESIGN.md §5 allows tile shapes per M bucket only when BLOCK_K, the splits and the K order are
the same in every bucket of a weight, and then rests cross-bucket equality on a trusted
assumption (a ``tl.dot`` element does not depend on the tile shape) with GPU row probes as its
evidence. So for each weight of the preset this script

1. times every decode candidate at M rows (CUDA-graph replays over weight copies larger than L2,
   as bench/kernel_timing.py does), a split candidate as its split kernel plus its combine;
2. times, for each (BLOCK_K, splits) the decode candidates use, the prefill tile of the plan
   with that BLOCK_K and those splits at M = 4,096 (what the prefill bucket would cost);
3. probes, for the fastest decode candidates, the rows of launches of M = 1, 4, 37 and 128
   against the same rows of a 4,096-row launch of the prefill tile with the same BLOCK_K and
   splits, bitwise, on adversarial inputs (exponents spread over 2^-12 .. 2^12, so a changed
   accumulation order shows in the low bits).

Writes ``DIR/decode_tiles.json`` and ``DIR/decode_tiles.md`` after every weight.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import sys
import time
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from bench.kernel_timing import L2_FLUSH_BYTES, time_calls  # noqa: E402
from kernels import configs, matmul_configs  # noqa: E402
from kernels.matmul import launch_matmul  # noqa: E402
from kernels.matmul_combine import launch_matmul_combine  # noqa: E402
from kernels.matmul_split import launch_matmul_split  # noqa: E402
from kernels.plan import PlanEntry  # noqa: E402
from kernels.shapes import preset  # noqa: E402

PREFILL_M = 4096
PROBE_MS = (1, 4, 37, 128)
REPEATS = 7


def weights(name: str) -> list[tuple[str, int, int, str]]:
    """(role, N, K, out dtype) of the preset's decode matmuls."""
    s = preset(name)
    q, kv = s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
    return [("qkv", q + 2 * kv, s.hidden_size, s.dtype), ("o", s.hidden_size, q, s.dtype),
            ("gate_up", 2 * s.intermediate_size, s.hidden_size, s.dtype),
            ("down", s.hidden_size, s.intermediate_size, s.dtype), ("lm_head", s.vocab_size, s.hidden_size, "float32")]


# What candidates() ranges over; main() narrows it from the command line.
SPACE = {"block_m": (16, 64), "warps": (2, 4), "stages": (3, 5), "splits": (1, 2, 4), "own_block_k": False}


def candidates(n: int, k: int, dtype: str = "bfloat16") -> list[tuple[int, ...]]:
    """(BM, BN, BK, warps, stages, splits) worth timing for an [N, K] weight at decode."""
    wide = n >= 16384
    block_ks = (64, 128, 256) if wide else (128, 256, 512)
    if SPACE["own_block_k"]:  # the weight's BLOCK_K only (the K order the plan's buckets share)
        block_ks = (matmul_configs._matmul_tiles(n, k, dtype)[2],)
    out = []
    for bm, bn, bk, warps, stages, splits in itertools.product(
            SPACE["block_m"], (64, 128) if wide else (16, 32, 64), block_ks, SPACE["warps"], SPACE["stages"],
            (1,) if wide else SPACE["splits"]):
        if bm == 64 and warps != 4 or k % (splits * bk):
            continue
        out.append((bm, bn, bk, warps, stages, splits))
    return out


def _entry(kernel: str, n: int, k: int, dtype: str, out_dtype: str, tiles: tuple[int, ...]) -> PlanEntry:
    bm, bn, bk, warps, stages, splits = tiles
    if kernel == "matmul":
        values = {"N": n, "K": k, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "HAS_BIAS": False,
                  "OUT_DTYPE": out_dtype}
        static = {"n": n, "k": k, "dtype": dtype, "out_dtype": out_dtype}
    else:
        values = {"N": n, "K": k, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLITS": splits}
        static = {"n": n, "k": k, "dtype": dtype}
    config = configs.LaunchConfig(kernel=kernel, key=f"{kernel}.bench", constexprs=tuple(sorted(values.items())),
                                  num_warps=warps, num_stages=stages, static=tuple(sorted(static.items())))
    return PlanEntry.from_config(config, ("bench",))


class Linear:
    """One candidate as a callable ``x [M, K] -> out [M, N]`` (split kernel plus combine when splits > 1)."""

    def __init__(self, n: int, k: int, dtype: str, out_dtype: str, tiles: tuple[int, ...]) -> None:
        self.splits = tiles[5]
        if self.splits == 1:
            self.entry = _entry("matmul", n, k, dtype, out_dtype, tiles)
        else:
            self.entry = _entry("matmul_split", n, k, dtype, out_dtype, tiles)
            self.combine = PlanEntry.from_config(configs.matmul_combine_config(
                n=n, splits=self.splits, dtype=dtype, has_bias=False, out_dtype=out_dtype), ("bench",))

    def buffers(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor | None:
        if self.splits == 1:
            return None
        return torch.empty(self.splits, x.shape[0], out.shape[1], dtype=torch.float32, device=x.device)

    def call(self, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, partial: torch.Tensor | None,
             *, split_only: bool = False):
        if self.splits == 1:
            return lambda: launch_matmul(x, w, None, out, self.entry)

        def run() -> None:
            launch_matmul_split(x, w, partial, self.entry)
            if not split_only:
                launch_matmul_combine(partial, None, out, self.combine)
        return run


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype a plan names (float32, bfloat16)."""
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def _warm(job: tuple) -> tuple[tuple, str | None]:
    """Compile one candidate by launching it once (fills Triton's disk cache)."""
    n, k, dtype, out_dtype, tiles = job
    try:
        lin = Linear(n, k, dtype, out_dtype, tiles)
        x = torch.randn(2, k, device="cuda").to(torch_dtype(dtype))
        w = torch.randn(n, k, device="cuda").to(torch_dtype(dtype))
        out = torch.empty(2, n, dtype=torch_dtype(out_dtype), device="cuda")
        lin.call(x, w, out, lin.buffers(x, out))()
        torch.cuda.synchronize()
        return job, None
    except Exception as exc:  # recorded per candidate; the sweep goes on
        return job, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def compile_all(jobs: list[tuple], workers: int) -> dict:
    """Compile every (N, K, dtype, out dtype, tiles) job in ``workers`` processes; the errors by (N, K, tiles)."""
    start, errors = time.monotonic(), {}
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for (n, k, _, _, tiles), error in pool.imap_unordered(_warm, jobs):
            if error:
                errors[(n, k, tiles)] = error
    print(f"compiled {len(jobs)} candidates in {time.monotonic() - start:.0f} s, {len(errors)} failed",
          file=sys.stderr, flush=True)
    return errors


def probe_lines(probes: list[dict]) -> list[str]:
    """Markdown bullets of cross-bucket probe results."""
    return [f"- {p['tiles']}: {p.get('error') or ('bitwise equal' if not p['failures'] else p['failures'])}"
            for p in probes]


def adversarial(rows: int, cols: int, dtype: str, seed: int) -> torch.Tensor:
    """Values whose exponents spread over 2^-12 .. 2^12 with random signs (low bits show order changes)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    mant = torch.rand(rows, cols, device="cuda", generator=g) + 1.0
    exps = torch.randint(-12, 13, (rows, cols), device="cuda", generator=g).float()
    sign = torch.randint(0, 2, (rows, cols), device="cuda", generator=g).float() * 2 - 1
    return (sign * mant * torch.exp2(exps)).to(torch_dtype(dtype))


def probe(lin_decode: Linear, lin_prefill: Linear, n: int, k: int, dtype: str, out_dtype: str) -> list[str]:
    """Rows of decode-tile launches of M = PROBE_MS against the same rows of one prefill-tile launch."""
    x = adversarial(PREFILL_M, k, dtype, 1)
    w = adversarial(n, k, dtype, 2)
    bits = torch.int32 if out_dtype == "float32" else torch.int16
    full = torch.empty(PREFILL_M, n, dtype=torch_dtype(out_dtype), device="cuda")
    lin_prefill.call(x, w, full, lin_prefill.buffers(x, full))()
    failures = []
    for m in PROBE_MS:
        for start in (0, PREFILL_M - m, 1000):
            rows = x[start:start + m].contiguous()
            out = torch.empty(m, n, dtype=full.dtype, device="cuda")
            lin_decode.call(rows, w, out, lin_decode.buffers(rows, out))()
            if not torch.equal(out.view(bits), full[start:start + m].view(bits)):
                differ = int((out.view(bits) != full[start:start + m].view(bits)).sum())
                failures.append(f"M={m} rows [{start}, {start + m}): {differ} elements differ")
    torch.cuda.synchronize()
    return failures


def plan_prefill_tiles(n: int, k: int, dtype: str, bk: int, splits: int) -> tuple[int, ...]:
    """The plan's prefill tile for [N, K] with BLOCK_K and splits replaced."""
    bm, bn, _, warps, stages = matmul_configs._matmul_tiles(n, k, dtype)
    return bm, bn, bk, warps, stages, splits


def sweep_weight(role: str, n: int, k: int, dtype: str, out_dtype: str, m: int, errors: dict) -> dict:
    copies = max(1, min(64, -(-L2_FLUSH_BYTES // (2 * n * k))))
    ws = [(torch.randn(n, k, device="cuda") * k ** -0.5).to(torch_dtype(dtype)) for _ in range(copies)]
    xs = [torch.randn(m, k, device="cuda").to(torch_dtype(dtype)) for _ in range(copies)]
    outs = [torch.empty(m, n, dtype=torch_dtype(out_dtype), device="cuda") for _ in range(copies)]
    torch_us = time_calls([lambda x=x, w=w, o=o: o.copy_(torch.nn.functional.linear(x, w))
                           for x, w, o in zip(xs, ws, outs)], device="cuda", repeats=REPEATS)[0]
    row: dict = {"role": role, "n": n, "k": k, "m": m, "weight_bytes": 2 * n * k, "torch_us": torch_us,
                 "plan_tiles": list(matmul_configs._matmul_tiles(n, k, dtype)), "decode": [], "prefill": [], "probes": []}
    for tiles in candidates(n, k, dtype):
        rec: dict = {"tiles": list(tiles)}
        row["decode"].append(rec)
        if errors.get((n, k, tiles)):
            rec["error"] = errors[(n, k, tiles)]
            continue
        try:
            lin = Linear(n, k, dtype, out_dtype, tiles)
            parts = [lin.buffers(x, o) for x, o in zip(xs, outs)]
            rec["us"] = time_calls([lin.call(x, w, o, p) for x, w, o, p in zip(xs, ws, outs, parts)],
                                   device="cuda", repeats=REPEATS)[0]
            if lin.splits > 1:
                rec["split_us"] = time_calls([lin.call(x, w, o, p, split_only=True)
                                              for x, w, o, p in zip(xs, ws, outs, parts)],
                                             device="cuda", repeats=REPEATS)[0]
        except Exception as exc:
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    timed = sorted((r for r in row["decode"] if "us" in r), key=lambda r: r["us"])
    x = torch.randn(PREFILL_M, k, device="cuda").to(torch_dtype(dtype))
    out = torch.empty(PREFILL_M, n, dtype=torch_dtype(out_dtype), device="cuda")
    for bk, splits in sorted({(r["tiles"][2], r["tiles"][5]) for r in timed[:12]}
                             | {(matmul_configs._matmul_tiles(n, k, dtype)[2], 1)}):
        tiles = plan_prefill_tiles(n, k, dtype, bk, splits)
        rec = {"tiles": list(tiles)}
        row["prefill"].append(rec)
        try:
            lin = Linear(n, k, dtype, out_dtype, tiles)
            rec["us"] = time_calls([lin.call(x, ws[0], out, lin.buffers(x, out))], device="cuda", repeats=5)[0]
        except Exception as exc:
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    seen = set()
    for r in timed:
        shape = (r["tiles"][0], r["tiles"][2], r["tiles"][5])  # one probe per (BM, BK, splits)
        if shape in seen or len(seen) >= 6:
            continue
        seen.add(shape)
        tiles = tuple(r["tiles"])
        try:
            fails = probe(Linear(n, k, dtype, out_dtype, tiles),
                          Linear(n, k, dtype, out_dtype, plan_prefill_tiles(n, k, dtype, tiles[2], tiles[5])),
                          n, k, dtype, out_dtype)
            row["probes"].append({"tiles": list(tiles), "failures": fails})
        except Exception as exc:
            row["probes"].append({"tiles": list(tiles), "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
    del ws, xs, outs
    torch.cuda.empty_cache()
    return row


def markdown(results: dict) -> str:
    lines = [f"# Decode-bucket matmul tiles ({results['preset']}, M = {results['m']})", ""]
    for row in results["weights"]:
        timed = sorted((r for r in row["decode"] if "us" in r), key=lambda r: r["us"])
        plan = next((r for r in row["decode"] if r["tiles"] == row["plan_tiles"] + [1] and "us" in r), None)
        lines += [f"## {row['role']} {row['n']} x {row['k']}: torch {row['torch_us']:.1f} µs, plan tile "
                  f"{row['plan_tiles']}" + (f" {plan['us']:.1f} µs" if plan else ""), "",
                  "| BM, BN, BK, warps, stages, splits | µs | split kernel µs | GB/s |", "|---|---|---|---|"]
        for r in timed[:10]:
            gbps = row["weight_bytes"] / (r["us"] * 1e-6) / 1e9
            lines.append(f"| {r['tiles']} | {r['us']:.1f} | {r.get('split_us', '')} | {gbps:.0f} |")
        lines += ["", "prefill (M = 4,096) with the plan's tile at that BLOCK_K and splits:", ""]
        lines += [f"- {r['tiles']}: {r.get('us', r.get('error'))}" for r in row["prefill"]]
        lines += ["", "cross-bucket probes (decode tile vs prefill tile, same BLOCK_K and splits):", ""]
        lines += probe_lines(row["probes"])
        errs = sum(1 for r in row["decode"] if "error" in r)
        lines += ["", f"{errs} candidates failed to compile or run", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", default="llama-1b")
    parser.add_argument("--m", type=int, default=4, help="decode rows (the batch)")
    parser.add_argument("--workers", type=int, default=14, help="parallel compile processes")
    parser.add_argument("--roles", default="qkv,o,gate_up,down,lm_head")
    for name, default in (("block-m", "16,64"), ("warps", "2,4"), ("stages", "3,5"), ("splits", "1,2,4")):
        parser.add_argument(f"--{name}", default=default,
                            help=f"candidate values, comma-separated (default {default})")
    parser.add_argument("--own-block-k", action="store_true", help="only each weight's own BLOCK_K")
    args = parser.parse_args(argv)
    try:
        SPACE.update({key: tuple(int(v) for v in getattr(args, key).split(","))
                      for key in ("block_m", "warps", "stages", "splits")}, own_block_k=args.own_block_k)
    except ValueError as exc:
        parser.error(f"candidate values must be comma-separated integers: {exc}")
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    roles = set(args.roles.split(","))
    todo = [w for w in weights(args.preset) if w[0] in roles]
    start = time.monotonic()
    jobs = [(n, k, preset(args.preset).dtype, out_dtype, t) for _, n, k, out_dtype in todo
            for t in candidates(n, k, preset(args.preset).dtype)]
    errors = compile_all(jobs, args.workers)
    results: dict = {"preset": args.preset, "m": args.m, "compile_s": time.monotonic() - start, "weights": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for role, n, k, out_dtype in todo:
        print(f"{time.monotonic() - start:.0f} s: {role}", file=sys.stderr, flush=True)
        results["weights"].append(sweep_weight(role, n, k, preset(args.preset).dtype, out_dtype, args.m, errors))
        (args.out / "decode_tiles.json").write_text(json.dumps(results, indent=1))
        (args.out / "decode_tiles.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
