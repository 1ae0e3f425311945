"""Where a prefill's GPU time goes: per plan kernel (and torch's own kernels), from torch.profiler.

    PYTHONPATH=. python3 bench/prefill_profile.py --model-dir DIR [--shapes 4x4096,1x16384] [--out DIR]

Opens the engine with bench/engine_gpu.py's limits (eager steps; prefill never replays a graph),
runs each (batch x prompt length) of fresh random prompts to its first token once untimed, then
once under ``torch.profiler``, and reports each kernel family's GPU time and launches beside the
run's wall time. Kernels are grouped by the plan kernel whose Triton function they run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from bench.engine_gpu_common import random_prompts  # noqa: E402
from bench.engine_gpu_profile import _family  # noqa: E402
from bench.engine_gpu_workloads import open_engine  # noqa: E402
from engine.sampling_params import SamplingParams  # noqa: E402


def _prefill(engine, prompts: list[list[int]]) -> float:
    params = SamplingParams(max_tokens=1, ignore_eos=True)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for p in prompts:
        engine.add_request(p, params)
    while engine.has_unfinished():
        engine.step()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def profile_shape(engine, batch: int, length: int, seed: int) -> dict:
    from torch.profiler import ProfilerActivity, profile
    vocab = engine.spec.vocab_size
    _prefill(engine, random_prompts([length] * batch, seed=seed, vocab_size=vocab))
    prompts = random_prompts([length] * batch, seed=seed + 1, vocab_size=vocab)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        wall_s = _prefill(engine, prompts)
    groups: dict[str, dict[str, float]] = defaultdict(lambda: {"launches": 0, "gpu_ms": 0.0})
    for event in prof.key_averages():
        total_us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if total_us > 0:
            groups[_family(event.key)]["launches"] += event.count
            groups[_family(event.key)]["gpu_ms"] += total_us / 1e3
    return {"batch": batch, "length": length, "wall_ms": wall_s * 1e3,
            "gpu_ms": sum(g["gpu_ms"] for g in groups.values()),
            "by_kernel": dict(sorted(groups.items(), key=lambda kv: -kv[1]["gpu_ms"]))}


def markdown(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        lines += [f"## prefill {r['batch']} x {r['length']}: wall {r['wall_ms']:.1f} ms (under the profiler), "
                  f"GPU {r['gpu_ms']:.1f} ms", "", "| kernel | launches | GPU ms | share |", "|---|---|---|---|"]
        lines += [f"| {k} | {g['launches']} | {g['gpu_ms']:.2f} | {g['gpu_ms'] / r['gpu_ms']:.0%} |"
                  for k, g in r["by_kernel"].items()]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--shapes", default="4x4096,1x16384", help="comma-separated BATCHxLENGTH")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    engine = open_engine(args.model_dir, cuda_graphs=False)
    rows = [profile_shape(engine, b, n, seed=500 + i) for i, (b, n) in enumerate(shapes)]
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "prefill_profile.json").write_text(json.dumps(rows, indent=1))
        (args.out / "prefill_profile.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
