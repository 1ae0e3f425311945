"""Where a decode step's time goes: host phases, graph GPU time, and each kernel's share.

    PYTHONPATH=. python3 bench/decode_profile.py --out DIR [--model-dir DIR] [--contexts 0,4096]

For each cached context, with the benchmark's engine (CUDA graphs on, batch 4, greedy):
  * the wall time of each step and of its host phases (schedule, pad, stage, graph replay
    launch, queueing and starting row digests, the wait for the sampled rows, commit), timed with
    ``time.perf_counter`` around the engine's own methods (the step loop is unchanged);
  * the GPU time of one graph replay alone (CUDA events around repeated replays of a decode
    step of the same requests at the same context, staged on pages of its own): the step's
    wall time minus this is what the host adds;
  * per-kernel GPU time of the same padded forward run eagerly under ``torch.profiler``
    (kernels grouped by name; the graph replays the same kernels and launch configurations).
Writes DIR/decode_profile.json and DIR/decode_profile.md; medians over the steps of the run, and
the phases of its five slowest steps one by one.
``--host-profile`` also runs the same decode on a fresh engine under ``cProfile`` (no phase
timers) and writes the functions with the most own time per step to DIR/decode_host_profile.md:
where the host's share of a step goes when the host, not the GPU, sets the step's pace.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from bench.engine_gpu_common import log, random_prompts  # noqa: E402
from bench.engine_gpu_workloads import open_engine  # noqa: E402
from engine.checkpoint import make_checkpoint  # noqa: E402
from engine.llm_engine import LLMEngine  # noqa: E402
from engine.sampling_params import SamplingParams  # noqa: E402

BATCH = 4
SLOWEST = 5  # slowest steps of a context whose phases are reported one by one


class PhaseTimer:
    """Accumulates wall seconds per phase for the current step."""

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self.steps: list[dict[str, float]] = []

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.current[name] += time.perf_counter() - start
        return timed

    def end_step(self, wall_s: float) -> None:
        self.current["step"] = wall_s
        self.steps.append(dict(self.current))
        self.current = defaultdict(float)


def instrument(engine: LLMEngine, timer: PhaseTimer) -> None:
    """Wrap the step's phases on this engine instance."""
    runner = engine.runner
    engine.scheduler.schedule = timer.wrap("schedule", engine.scheduler.schedule)
    engine.scheduler.commit = timer.wrap("commit", engine.scheduler.commit)
    runner.padded_decode.pad = timer.wrap("pad", runner.padded_decode.pad)
    runner.buffers.stage_decode = timer.wrap("stage", runner.buffers.stage_decode)
    engine.scheduler.schedule_ahead = timer.wrap("schedule_ahead", engine.scheduler.schedule_ahead)
    runner.host_logits.reserve = timer.wrap("slot_reserve", runner.host_logits.reserve)
    runner.host_logits.send = timer.wrap("fetch_start", runner.host_logits.send)
    runner.host_logits.wait = timer.wrap("fetch_wait", runner.host_logits.wait)
    engine.digests.add = timer.wrap("digest_queue", engine.digests.add)
    engine.digests.start = timer.wrap("digest_start", engine.digests.start)
    for captured in runner.padded_decode.graphs.values():
        graph = captured.graph
        object.__setattr__(captured, "graph", _TimedGraph(graph, timer))


class _TimedGraph:
    def __init__(self, graph: torch.cuda.CUDAGraph, timer: PhaseTimer) -> None:
        self.graph, self.replay = graph, timer.wrap("replay_launch", graph.replay)


def _decode(engine: LLMEngine, prompts: list[list[int]], new_tokens: int, timer: PhaseTimer | None) -> None:
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    for p in prompts:
        engine.add_request(p, params)
    while engine.has_unfinished():
        start = time.perf_counter()
        engine.step()
        if timer is not None:
            timer.end_step(time.perf_counter() - start)


