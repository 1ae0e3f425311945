"""Launches per decode step and the step's GPU time split by kernel, for bench/engine_gpu.py.

For each cached context, on the benchmark's CUDA-graph engine at batch ``batch``:
  * plan launches per step: the sealed-plan launches recorded when the decode graph of that batch
    size and table width was captured (what every replay runs), by plan kernel;
  * CUDA kernels per step and their GPU time, from ``torch.profiler`` over repeated eager runs of
    the same padded decode forward (bench/decode_profile.py), grouped by kernel function (Triton
    kernels by plan kernel, the greedy token's two as ``greedy``, the token take and output put
    as ``step_io``, torch's own kernels as one group); the graph replays the same kernels;
  * the GPU time of one replay of the graph itself (CUDA events), the time the split is of.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Sequence

from bench.decode_profile import graph_gpu_ms, kernel_breakdown, staged_decode_step
from bench.engine_gpu_common import Budget, guarded, log, random_prompts
from kernels.plan import KERNEL_SOURCES

__all__ = ["decode_launch_profile", "profile_markdown"]

_TRITON_FUNCTIONS = {function: kernel for kernel, (_, function, _) in KERNEL_SOURCES.items()}
# Triton, but not plan kernels: the greedy token's two launches (kernels/greedy.py), the token
# take and output put (kernels/step_io.py)
_TRITON_FUNCTIONS.update(part_argmax_kernel="greedy", pick_part_kernel="greedy", take_tokens_kernel="step_io",
                         put_outputs_kernel="step_io")


def _family(name: str) -> str:
    """The plan kernel a profiler event belongs to, ``greedy`` for the greedy token's, or ``torch`` for torch's own."""
    return next((kernel for function, kernel in _TRITON_FUNCTIONS.items() if name.startswith(function)), "torch")


def _profile_one(engine: Any, context: int, batch: int) -> dict[str, Any]:
    prompts = random_prompts([max(context, 1)] * batch, seed=3000 + context, vocab_size=engine.spec.vocab_size)
    staged = staged_decode_step(engine, prompts)
    captured = engine.runner.padded_decode.graphs[(batch, staged.block_table.shape[1])]
    plan_launches = Counter(r.kernel for r in captured.launches)
    rows = kernel_breakdown(engine, prompts)
    groups: dict[str, dict[str, float]] = defaultdict(lambda: {"calls_per_step": 0.0, "us_per_step": 0.0})
    for row in rows:
        group = groups[_family(row["kernel"])]
        group["calls_per_step"] += row["calls_per_step"]
        group["us_per_step"] += row["us_per_step"]
    total_us = sum(g["us_per_step"] for g in groups.values())
    split = [{"kernel": k, **v, "share": v["us_per_step"] / total_us if total_us else 0.0}
             for k, v in sorted(groups.items(), key=lambda kv: -kv[1]["us_per_step"])]
    return {"context": context, "batch": batch, "plan_launches_per_step": sum(plan_launches.values()),
            "plan_launches_by_kernel": dict(sorted(plan_launches.items())),
            "cuda_kernels_per_step": sum(r["calls_per_step"] for r in rows), "kernel_us_per_step": total_us,
            "graph_gpu_ms": graph_gpu_ms(engine, prompts), "split": split, "kernels": rows}


def decode_launch_profile(engine: Any, *, contexts: Sequence[int], batch: int, budget: Budget) -> dict[str, Any]:
    """Launch counts and the per-kernel split of a decode step at each context (needs CUDA graphs)."""
    if not engine.config.cuda_graphs:
        return {"skipped": "the engine runs without CUDA graphs"}
    out: dict[str, Any] = {}
    for context in contexts:
        if not budget.allows(20):
            out[str(context)] = {"skipped": f"time budget ({budget.left():.0f} s left)"}
            continue
        out[str(context)] = guarded(f"decode profile, context {context}", lambda: _profile_one(engine, context, batch))
        if "graph_gpu_ms" in out[str(context)]:
            r = out[str(context)]
            log(f"  context {context}: {r['plan_launches_per_step']} plan launches, "
                f"{r['cuda_kernels_per_step']:.0f} CUDA kernels, graph {r['graph_gpu_ms']:.3f} ms a step")
    return out


def profile_markdown(profile: dict[str, Any] | None) -> list[str]:
    """Launches per step and the kernel split, one table per context."""
    if not profile:
        return ["not run"]
    if "skipped" in profile:
        return [profile["skipped"]]
    lines: list[str] = []
    for context, r in profile.items():
        if "graph_gpu_ms" not in r:
            lines += [f"context {context}: " + (r.get("skipped") or r.get("error", "?").strip().splitlines()[-1]), ""]
            continue
        by_kernel = ", ".join(f"{k} {n}" for k, n in r["plan_launches_by_kernel"].items())
        lines += [f"### context {int(context):,}, batch {r['batch']}", "",
                  f"{r['plan_launches_per_step']} plan launches a step ({by_kernel}); "
                  f"{r['cuda_kernels_per_step']:.0f} CUDA kernels a step in all; graph replay "
                  f"{r['graph_gpu_ms']:.3f} ms GPU a step, eager kernels sum "
                  f"{r['kernel_us_per_step'] / 1e3:.3f} ms", "",
                  "| kernel | calls/step | µs/step | share |", "|---|---|---|---|"]
        lines += [f"| {g['kernel']} | {g['calls_per_step']:.0f} | {g['us_per_step']:.1f} | {g['share']:.0%} |"
                  for g in r["split"]]
        lines.append("")
    return lines
