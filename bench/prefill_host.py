"""Host time of a long-prompt prefill through the engine, with the device's part taken out.

    PYTHONPATH=. python3 bench/prefill_host.py [--shapes 1x16384,4x4096] [--runs 10] [--out FILE]

An engine on the CPU (the tiny preset, its positions raised to 32K in a temporary copy; the
benchmark's limits: pages of 16, 8,192 rows a step) whose model forward is replaced by one that
returns zero logits and flags of the right shapes at once, so everything timed is the engine's
host work: validating and queueing the requests, planning, packing and staging each step,
committing, building the outputs. Each run sends fresh random prompts of the shape to
completion with ``max_tokens=1``; the phases are timed around the engine's own methods, and
``hash_pages`` (the page hashes computed while a real device runs the step) is reported apart
from the rest, since on a GPU it overlaps the forward. Medians over ``--runs`` runs after three
warm-up runs, in ms. Prints a JSON object. The model's arithmetic never runs, so the figures
say nothing of the device.
"""

from __future__ import annotations

import argparse
import json
import random
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

from bench.decode_profile import PhaseTimer  # noqa: E402
from engine.checkpoint import make_checkpoint  # noqa: E402
from engine.config import EngineConfig  # noqa: E402
from engine.llm_engine import LLMEngine  # noqa: E402
from engine.sampling_params import SamplingParams  # noqa: E402

LIMITS = dict(device="cpu", page_size=16, num_pages=16384, max_num_seqs=16, max_num_batched_tokens=8192,
              max_model_len=24576, keep_logit_rows=False)


def measure(shapes: list[tuple[int, int]], runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "tiny"
        make_checkpoint("tiny", model_dir, seed=0)
        config = json.loads((model_dir / "config.json").read_text())
        config["max_position_embeddings"] = 32768
        (model_dir / "config.json").write_text(json.dumps(config))
        engine = LLMEngine(model_dir, EngineConfig(**LIMITS))
    vocab = engine.spec.vocab_size
    engine.runner.model.forward = lambda batch, kv: (torch.zeros(batch.sample_rows.shape[0], vocab),
                                                     torch.zeros(batch.input_ids.shape[0]))
    timer = PhaseTimer()  # one "step" of the timer is one run here
    phases = {"add_request": engine, "schedule": engine.scheduler, "launch": engine.runner,
              "collect": engine.runner, "commit": engine.scheduler, "hash_pages": engine.scheduler}
    # an engine from before hash_pages existed hashes inside schedule and commit
    phases = {name: owner for name, owner in phases.items() if hasattr(owner, name)}
    for name, owner in phases.items():
        setattr(owner, name, timer.wrap(name, getattr(owner, name)))
    out: dict[str, Any] = {}
    for batch, length in shapes:
        rng = random.Random(1000 * batch + length)
        timer.steps.clear()
        for _ in range(runs + 3):
            prompts = [[rng.randrange(vocab) for _ in range(length)] for _ in range(batch)]
            start = time.perf_counter()
            for prompt in prompts:
                engine.add_request(prompt, SamplingParams(max_tokens=1, ignore_eos=True))
            engine.run()
            timer.end_step(time.perf_counter() - start)
        timed = timer.steps[-runs:]

        def median_ms(name: str) -> float:
            return round(1e3 * statistics.median(run.get(name, 0.0) for run in timed), 3)
        out[f"{batch}x{length}"] = {**{name: median_ms(name) for name in phases}, "total": median_ms("step")}
    return {"ms_median": out, "runs": runs, "note": "total includes hash_pages, which overlaps the forward on a GPU"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="1x16384,4x4096", help="batch x prompt tokens, comma-separated")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    if any(len(s) != 2 or min(s) < 1 for s in shapes) or args.runs < 1:
        parser.error("--shapes takes BATCHxTOKENS pairs of positive integers, --runs a positive integer")
    result = json.dumps(measure(shapes, args.runs), indent=2)  # type: ignore[arg-type]
    print(result)
    if args.out:
        args.out.write_text(result + "\n")


if __name__ == "__main__":
    main()