def staged_decode_step(engine: LLMEngine, prompts: list[list[int]]):
    """Stage a decode step of ``prompts`` (one new row each, at its context length) into the decode buffers.

    Its pages are the pool's last ones, which the profiled requests never reach (the pool hands
    out pages lowest first), so the KV it writes there is read by nothing else.
    """
    from engine.model_runner import Chunk
    runner, page_size = engine.runner, engine.config.page_size
    num_pages = -(-(len(prompts[0]) + 1) // page_size)
    first = engine.config.num_pages - len(prompts) * num_pages
    chunks = [Chunk(list(p) + [1], list(range(first + b * num_pages, first + (b + 1) * num_pages)), len(p),
                    len(p) + 1, True) for b, p in enumerate(prompts)]
    # outputs to device slot 0, as a real step's go to its slot: nothing else runs, so it is free
    return runner.buffers.stage_decode(runner.padded_decode.pad(chunks), slots=(0, 0))


def graph_gpu_ms(engine: LLMEngine, prompts: list[list[int]], repeats: int = 100) -> float:
    """GPU milliseconds of one replay of the decode graph of ``prompts`` at their context length."""
    batch = staged_decode_step(engine, prompts)
    captured = engine.runner.padded_decode.graphs[(len(prompts), batch.block_table.shape[1])]
    graph = getattr(captured.graph, "graph", captured.graph)  # past the timing wrapper
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats


def kernel_breakdown(engine: LLMEngine, prompts: list[list[int]]) -> list[dict[str, Any]]:
    """Per-kernel GPU time of the same decode step's padded forward, run eagerly under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile
    runner = engine.runner
    batch = staged_decode_step(engine, prompts)
    for _ in range(3):
        runner.padded_decode.forward(batch, check_metadata=False)
    torch.cuda.synchronize()
    repeats = 20
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            runner.padded_decode.forward(batch, check_metadata=False)
        torch.cuda.synchronize()
    rows = []
    for event in prof.key_averages():
        total_us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if total_us <= 0:
            continue
        rows.append({"kernel": event.key, "calls_per_step": event.count / repeats,
                     "us_per_step": total_us / repeats})
    rows.sort(key=lambda r: -r["us_per_step"])
    return rows


def profile_context(engine: LLMEngine, context: int, new_tokens: int) -> dict[str, Any]:
    prompts = random_prompts([max(context, 1)] * BATCH, seed=2000 + context, vocab_size=engine.spec.vocab_size)
    timer = PhaseTimer()
    instrument(engine, timer)
    _decode(engine, prompts, 2, timer)  # puts the context into the prefix cache
    timer.steps.clear()
    _decode(engine, prompts, new_tokens, timer)
    decode_steps = timer.steps[1:]  # the first step prefills the last prompt token
    phases = sorted({k for s in decode_steps for k in s})
    medians = {k: 1e3 * statistics.median(s.get(k, 0.0) for s in decode_steps) for k in phases}
    kernels = kernel_breakdown(engine, prompts)
    slowest = sorted(range(len(decode_steps)), key=lambda i: -decode_steps[i]["step"])[:SLOWEST]
    return {"context": context, "steps": len(decode_steps), "phase_ms_median": medians,
            # the slowest steps' phases: where a step far above the median spent its time
            "slowest_steps": [{"number": i + 1, "phase_ms": {k: round(1e3 * v, 3) for k, v in decode_steps[i].items()}}
                              for i in slowest],
            "graph_gpu_ms": graph_gpu_ms(engine, prompts),
            "kernels": kernels, "kernel_us_sum": sum(k["us_per_step"] for k in kernels)}


def host_profile(engine: LLMEngine, context: int, new_tokens: int, top: int = 40) -> str:
    """The decode loop at ``context`` under cProfile: the ``top`` functions by own time, in µs per step."""
    prompts = random_prompts([max(context, 1)] * BATCH, seed=3000 + context, vocab_size=engine.spec.vocab_size)
    _decode(engine, prompts, 2, None)  # puts the context into the prefix cache
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    _decode(engine, prompts, new_tokens, None)
    profiler.disable()
    wall_s = time.perf_counter() - start
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]  # (cc, nc, tottime, cumtime, callers)
    lines = [f"## context {context}: {new_tokens} steps in {wall_s * 1e3:.1f} ms under cProfile "
             f"({wall_s * 1e3 / new_tokens:.3f} ms a step)\n",
             "| function | calls/step | own µs/step | cumulative µs/step |", "|---|---|---|---|"]
    for (file, line, name), (_, calls, own_s, cum_s, _) in rows:
        where = f"{Path(file).name}:{line} {name}" if line else name
        lines.append(f"| {where[:90]} | {calls / new_tokens:.1f} | {own_s * 1e6 / new_tokens:.1f} | "
                     f"{cum_s * 1e6 / new_tokens:.1f} |")
    return "\n".join(lines) + "\n"


def markdown(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        p = r["phase_ms_median"]
        lines.append(f"## context {r['context']} (batch {BATCH}, {r['steps']} decode steps)\n")
        lines.append(f"step wall {p['step']:.3f} ms; graph replay GPU time {r['graph_gpu_ms']:.3f} ms; "
                     f"eager kernels sum {r['kernel_us_sum'] / 1e3:.3f} ms\n")
        lines.append("| phase | ms (median) |\n|---|---|")
        lines += [f"| {k} | {v:.3f} |" for k, v in sorted(p.items(), key=lambda kv: -kv[1])]
        lines.append("\nslowest steps (number from 1: wall ms, then its phases in ms, largest first):\n")
        for s in r["slowest_steps"]:
            phases = sorted(((k, v) for k, v in s["phase_ms"].items() if k != "step"), key=lambda kv: -kv[1])
            lines.append(f"- step {s['number']}: {s['phase_ms']['step']:.3f}; " +
                         ", ".join(f"{k} {v:.3f}" for k, v in phases))
        lines.append("\n| kernel | calls/step | µs/step |\n|---|---|---|")
        lines += [f"| {k['kernel'][:90]} | {k['calls_per_step']:.0f} | {k['us_per_step']:.1f} |" for k in r["kernels"]]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model-dir", type=Path)
    parser.add_argument("--contexts", default="0,4096")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--host-profile", action="store_true", help="also the decode loop under cProfile")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/decode_profile.py needs a CUDA GPU", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    model_dir = args.model_dir or make_checkpoint("llama-1b", Path(tempfile.mkdtemp(prefix="bitcase-llama-1b-")), seed=0)
    results = []
    for context in (int(c) for c in args.contexts.split(",")):
        engine = open_engine(model_dir, cuda_graphs=True)  # fresh per context: one instrumentation each
        result = profile_context(engine, context, args.new_tokens)
        results.append(result)
        log(f"context {context}: step {result['phase_ms_median']['step']:.3f} ms, graph GPU "
            f"{result['graph_gpu_ms']:.3f} ms")
        del engine
        torch.cuda.empty_cache()
    (args.out / "decode_profile.json").write_text(json.dumps(results, indent=1))
    (args.out / "decode_profile.md").write_text(markdown(results))
    print(markdown(results))
    if args.host_profile:
        sections = []
        for context in (int(c) for c in args.contexts.split(",")):
            engine = open_engine(model_dir, cuda_graphs=True)
            sections.append(host_profile(engine, context, args.new_tokens))
            del engine
            torch.cuda.empty_cache()
        (args.out / "decode_host_profile.md").write_text("\n".join(sections))
        print("\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
