"""Overhead of the run-time attention finiteness check: decode tokens/s with the check on vs off.

    PYTHONPATH=. python3 bench/finiteness.py [--preset small]      # CPU, a preset made here
    PYTHONPATH=. python3 bench/finiteness.py --device cuda --model DIR --cuda-graphs

Two engines of one configuration that differ only in ``check_finite`` (two D: the check is part
of the sealed plan) run the same greedy decode of ``--batch`` requests, in alternating paired
runs in the same process (on, off, then off, on, ...), so drift in clock or temperature falls on
both sides alike. A run times its decode steps only (the prefill step is excluded); the ratio of
a pair is on/off decode tokens per second, and the overhead is 1 - the median ratio. On the CPU
the rates are per second of this process's CPU time (``time.process_time``), which other load
on a shared machine barely moves; wall-clock rates are reported beside them. Each pair
also checks that both engines produced the same tokens (the check changes no value). Prints a
JSON object (``--out FILE`` writes it too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from engine.checkpoint import make_checkpoint  # noqa: E402
from engine.config import EngineConfig  # noqa: E402
from engine.llm_engine import LLMEngine  # noqa: E402
from engine.sampling_params import SamplingParams  # noqa: E402

CPU_ENGINE = dict(device="cpu", page_size=16, num_pages=256, max_num_seqs=8, max_num_batched_tokens=512,
                  max_model_len=1024)
CUDA_ENGINE = dict(device="cuda", dtype="bfloat16", page_size=16, num_pages=4096, max_num_seqs=16,
                   max_num_batched_tokens=8192, max_model_len=8192, keep_logit_rows=False)


def _prompts(batch: int, length: int, vocab_size: int) -> list[list[int]]:
    return [[(7919 * (b + 1) + 104729 * i) % vocab_size for i in range(length)] for b in range(batch)]


def decode_run(engine: LLMEngine, prompts: list[list[int]], new_tokens: int
               ) -> tuple[float, float, list[tuple[int, ...]]]:
    """(decode tokens per wall second, per CPU second of this process, produced tokens per request)."""
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    ids = [engine.add_request(p, params) for p in prompts]
    engine.step()  # the prefill step of every request (not timed)
    sync = torch.cuda.synchronize if engine.runner.device.type == "cuda" else (lambda: None)
    sync()
    start, cpu_start, produced, finished = time.perf_counter(), time.process_time(), 0, {}
    while engine.has_unfinished():
        result = engine.step()
        produced += len(result.produced)
        finished.update({o.request_id: o.token_ids for o in result.finished})
    sync()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return produced / wall, produced / cpu, [finished[i] for i in ids]


def measure(model_dir: Path, *, device: str, cuda_graphs: bool, batch: int, prompt_len: int, new_tokens: int,
            pairs: int, threads: int) -> dict[str, Any]:
    """The paired measurement (module docstring)."""
    base = dict(CUDA_ENGINE if device.startswith("cuda") else CPU_ENGINE, device=device, cuda_graphs=cuda_graphs,
                num_threads=threads)
    engines = {on: LLMEngine(model_dir, EngineConfig(**base, check_finite=on)) for on in (True, False)}
    prompts = _prompts(batch, prompt_len, engines[True].spec.vocab_size)
    for engine in engines.values():  # warm-up: compilation, graph pools, caches
        decode_run(engine, prompts, min(new_tokens, 8))
    on_cpu = not device.startswith("cuda")
    rates: dict[str, dict[bool, list[float]]] = {"wall": {True: [], False: []}, "cpu": {True: [], False: []}}
    for pair in range(pairs):
        order = (True, False) if pair % 2 == 0 else (False, True)
        got = {}
        for on in order:
            wall_rate, cpu_rate, got[on] = decode_run(engines[on], prompts, new_tokens)
            rates["wall"][on].append(wall_rate)
            rates["cpu"][on].append(cpu_rate)
        if got[True] != got[False]:
            raise RuntimeError(f"pair {pair}: the engines with and without the check produced different tokens")
    ratios = {clock: [a / b for a, b in zip(r[True], r[False])] for clock, r in rates.items()}
    clock = "cpu" if on_cpu else "wall"  # on CUDA the host waits on the device: wall time is the rate
    median = statistics.median(ratios[clock])
    return {"device": device if device == "cpu" else torch.cuda.get_device_name(torch.device(device)),
            "model_dir": str(model_dir), "cuda_graphs": cuda_graphs, "batch": batch, "prompt_len": prompt_len,
            "new_tokens": new_tokens, "pairs": pairs, "torch_num_threads": threads,
            "deployments": {str(on): e.deployment.digest for on, e in engines.items()},
            "clock": clock, "tokens_per_s_on": rates[clock][True], "tokens_per_s_off": rates[clock][False],
            "ratios_on_over_off": ratios[clock], "median_ratio": median, "overhead_percent": 100.0 * (1.0 - median),
            "wall_median_ratio": statistics.median(ratios["wall"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--model", type=Path, help="checkpoint directory (default: --preset made here)")
    parser.add_argument("--preset", default="tiny", help="preset shape made when --model is not given")
    parser.add_argument("--cuda-graphs", action="store_true", help="decode through captured CUDA graphs")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (part of D)")
    parser.add_argument("--out", type=Path, help="also write the JSON result here")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench/finiteness.py: --device cuda needs a CUDA GPU; none is visible", file=sys.stderr)
        return 2
    if min(args.batch, args.prompt_len, args.new_tokens, args.pairs, args.threads) < 1:
        print("bench/finiteness.py: --batch, --prompt-len, --new-tokens, --pairs and --threads must be >= 1",
              file=sys.stderr)
        return 2
    if args.model is not None and not (args.model / "config.json").is_file():
        print(f"bench/finiteness.py: --model {args.model} holds no config.json; give a checkpoint directory",
              file=sys.stderr)
        return 2
    model_dir = args.model or make_checkpoint(args.preset, Path(tempfile.mkdtemp(prefix="bitcase-finiteness-")),
                                              seed=0)
    result = measure(model_dir, device=args.device, cuda_graphs=args.cuda_graphs, batch=args.batch,
                     prompt_len=args.prompt_len, new_tokens=args.new_tokens, pairs=args.pairs, threads=args.threads)
    text = json.dumps(result, indent=1)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
