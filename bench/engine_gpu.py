"""Engine decode and prefill speed on one GPU vs transformers, a torch loop and the roofline.

One run also checks the engine's GPU path for bitwise determinism.

    PYTHONPATH=. python3 bench/engine_gpu.py --out DIR [--quick] [--model-dir DIR] [--parts a,b] [--no-pdl]
        [--no-gc-freeze]

Parts, in order; each records its result or its error and the run goes on:
  checkpoint      the llama-1b preset (random bf16 weights, seed 0) in a temporary directory,
                  or --model-dir
  copy_rate       device-to-device copy rate (the roofline's denominator)
  determinism     bitwise: batches of 3/4/5 vs singletons, CUDA graphs on vs off, device greedy
  engine_decode   batch 4, cached context 0/1K/4K/16K, CUDA graphs (overlapped decode steps, and
                  one step at a time); eager engine at 0 and 1K
  decode_profile  at each context: plan launches per decode step (from the captured graph), CUDA
                  kernels per step and the step's GPU time split by kernel (torch.profiler)
  engine_prefill  4 x 4096 and 1 x 16384 fresh prompt tokens
  torch_eager     plain torch decode loop (SDPA, preallocated K/V cache)
  torch_compiled  the same decode, gpt-fast style: K/V caches as module buffers sized per context,
                  attention over the whole cache with a mask, torch.compile(mode="reduce-overhead")
                  (CUDA graphs), one compilation per context
  transformers    LlamaForCausalLM.generate on the same checkpoint: decode by context, prefill
  multi_turn      4 sessions x 6 turns, 16K first prompt with an 8K shared cached prefix, +256
                  tokens per follow-up, 768 output tokens per turn, 0.5 s between turns
--quick: contexts 0/1K/4K, 64 new tokens (transformers 17), 2 runs, prefill 4 x 1024, multi-turn
4 sessions x 2 turns of 2K (1K shared), +64 tokens, 64 output tokens. Writes DIR/engine_gpu.json
and DIR/engine_gpu.md after every part; a wall-clock budget (--budget-s) shortens or skips what
would not fit. Every timed engine run first leaves what is alive out of the cyclic collector's
passes, as `bitcase serve`'s engine process does (--no-gc-freeze: not), and records the full
passes that ran in it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

# Run as a script, this file's directory comes first on sys.path and bench/kernels.py would
# shadow the kernels package: import from the repository root instead.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))
# The machine has no internet: transformers must never wait on the hub (read at its import).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from bench import engine_gpu_workloads  # noqa: E402
from bench.engine_gpu_baselines import torch_eager_decode, transformers_generate  # noqa: E402
from bench.engine_gpu_compiled import torch_compiled_decode  # noqa: E402
from bench.engine_gpu_common import (Budget, copy_rate_bytes_per_s, environment, free_cuda, guarded,  # noqa: E402
                                     log)
from bench.engine_gpu_determinism import determinism_checks  # noqa: E402
from bench.engine_gpu_profile import decode_launch_profile  # noqa: E402
from bench.engine_gpu_report import markdown  # noqa: E402
from bench.engine_gpu_workloads import (FULL_MULTI_TURN, QUICK_MULTI_TURN, decode_by_context,  # noqa: E402
                                        multi_turn, open_engine, prefill_throughput)
from engine.checkpoint import make_checkpoint  # noqa: E402
from engine.model_config import read_model_spec  # noqa: E402
from kernels import launch_config  # noqa: E402
from kernels.shapes import preset  # noqa: E402

PARTS = ("checkpoint", "copy_rate", "determinism", "engine_decode", "decode_profile", "engine_prefill", "torch_eager",
         "torch_compiled", "transformers", "multi_turn")


def run_config(quick: bool) -> dict[str, Any]:
    """Sizes of a full or a quick run."""
    if quick:
        return {"quick": True, "contexts": [0, 1024, 4096], "batch": 4, "new_tokens": 64, "hf_new_tokens": 17,
                "repeats": 2, "prefill_shapes": [[4, 1024]], "determinism_tokens": 12}
    return {"quick": False, "contexts": [0, 1024, 4096, 16384], "batch": 4, "new_tokens": 128, "hf_new_tokens": 33,
            "repeats": 3, "prefill_shapes": [[4, 4096], [1, 16384]], "determinism_tokens": 24}


class Run:
    """Runs the parts, records results and errors, rewrites the outputs after each part."""

    def __init__(self, out: Path, config: dict[str, Any], wanted: set[str], spec: Any) -> None:
        self.out, self.wanted, self.spec = out, wanted, spec
        self.results: dict[str, Any] = {"environment": environment(), "config": config, "parts": {}}

    def part(self, name: str, fn: Callable[[], Any]) -> Any:
        if name not in self.wanted:
            self.results["parts"][name] = {"skipped": "not selected"}
            return None
        log(f"== {name}")
        start = time.perf_counter()
        torch.cuda.reset_peak_memory_stats()
        record: dict[str, Any] = {}
        try:
            record["result"] = fn()
        except Exception:  # a failing part is recorded; the others still run
            record["error"] = traceback.format_exc()
            log(f"{name} FAILED:\n{record['error']}")
        record["seconds"] = time.perf_counter() - start
        record["peak_cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
        self.results["parts"][name] = record
        self.write()
        log(f"{name} done in {record['seconds']:.1f} s")
        return record.get("result")

    def write(self) -> None:
        (self.out / "engine_gpu.json").write_text(json.dumps(self.results, indent=1, default=str) + "\n")
        (self.out / "engine_gpu.md").write_text(markdown(self.results, self.spec))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for engine_gpu.json and engine_gpu.md")
    parser.add_argument("--quick", action="store_true", help="smaller contexts, fewer tokens and turns")
    parser.add_argument("--model-dir", type=Path, help="an existing llama-1b checkpoint directory")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated subset of {', '.join(PARTS)} (the checkpoint always runs)")
    parser.add_argument("--budget-s", type=float, default=450.0, help="wall-clock budget of the whole run")
    parser.add_argument("--no-pdl", action="store_true",
                        help="plans without programmatic dependent launch (the A/B baseline; another D)")
    parser.add_argument("--no-gc-freeze", action="store_true",
                        help="timed runs leave the cyclic collector's passes as they are (the A/B baseline)")
    parser.add_argument("--contexts", help="comma-separated cached contexts of the decode parts (default: the run's)")
    args = parser.parse_args(argv)
    if args.no_pdl:  # before any configuration is built: they are cached per process
        launch_config.PDL_DTYPES = ()
    engine_gpu_workloads.GC_FREEZE = not args.no_gc_freeze
    wanted = {p for p in args.parts.split(",") if p} | {"checkpoint"}
    if wanted - set(PARTS):
        parser.error(f"unknown part(s) {', '.join(sorted(wanted - set(PARTS)))}; known: {', '.join(PARTS)}")
    budget, config = Budget(args.budget_s), run_config(args.quick)
    if args.contexts:
        try:
            config["contexts"] = [int(c) for c in args.contexts.split(",") if c]
        except ValueError:
            parser.error(f"--contexts {args.contexts!r}: give comma-separated token counts, e.g. 0,1024")
        if not config["contexts"] or min(config["contexts"]) < 0:
            parser.error(f"--contexts {args.contexts!r}: give one or more token counts of at least 0")
    if not torch.cuda.is_available():
        print("bench/engine_gpu.py needs a CUDA GPU; torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = None if args.model_dir else Path(tempfile.mkdtemp(prefix="bitcase-llama-1b-"))
    run = Run(args.out, config, wanted, preset("llama-1b"))
    run.results["config"]["model_dir_given"] = args.model_dir is not None
    run.results["config"]["pdl"] = bool(launch_config.PDL_DTYPES)
    run.results["config"]["gc_freeze"] = engine_gpu_workloads.GC_FREEZE
    try:
        model_dir = run.part("checkpoint", lambda: args.model_dir or make_checkpoint("llama-1b", scratch, seed=0))
        if model_dir is None:
            return 1
        run.spec = read_model_spec(model_dir)
        common = dict(batch=config["batch"], repeats=config["repeats"], budget=budget)
        run.part("copy_rate", copy_rate_bytes_per_s)
        run.part("determinism", lambda: determinism_checks(model_dir, max_tokens=config["determinism_tokens"]))
        engines: dict[str, Any] = {}

        def perf_engine() -> Any:
            """The engine with CUDA graphs; an eager one (recorded as such) if capture fails."""
            if "perf" not in engines:
                opened = guarded("engine with CUDA graphs", lambda: {"engine": open_engine(model_dir, cuda_graphs=True)})
                engines["graph_error"] = opened.get("error")
                engines["perf"] = opened.get("engine") or open_engine(model_dir, cuda_graphs=False)
            return engines["perf"]

        def with_mode(result: dict[str, Any]) -> dict[str, Any]:
            engine = perf_engine()
            return {**result, "cuda_graphs": engine.config.cuda_graphs, "graph_capture_error": engines["graph_error"]}

        def engine_decode() -> dict[str, Any]:
            engine = perf_engine()
            key = "graphs" if engine.config.cuda_graphs else "eager"
            out = {"deployment": engine.deployment.digest, "limits": engine.config.limits(),
                   key: decode_by_context(engine, contexts=config["contexts"], new_tokens=config["new_tokens"],
                                          **common)}
            # the other modes only where the budget leaves room for opening their engines too
            if key == "graphs" and budget.allows(90):
                serial = open_engine(model_dir, cuda_graphs=True, overlap_decode=False)
                out["graphs_step_by_step"] = decode_by_context(serial, contexts=config["contexts"],
                                                               new_tokens=config["new_tokens"], **common)
                del serial
                free_cuda()
                eager = open_engine(model_dir, cuda_graphs=False)
                out["eager"] = decode_by_context(eager, contexts=[c for c in config["contexts"] if c <= 1024],
                                                 new_tokens=min(64, config["new_tokens"]), **common)
                del eager
                free_cuda()
            return with_mode(out)

        run.part("engine_decode", engine_decode)
        run.part("decode_profile", lambda: decode_launch_profile(perf_engine(), contexts=config["contexts"],
                                                                 batch=config["batch"], budget=budget))
        run.part("engine_prefill", lambda: with_mode({"shapes": prefill_throughput(
            perf_engine(), shapes=config["prefill_shapes"], repeats=config["repeats"], budget=budget)}))
        run.part("torch_eager", lambda: torch_eager_decode(model_dir, contexts=config["contexts"],
                                                           new_tokens=config["new_tokens"], **common))
        free_cuda()
        run.part("torch_compiled", lambda: torch_compiled_decode(model_dir, contexts=config["contexts"],
                                                                 new_tokens=config["new_tokens"], **common))
        free_cuda()
        run.part("transformers", lambda: transformers_generate(
            model_dir, contexts=config["contexts"], new_tokens=config["hf_new_tokens"],
            prefill_shapes=config["prefill_shapes"], **common))
        free_cuda()
        spec = QUICK_MULTI_TURN if args.quick else FULL_MULTI_TURN
        run.part("multi_turn", lambda: with_mode(multi_turn(perf_engine(), spec, budget=budget, reserve_s=10.0)))
        print(markdown(run.results, run.spec), flush=True)
        return 0
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
