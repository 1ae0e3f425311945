"""Benchmark the plan's kernels against their torch/cuBLAS equivalents in the same run.

    python bench/kernels.py --out bench-out/            # Llama-3.2-1B shapes on CUDA
    python bench/kernels.py --out /tmp/b --device cpu --preset tiny --ms 1,4 --prefill-m 64

For every kernel at decode M = 1, 4, 32 and prefill M = 4096: the median GPU time per call of
ours and of the torch equivalent (CUDA-graph replays over input copies larger than L2), the
achieved bandwidth and TFLOP/s, and their share of two ceilings measured by this script on
this device (a 4 GiB device-to-device copy, read plus written bytes, median of 31 eager copies;
a bf16 cuBLAS 8192^3 matmul). A failing case is recorded
with its error and the run continues. Writes ``results.json`` and ``results.md`` to --out.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import traceback
from dataclasses import replace
from pathlib import Path

import torch

# Run as a script, this file's directory comes first on sys.path and its name would shadow the
# kernels package: import from the repository root instead.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

from bench.kernel_cases import BenchCase, all_cases  # noqa: E402
from bench.kernel_timing import (L2_FLUSH_BYTES, copy_bandwidth_gbps, cublas_bf16_tflops,  # noqa: E402
                                 eager_call_us, process_cpu_us, time_calls)
from kernels.launch import use_plan  # noqa: E402
from kernels.plan import plan_for  # noqa: E402
from kernels.shapes import preset  # noqa: E402

MAX_COPIES = 64


def environment(device: str) -> dict:
    """What the numbers depend on: versions, device, thread count."""
    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
           "device": device, "cpu_threads": torch.get_num_threads(), "cuda": torch.version.cuda}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, capability=f"{props.major}.{props.minor}", sm_count=props.multi_processor_count,
                   memory_gib=round(props.total_memory / 2**30, 1))
        try:
            query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            env["driver"] = subprocess.run(query, capture_output=True, text=True, timeout=10).stdout.split()[0]
        except Exception:  # the driver version is informative only
            env["driver"] = None
    return env


def _max_abs_diff(ours: object, theirs: object) -> float | None:
    if not isinstance(ours, torch.Tensor) or not isinstance(theirs, torch.Tensor) or ours.shape != theirs.shape:
        return None
    return (ours.float() - theirs.float()).abs().max().item()


def run_case(case: BenchCase, *, device: str, repeats: int, ceilings: dict) -> dict:
    """Time one case (ours and baseline) and derive bandwidth, throughput and ceiling shares."""
    row = {"kernel": case.kernel, "shape": case.label, "m": case.m, "bytes": case.num_bytes, "flops": case.flops}
    copies = max(1, min(MAX_COPIES, -(-L2_FLUSH_BYTES // max(case.num_bytes, 1)))) if device == "cuda" else 1
    built = [case.build(i) for i in range(copies)]
    ours_out, base_out = built[0][0](), (built[0][1]() if built[0][1] else None)
    first = ours_out[0] if isinstance(ours_out, tuple) else ours_out
    base_first = base_out[0] if isinstance(base_out, tuple) else base_out
    if isinstance(base_first, torch.Tensor):
        base_first = case.baseline_layout(base_first)
    row["max_abs_diff_vs_torch"] = _max_abs_diff(first, base_first)
    row["copies"] = copies
    row["ours_us"], row["timing"] = time_calls([b[0] for b in built], device=device, repeats=repeats)
    row["ours_eager_us"] = eager_call_us(built[0][0], device=device)
    if device == "cpu":
        row["ours_cpu_us"] = process_cpu_us(built[0][0])
    if built[0][1] is not None:
        row["torch_us"], _ = time_calls([b[1] for b in built], device=device, repeats=repeats)
        row["ours_over_torch"] = row["ours_us"] / row["torch_us"]
    row["ours_gbps"] = case.num_bytes / (row["ours_us"] * 1e-6) / 1e9
    row["ours_tflops"] = case.flops / (row["ours_us"] * 1e-6) / 1e12
    if ceilings.get("copy_gbps"):
        row["pct_copy_bandwidth"] = 100 * row["ours_gbps"] / ceilings["copy_gbps"]
    if ceilings.get("cublas_bf16_tflops") and case.flops:
        row["pct_cublas_peak"] = 100 * row["ours_tflops"] / ceilings["cublas_bf16_tflops"]
    return row


def markdown(results: dict) -> str:
    """The results as a markdown table, ceilings and environment first."""
    env, ceil = results["environment"], results["ceilings"]
    lines = [f"# Kernel benchmark: {results['preset']} on {env.get('gpu', env['device'])}", "",
             f"torch {env['torch']}, triton {env['triton']}, CUDA {env.get('cuda')}, driver {env.get('driver')}", "",
             f"Ceilings: copy {ceil.get('copy_gbps', float('nan')):.0f} GB/s, "
             f"bf16 cuBLAS {ceil.get('cublas_bf16_tflops', float('nan')):.1f} TFLOP/s", "",
             "| kernel | shape | M | ours µs | torch µs | ours/torch | GB/s | % copy BW | TFLOP/s | % cuBLAS | "
             "eager µs | note |", "|" + "---|" * 12]

    def fmt(value: object, spec: str) -> str:
        return "" if value is None else format(value, spec)
    for r in results["cases"]:
        note = r.get("error", "").splitlines()[-1][:80] if r.get("error") else r.get("timing", "")
        if r.get("ours_cpu_us") is not None:
            note += f"; {r['ours_cpu_us']:.0f} µs CPU time"
        lines.append(f"| {r['kernel']} | {r['shape']} | {r['m']} | {fmt(r.get('ours_us'), '.1f')} | "
                     f"{fmt(r.get('torch_us'), '.1f')} | {fmt(r.get('ours_over_torch'), '.2f')} | "
                     f"{fmt(r.get('ours_gbps'), '.1f')} | {fmt(r.get('pct_copy_bandwidth'), '.0f')} | "
                     f"{fmt(r.get('ours_tflops') if r.get('flops') else None, '.1f')} | "
                     f"{fmt(r.get('pct_cublas_peak'), '.0f')} | {fmt(r.get('ours_eager_us'), '.0f')} | {note} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for results.json and results.md")
    parser.add_argument("--preset", default="llama-1b", help="model shape preset (kernels/shapes.py)")
    parser.add_argument("--dtype", default=None, help="override the preset's dtype (float32 or bfloat16)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--ms", default="1,4,32,4096", help="comma-separated M values")
    parser.add_argument("--prefill-m", type=int, default=4096, help="the M run as a prefill (attention)")
    parser.add_argument("--kv-len", type=int, default=1024, help="KV length of decode attention")
    parser.add_argument("--repeats", type=int, default=7, help="timed replays per case (median reported)")
    parser.add_argument("--kernels", default="", help="comma-separated kernel names to run (default all)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch.cuda.is_available() is False")
    shape = preset(args.preset) if args.dtype is None else replace(preset(args.preset), dtype=args.dtype)
    plan = plan_for(shape)
    ms = [int(m) for m in args.ms.split(",") if m]
    wanted = {k for k in args.kernels.split(",") if k}
    results: dict = {"preset": args.preset, "plan_digest": plan.digest, "environment": environment(args.device),
                     "ceilings": {}, "cases": []}
    on_gpu = args.device == "cuda"
    copy_repeats = max(args.repeats, 31) if on_gpu else args.repeats
    ceilings = (("copy_gbps", lambda: copy_bandwidth_gbps(device=args.device, repeats=copy_repeats,
                                                          num_bytes=4 * 2**30 if on_gpu else 2**24)),
                ("cublas_bf16_tflops", lambda: cublas_bf16_tflops(device=args.device, repeats=args.repeats,
                                                                   size=8192 if on_gpu else 256)))
    for name, measure in ceilings:
        try:
            results["ceilings"][name] = measure()
        except Exception:
            results["ceilings"][name + "_error"] = traceback.format_exc()
            print(f"ceiling {name} failed:\n{traceback.format_exc()}", file=sys.stderr)
    with use_plan(plan, check_metadata=False):
        cases = [c for c in all_cases(plan, ms, args.kv_len, args.device, prefill_m=args.prefill_m)
                 if not wanted or c.kernel in wanted]
        for index, case in enumerate(cases, 1):
            print(f"[{index}/{len(cases)}] {case.kernel} {case.label} M={case.m}", file=sys.stderr, flush=True)
            try:
                results["cases"].append(run_case(case, device=args.device, repeats=args.repeats,
                                                 ceilings=results["ceilings"]))
            except Exception:  # record and continue: the run is unattended
                error = traceback.format_exc()
                print(error, file=sys.stderr)
                results["cases"].append({"kernel": case.kernel, "shape": case.label, "m": case.m, "error": error})
            if args.device == "cuda":
                torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (args.out / "results.md").write_text(markdown(results))
    failed = sum(1 for r in results["cases"] if "error" in r)
    print(f"wrote {args.out / 'results.json'} and results.md; {len(results['cases'])} cases, {failed} failed",
          file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
