"""Sweep launch configurations of the plan's matmuls and paged attention on CUDA, with invariance checks.

    python bench/config_sweep.py --out DIR [--preset llama-1b] [--budget-s 230] [--workers 12]
        [--kinds attention,matmul] [--variants plan,walk] [--matmul-configs "64,32,128,4,4;64,16,256,4,4"]
        [--kv-len 1024,4096,16384]

For every matmul (N, K) of the plan and every candidate of bench/sweep_cases.py: the median GPU
time at decode M = 1 and 32 (weights cold in L2) and at prefill M = 4096, against torch
(cuBLAS) at the same M, and whether rows of a 4096-row launch equal the same rows launched in
smaller batches, bitwise. For attention: decode B = 4 at each KV length (1,024 by default) and
B = 32 at the first, prefill L = 4,096, against SDPA, and the prefill/chunked/decode bitwise schedule check. Also three copy-bandwidth
measurements (what the benchmark's ceiling should be). Candidates are compiled first in
parallel worker processes (Triton's disk cache), then timed one at a time. The run stops
timing at the budget and writes ``sweep.json`` and ``sweep.md`` after every shape.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
import traceback
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from bench.kernel_timing import L2_FLUSH_BYTES, copy_bandwidth_gbps, time_calls  # noqa: E402
from bench import sweep_cases as sc  # noqa: E402
from kernels.plan import preset_plan  # noqa: E402

DECODE_MS = (1, 32)
REPEATS = 5
# Set by main(): the device, prefill M / attention length, KV length of decode attention.
SETTINGS = {"device": "cuda", "prefill_m": 4096, "kv_lens": (1024,)}


def _entry(preset: str, key: str, kind: str, cand: tuple):
    base = preset_plan(preset).entry(key)
    if kind == "matmul":
        return sc.with_config(base, dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K"), cand[:3])), cand[3], cand[4])
    return sc.variant_entry(base, *cand)


def _prepare(device: str) -> None:
    """Under Triton's interpreter (``--device cpu``), the patches its kernel checks need: loop bounds
    from loaded scalars, and a tl.dot whose element bits do not depend on its tile position."""
    if device == "cpu":
        from tests.kernels.interpreter_checks import prepare_interpreter_worker

        if not prepare_interpreter_worker():
            raise SystemExit(2)


def _warm(job: tuple) -> tuple[tuple, str | None]:
    """Compile one candidate by launching it once on small inputs (fills Triton's disk cache)."""
    preset, kind, key, cand, device = job
    try:
        entry = _entry(preset, key, kind, cand)
        if kind == "matmul":
            sc.matmul_call(entry, *sc.matmul_inputs(entry, 1, 1, device)[0])()
        else:
            inputs = sc.attention_inputs(entry, 2, 3, 80, device)
            sc.attention_call(entry, cand[0])(*inputs, 0.125)
        if device == "cuda":
            torch.cuda.synchronize()
        return job, None
    except Exception as exc:  # recorded per candidate; the sweep goes on
        return job, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def _time(calls: list) -> float:
    return time_calls(calls, device=SETTINGS["device"], repeats=REPEATS)[0]


def sweep_matmul(preset: str, key: str, errors: dict, deadline: float) -> dict:
    entry = preset_plan(preset).entry(key)
    c = entry.constexpr_dict()
    size = 2 * c["N"] * c["K"]
    copies = max(1, min(64, -(-L2_FLUSH_BYTES // size)))
    device, prefill_m = SETTINGS["device"], SETTINGS["prefill_m"]
    one_row = sc.matmul_inputs(entry, 1, copies, device)  # weights cold in L2: each copy has its own
    decode = {m: [(torch.randn(m, c["K"], device=device).to(w.dtype), w,
                   torch.empty(m, c["N"], dtype=out.dtype, device=device)) for _, w, out in one_row]
              for m in DECODE_MS}
    prefill = sc.matmul_inputs(entry, prefill_m, 2, device)
    row = {"key": key, "roles": list(entry.roles), "n": c["N"], "k": c["K"], "weight_bytes": size,
           "torch_us": {str(m): _time([sc.torch_matmul_call(*t) for t in decode[m]]) for m in DECODE_MS},
           "candidates": []}
    row["torch_us"]["prefill"] = _time([sc.torch_matmul_call(*t) for t in prefill])
    for cand in sc.matmul_candidates(c["N"]):
        out = {"config": list(cand)}
        row["candidates"].append(out)
        if errors.get(("matmul", key, cand)):
            out["error"] = errors[("matmul", key, cand)]
            continue
        if time.monotonic() > deadline:
            out["error"] = "not timed: budget spent"
            continue
        try:
            cand_entry = _entry(preset, key, "matmul", cand)
            out["us"] = {str(m): _time([sc.matmul_call(cand_entry, *t) for t in decode[m]]) for m in DECODE_MS}
            out["us"]["prefill"] = _time([sc.matmul_call(cand_entry, *t) for t in prefill])
            out["invariance_failures"] = sc.matmul_invariance_failures(cand_entry, prefill[0][0], prefill[0][1])
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        if device == "cuda":
            torch.cuda.empty_cache()
    return row


def sweep_attention(preset: str, key: str, errors: dict, deadline: float) -> dict:
    entry = preset_plan(preset).entry(key)
    scale = entry.static_dict()["head_dim"] ** -0.5
    kv_lens, length = SETTINGS["kv_lens"], SETTINGS["prefill_m"]
    cases = {f"decode_b4_kv{kv}": (4, 1, kv) for kv in kv_lens}
    cases |= {f"decode_b32_kv{kv_lens[0]}": (32, 1, kv_lens[0]), "prefill": (1, length, length)}
    s = entry.static_dict()
    kv_bytes = {n: 4 * b * kv * s["num_kv_heads"] * s["head_dim"] for n, (b, _, kv) in cases.items()}
    copies = {n: max(1, min(32, -(-L2_FLUSH_BYTES // kv_bytes[n]))) for n in cases}
    inputs = {n: [sc.attention_inputs(entry, *shape, SETTINGS["device"]) for _ in range(copies[n])]
              for n, shape in cases.items()}
    row = {"key": key, "sdpa_us": {n: _time([sc.sdpa_call(*i, scale) for i in ins]) for n, ins in inputs.items()},
           "candidates": []}
    for cand in sc.ATTENTION_CANDIDATES:
        out = {"config": list(cand)}
        row["candidates"].append(out)
        if errors.get(("attention", key, cand)) or time.monotonic() > deadline:
            out["error"] = errors.get(("attention", key, cand)) or "not timed: budget spent"
            continue
        try:
            cand_entry = _entry(preset, key, "attention", cand)
            call = sc.attention_call(cand_entry, cand[0])
            out["us"] = {n: _time([(lambda i=i: call(*i, scale)) for i in ins]) for n, ins in inputs.items()}
            out["invariance_failures"] = sc.attention_invariance_failures(cand_entry, SETTINGS["device"], cand[0])
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return row


def ceilings() -> dict:
    """The memory ceiling three ways: eager 4 GiB and 1 GiB copies, and a 1 GiB copy in a CUDA graph."""
    out = {"copy_eager_4gib_gbps": copy_bandwidth_gbps(device="cuda", repeats=31),
           "copy_eager_1gib_gbps": copy_bandwidth_gbps(device="cuda", repeats=31, num_bytes=2**30)}
    src = torch.ones(2**28, device="cuda")
    dst = torch.empty_like(src)
    out["copy_graph_1gib_gbps"] = 2 * 2**30 / (_time([lambda: dst.copy_(src)]) * 1e-6) / 1e9
    return out


def markdown(results: dict) -> str:
    lines = [f"# Configuration sweep ({results['preset']})", "", f"ceilings: {json.dumps(results['ceilings'])}", ""]
    copy = results["ceilings"].get("copy_eager_4gib_gbps", float("nan"))
    for row in results["attention"]:
        names = list(row["sdpa_us"])
        lines += [f"## {row['key']} (µs; SDPA: {json.dumps({k: round(v, 1) for k, v in row['sdpa_us'].items()})})",
                  "", f"| variant, BQ, BN, warps, stages | {' | '.join(names)} | invariance |",
                  "|---" * (len(names) + 2) + "|"]
        for c in row["candidates"]:
            us = c.get("us", {})
            cells = " | ".join(f"{us[n]:.1f}" if n in us else "" for n in names)
            lines.append(f"| {c['config']} | {cells} | {c.get('error') or c.get('invariance_failures')} |")
        lines.append("")
    for row in results["matmul"]:
        t = row["torch_us"]
        torch_us = json.dumps({k: round(v, 1) for k, v in t.items()})
        lines += [f"## {row['key']} ({'/'.join(row['roles'])}); torch µs {torch_us}", "",
                  "| BM, BN, BK, warps, stages | M=1 µs | % copy | M=32 µs | prefill µs | % cuBLAS | invariance |",
                  "|---|---|---|---|---|---|---|"]
        for c in row["candidates"]:
            us = c.get("us")
            if not us:
                lines.append(f"| {c['config']} | | | | | | {c.get('error')} |")
                continue
            pct_copy = 100 * row["weight_bytes"] / (us["1"] * 1e-6) / 1e9 / copy
            lines.append(f"| {c['config']} | {us['1']:.1f} | {pct_copy:.0f} | {us['32']:.1f} | {us['prefill']:.0f} | "
                         f"{100 * t['prefill'] / us['prefill']:.0f} | {c.get('invariance_failures')} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def _configs(text: str) -> list[tuple[int, ...]]:
    return [_ints(part) for part in text.split(";") if part.strip()]


def _select_candidates(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Narrow bench/sweep_cases.py's candidate lists to what the command line names."""
    unknown = set(args.kinds.split(",")) - {"attention", "matmul"}
    if unknown:
        parser.error(f"--kinds: unknown {sorted(unknown)}; use attention and/or matmul")
    if args.variants:
        variants = args.variants.split(",")
        missing = set(variants) - {c[0] for c in sc.ATTENTION_CANDIDATES}
        if missing:
            parser.error(f"--variants: no candidates of {sorted(missing)} in bench/sweep_cases.py")
        sc.ATTENTION_CANDIDATES[:] = [c for c in sc.ATTENTION_CANDIDATES if c[0] in variants]
    if args.matmul_configs:
        missing = set(args.matmul_configs) - set(sc.MATMUL_CANDIDATES)
        if missing:
            parser.error(f"--matmul-configs: {sorted(missing)} not among bench/sweep_cases.py's candidates")
        sc.MATMUL_CANDIDATES[:] = [c for c in sc.MATMUL_CANDIDATES if c in args.matmul_configs]
    if args.candidates:
        del sc.MATMUL_CANDIDATES[args.candidates:], sc.ATTENTION_CANDIDATES[args.candidates:]


def build_parser() -> argparse.ArgumentParser:
    """The command line of the sweep."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", default="llama-1b")
    parser.add_argument("--budget-s", type=float, default=230.0, help="stop timing after this many seconds")
    parser.add_argument("--workers", type=int, default=12, help="parallel compile processes")
    parser.add_argument("--device", default="cuda", help="cpu only for a smoke test under TRITON_INTERPRET=1")
    parser.add_argument("--prefill-m", type=int, default=4096, help="prefill M (matmul) and length (attention)")
    parser.add_argument("--kv-len", type=_ints, default=(1024,), help="KV lengths of decode attention, e.g. 1024,4096")
    parser.add_argument("--candidates", type=int, default=0, help="only the first N candidates of each (smoke)")
    parser.add_argument("--kinds", default="attention,matmul", help="which kernels to sweep")
    parser.add_argument("--variants", help="only these attention variants, e.g. plan,walk")
    parser.add_argument("--matmul-configs", type=_configs,
                        help="only these matmul candidates: BM,BN,BK,warps,stages separated by ';'")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    SETTINGS.update(device=args.device, prefill_m=args.prefill_m, kv_lens=args.kv_len)
    _prepare(args.device)
    _select_candidates(args, parser)
    start = time.monotonic()
    deadline = start + args.budget_s
    plan = preset_plan(args.preset)
    results: dict = {"preset": args.preset, "ceilings": {}, "attention": [], "matmul": [], "compile_s": None}
    args.out.mkdir(parents=True, exist_ok=True)

    def write() -> None:
        (args.out / "sweep.json").write_text(json.dumps(results, indent=1, default=str))
        (args.out / "sweep.md").write_text(markdown(results))
    kinds = set(args.kinds.split(","))
    attention_keys = [e.key for e in plan.entries if e.kernel == "paged_attention" and "attention" in kinds]
    order = ("n2048_k8192", "n2048_k2048", "n3072_k2048", "n16384_k2048", "n128256", "n512_k2048", "n8192_k2048")
    matmul_keys = sorted((e.key for e in plan.entries if e.kernel == "matmul" and "matmul" in kinds),
                         key=lambda k: next((i for i, o in enumerate(order) if o in k), len(order)))
    jobs = [(args.preset, "attention", k, c, args.device) for k in attention_keys for c in sc.ATTENTION_CANDIDATES]
    jobs += [(args.preset, "matmul", k, c, args.device) for k in matmul_keys
             for c in sc.matmul_candidates(plan.entry(k).constexpr_dict()["N"])]
    errors: dict = {}
    with multiprocessing.get_context("spawn").Pool(args.workers, _prepare, (args.device,)) as pool:
        for (_, kind, key, cand, _), error in pool.imap_unordered(_warm, jobs):
            if error:
                errors[(kind, key, cand)] = error
    results["compile_s"] = time.monotonic() - start
    results["compile_errors"] = {f"{k[0]} {k[1]} {list(k[2])}": e for k, e in errors.items()}
    print(f"compiled {len(jobs)} candidates in {results['compile_s']:.0f} s, {len(errors)} failed", file=sys.stderr)
    try:
        results["ceilings"] = ceilings() if args.device == "cuda" else {}
    except Exception:
        results["ceilings"] = {"error": traceback.format_exc()}
    write()
    for key in attention_keys:
        results["attention"].append(sweep_attention(args.preset, key, errors, deadline))
        write()
    for key in matmul_keys:
        print(f"{time.monotonic() - start:.0f} s: {key}", file=sys.stderr, flush=True)
        results["matmul"].append(sweep_matmul(args.preset, key, errors, deadline))
        write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
