"""The MLP's gate/up projection with SiLU·up in its epilogue against the matmul then silu_mul.

    PYTHONPATH=. python3 bench/fused_mlp.py --out DIR [--preset llama-1b] [--m 1,4,16,64,1024,4096] [--repeats 50]

For each M, on one GPU and in one process: GPU microseconds per call of ``ops.gate_up_silu_mul``
(one launch, kernels/matmul_silu.py) and of ``ops.silu_mul(ops.linear(...))`` (two launches and
the [M, 2I] intermediate), each the median of CUDA-graph replays over weight copies larger than
L2 (bench/kernel_timing.py), interleaved twice so drift shows; and whether the two give the same
bits. Writes ``DIR/fused_mlp.json`` and ``DIR/fused_mlp.md``.
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

from bench.kernel_timing import L2_FLUSH_BYTES, time_calls  # noqa: E402
from kernels import ops  # noqa: E402
from kernels.launch import use_plan  # noqa: E402
from kernels.plan import preset_plan  # noqa: E402


def measure(preset: str, rows: list[int], repeats: int) -> list[dict]:
    """One result per M: both variants' µs per call (two interleaved passes) and bitwise equality."""
    plan = preset_plan(preset)
    s = plan.shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    weight_bytes = 2 * s.intermediate_size * s.hidden_size * 2
    weights = [(torch.randn(2 * s.intermediate_size, s.hidden_size, device="cuda", generator=gen) / 45).bfloat16()
               for _ in range(max(2, -(-L2_FLUSH_BYTES // weight_bytes)))]
    results = []
    with use_plan(plan):
        for m in rows:
            x = torch.randn(m, s.hidden_size, device="cuda", generator=gen).bfloat16()
            fused = [lambda w=w, x=x: ops.gate_up_silu_mul(x, w) for w in weights]
            separate = [lambda w=w, x=x: ops.silu_mul(ops.linear(x, w)) for w in weights]
            times = {"fused": [], "separate": []}
            for _ in range(2):
                times["fused"].append(time_calls(fused, device="cuda", repeats=repeats)[0])
                times["separate"].append(time_calls(separate, device="cuda", repeats=repeats)[0])
            equal = torch.equal(fused[0]().view(torch.int16), separate[0]().view(torch.int16))
            results.append({"m": m, "fused_us": times["fused"], "separate_us": times["separate"],
                            "ratio": statistics.median(times["separate"]) / statistics.median(times["fused"]),
                            "bitwise_equal": equal})
            print(f"M={m}: fused {times['fused']} µs, separate {times['separate']} µs, equal {equal}",
                  file=sys.stderr)
    return results


def markdown(preset: str, results: list[dict]) -> str:
    lines = [f"gate/up + SiLU·up, {preset} (µs per call, two passes; ratio = separate / fused, medians)", "",
             "| M | fused | matmul + silu_mul | ratio | bitwise equal |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['m']} | {', '.join(f'{t:.1f}' for t in r['fused_us'])} | "
                     f"{', '.join(f'{t:.1f}' for t in r['separate_us'])} | {r['ratio']:.2f} | {r['bitwise_equal']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for fused_mlp.json and .md")
    parser.add_argument("--preset", default="llama-1b")
    parser.add_argument("--m", default="1,4,16,64,1024,4096", help="comma-separated row counts")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("fused_mlp: no CUDA device; this benchmark times GPU kernels only", file=sys.stderr)
        return 2
    rows = [int(v) for v in args.m.split(",")]
    results = measure(args.preset, rows, args.repeats)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fused_mlp.json").write_text(json.dumps({"preset": args.preset, "results": results,
                                                         "device": torch.cuda.get_device_name()}, indent=1))
    (args.out / "fused_mlp.md").write_text(markdown(args.preset, results))
    print(markdown(args.preset, results))
    return 0 if all(r["bitwise_equal"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
