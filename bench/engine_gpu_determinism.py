"""Bitwise determinism of the engine's GPU path, checked in the same run as the speed figures.

Two engines of the benchmark's limits that keep full logit rows, one with CUDA graphs and one
without (prefix caching off, so every request computes its own history). Every request's trace
(full float32 logit rows, tokens, sampler states) must equal its singleton run on the graph
engine: batches of 4 (no padding), 3 (padded to 4) and 5 (padded to 8) with graphs, batches of
4 and 5 and the singletons without graphs. Greedy tokens chosen on the device must be the
argmax of their rows. Greedy and sampled (counter-based) requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bench.engine_gpu_common import free_cuda, log, random_prompts
from bench.engine_gpu_workloads import open_engine
from engine.llm_engine import LLMEngine, RequestOutput
from engine.sampling_params import SamplingParams
from engine.trace import compare_traces

__all__ = ["determinism_checks"]

LENGTHS = (1, 17, 100, 1000, 2049)  # around page boundaries, up to a few chunks


def _generate(engine: LLMEngine, prompts: list[list[int]], params: SamplingParams) -> list[RequestOutput]:
    ids = [engine.add_request(p, params) for p in prompts]
    done = {o.request_id: o for o in engine.run()}
    return [done[i] for i in ids]


def _compare(name: str, outputs: list[RequestOutput], references: list[RequestOutput]) -> dict[str, Any]:
    problems = []
    for out, ref in zip(outputs, references, strict=True):
        verdict = compare_traces(out.trace, ref.trace)
        if not verdict.agree or len(out.trace) != len(ref.trace):
            detail = verdict.first_difference.describe() if verdict.first_difference else "lengths differ"
            problems.append(f"{len(out.prompt_token_ids)}-token prompt: {detail}")
    return {"check": name, "equal": not problems, "num_requests": len(outputs),
            "num_positions": sum(len(o.trace) for o in outputs), "problems": problems}


def _greedy_is_argmax(outputs: list[RequestOutput]) -> dict[str, Any]:
    entries = [e for o in outputs for e in o.trace.entries]
    wrong = sum(e.token != int(torch.argmax(e.logits)) for e in entries)
    return {"check": "device greedy token == argmax of its row", "equal": wrong == 0,
            "num_positions": len(entries), "problems": [f"{wrong} positions differ"] if wrong else []}


def determinism_checks(model_dir: Path, *, max_tokens: int) -> dict[str, Any]:
    """Run every comparison; ``all_equal`` is True only when each one holds."""
    kinds = {"greedy": SamplingParams(max_tokens=max_tokens, ignore_eos=True),
             "sampled": SamplingParams(max_tokens=max_tokens, temperature=0.8, top_p=0.95, seed=9, ignore_eos=True)}
    checks: list[dict[str, Any]] = []
    engines = {mode: open_engine(model_dir, cuda_graphs=mode == "graphs", keep_logit_rows=True,
                                 enable_prefix_caching=False) for mode in ("graphs", "eager")}
    prompts = random_prompts(LENGTHS, seed=4242, vocab_size=engines["graphs"].spec.vocab_size)
    try:
        for kind, params in kinds.items():
            singles = [_generate(engines["graphs"], [p], params)[0] for p in prompts]
            for mode, batches in (("graphs", (4, 3, 5)), ("eager", (4, 5, 1))):
                for size in batches:
                    if size == 1:
                        outs = [_generate(engines[mode], [p], params)[0] for p in prompts]
                        refs = singles
                    else:
                        outs, refs = _generate(engines[mode], prompts[:size], params), singles[:size]
                    checks.append(_compare(f"{kind}: {mode} batch of {size} == graph singletons", outs, refs))
                    log(f"  {checks[-1]['check']}: {'equal' if checks[-1]['equal'] else 'DIFFERENT'}")
                    if kind == "greedy" and mode == "graphs" and size == 4:
                        checks.append(_greedy_is_argmax(outs))
    finally:
        engines.clear()
        free_cuda()
    return {"all_equal": all(c["equal"] for c in checks), "checks": checks, "prompt_lengths": list(LENGTHS),
            "max_tokens": max_tokens}
