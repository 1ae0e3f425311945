"""Qwen3, Mistral and Gemma3 on one GPU: fidelity against transformers and the engine's decode tokens/s, per family.

    PYTHONPATH=. python3 bench/families_gpu.py --out DIR [--presets qwen3-0.6b,mistral-7b,gemma3-1b]

Per preset: a random-initialised bf16 checkpoint (seed 0, as `bitcase model make` writes it) in a
temporary directory. Fidelity, a tolerance claim separate from determinism: an eager bf16 engine
generates four greedy tokens for each of six random prompts (16 to 1024 tokens) and transformers'
class for the checkpoint (AutoModelForCausalLM, float32, CUDA: Qwen3ForCausalLM, MistralForCausalLM,
Gemma3ForCausalLM, whose sliding layers the 1,024-token prompt crosses at gemma3-1b's window of 512) recomputes every produced row;
the same is done for a float32 engine at the float32 tolerance; transformers' own bf16 forward on
the bf16 engine's histories is the yardstick of the bf16 tolerance (the engines of a preset share
one loaded copy of the weights, engine/weight_cache.py). Each prompt is judged by the fidelity
suite's rule (engine/compare/suites/fidelity.py): the largest |engine - transformers| logit
difference at most the tolerance (the dtype's relative tolerance times max(1, largest
|transformers logit|), or for bf16 1.5 times the yardstick's own distance from float32 where that
is larger), and greedy tokens equal to transformers' argmax wherever its top two logits are more
than twice the tolerance apart. Decode: the engine with CUDA graphs,
batch 1 and 4 at cached context 1024, 64 new tokens, median of 2 runs (bench/engine_gpu_workloads.py
describes the timed window). Writes DIR/families_gpu.json after each preset; exit 1 when a
fidelity check fails. Writing the mistral-7b checkpoint (one seeded CPU generator, 7.2 billion
values) is most of that preset's time; run the presets in two calls where a call has little time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_BENCH = Path(__file__).resolve().parent  # bench/kernels.py would shadow the kernels package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the machine has no internet
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from bench.engine_gpu_common import Budget, environment, free_cuda, log, random_prompts  # noqa: E402
from bench.engine_gpu_workloads import decode_by_context, open_engine  # noqa: E402
from engine import weight_cache  # noqa: E402
from engine.checkpoint import make_checkpoint  # noqa: E402
from engine.compare.suites.fidelity import NUM_POSITIONS, TOLERANCE, judgement  # noqa: E402
from engine.llm_engine import LLM  # noqa: E402
from engine.sampling_params import SamplingParams  # noqa: E402

PROMPT_LENGTHS = (16, 64, 200, 333, 512, 1024)
FIDELITY_ENGINE = dict(device="cuda", dtype="bfloat16", page_size=16, num_pages=1024, max_num_seqs=8,
                       max_num_batched_tokens=2048, max_model_len=2048, cuda_graphs=False)


def _engine_rows(model_dir: Path, prompts: list[list[int]], dtype: str) -> list[tuple[list[int], torch.Tensor]]:
    """Per prompt: (greedy tokens, [N, V] float64 logits) from one eager engine in ``dtype``."""
    llm = LLM(model_dir, **{**FIDELITY_ENGINE, "dtype": dtype})
    outs = llm.generate(prompts, SamplingParams(max_tokens=NUM_POSITIONS, ignore_eos=True))
    rows = [(list(o.token_ids), torch.stack([e.logits for e in o.trace.entries]).double()) for o in outs]
    del llm, outs
    weight_cache.clear()  # the next engine loads the weights in another dtype
    free_cuda()
    return rows


def _transformers_rows(model_dir: Path, histories: list[list[int]], starts: list[int],
                       dtype: torch.dtype = torch.float32) -> tuple[str, list]:
    import transformers
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, device_map="cuda").eval()
    rows = []
    with torch.no_grad():
        for history, start in zip(histories, starts):
            logits = model(torch.tensor([history], device="cuda")).logits[0]
            rows.append(logits[start - 1:start - 1 + NUM_POSITIONS].double().cpu())
    name = f"transformers {transformers.__version__} {type(model).__name__} ({str(dtype).removeprefix('torch.')}, CUDA)"
    del model
    free_cuda()
    return name, rows


def _judge(prompts: list[list[int]], engine: list, expected: list, relative: float, what: str,
           yardsticks: list | None = None) -> list[dict]:
    judged = []
    for k, (prompt, (tokens, got), want) in enumerate(zip(prompts, engine, expected)):
        problems, measure = judgement(got, tokens, want, relative, yardsticks[k] if yardsticks else None)
        judged.append({"prompt_tokens": len(prompt), **measure, "pass": not problems})
        log(f"  {what} prompt {len(prompt)}: max |diff| {measure['max_abs_difference']:.4g} (tolerance "
            f"{measure['tolerance']:.4g}, {measure['rule']} rule), argmax agreement "
            f"{measure['argmax_agreement']}/{len(tokens)}")
    return judged


def fidelity(model_dir: Path, vocab_size: int) -> dict[str, Any]:
    """The six prompts' judgements against transformers in float32: the bf16 engine (the served
    dtype, with transformers' own bf16 forward on the same histories as the yardstick) and the
    float32 engine (at the float32 tolerance)."""
    prompts = random_prompts(list(PROMPT_LENGTHS), seed=7, vocab_size=vocab_size)
    starts = [len(p) for p in prompts]
    out: dict[str, Any] = {}
    for dtype in ("bfloat16", "float32"):
        engine = _engine_rows(model_dir, prompts, dtype)
        histories = [p + t for p, (t, _) in zip(prompts, engine)]
        reference, expected = _transformers_rows(model_dir, histories, starts)
        own = None
        if dtype == "bfloat16":
            name, own = _transformers_rows(model_dir, histories, starts, torch.bfloat16)
            out["reference_bfloat16"] = {"reference": name, "max_abs_difference_from_float32": [
                float((a - b).abs().max()) for a, b in zip(own, expected)]}
        out[dtype] = {"reference": reference, "relative_tolerance": TOLERANCE[dtype],
                      "prompts": _judge(prompts, engine, expected, TOLERANCE[dtype], f"engine {dtype}", own)}
        out[dtype]["pass"] = all(j["pass"] for j in out[dtype]["prompts"])
    out["pass"] = out["bfloat16"]["pass"] and out["float32"]["pass"]
    return out


def decode(model_dir: Path) -> dict[str, Any]:
    """Decode tokens/s with CUDA graphs at batch 1 and 4, context 1024."""
    engine = open_engine(model_dir, cuda_graphs=True)
    out = {f"batch_{b}": decode_by_context(engine, contexts=[1024], batch=b, new_tokens=64, repeats=2,
                                           budget=Budget(1e9))["1024"] for b in (1, 4)}
    del engine
    free_cuda()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for families_gpu.json")
    parser.add_argument("--presets", default="qwen3-0.6b,mistral-7b,gemma3-1b", help="comma-separated preset names")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/families_gpu.py needs a CUDA GPU; torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"environment": environment(), "presets": {}}
    for name in [p for p in args.presets.split(",") if p]:
        with tempfile.TemporaryDirectory(prefix=f"bitcase-{name}-") as scratch:
            log(f"== {name}")
            start = time.perf_counter()
            model_dir = make_checkpoint(name, Path(scratch), seed=0, tokenizer=False)
            record: dict[str, Any] = {"checkpoint_s": time.perf_counter() - start}
            vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
            record["fidelity"] = fidelity(model_dir, vocab)
            record["decode"] = decode(model_dir)
            record["seconds"] = time.perf_counter() - start
            weight_cache.clear()  # the engines shared one loaded copy; free it before the next preset
            for batch, figure in record["decode"].items():
                log(f"  decode {batch}: {figure['tokens_per_s']['median']:.0f} tok/s")
        results["presets"][name] = record
        (args.out / "families_gpu.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0 if all(r["fidelity"]["pass"] for r in results["presets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
