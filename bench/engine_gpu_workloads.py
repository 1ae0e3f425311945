"""The engine's workloads in bench/engine_gpu.py: decode by cached context, prefill, multi-turn sessions.

Decode: ``batch`` requests whose prompts (``context`` tokens; 1 token for context 0) are already
in the prefix cache (a warm-up run put them there), greedy, ``ignore_eos``. The timed window
starts once every request has its first token and ends when all have ``new_tokens``; its
tokens per second are ``batch * (new_tokens - 1)`` over that time. Prefill: fresh random prompts
(no cache hits), ``max_tokens=1``, prompt tokens per second to completion. Each run records the
cyclic collector's full passes in it; with :data:`GC_FREEZE` everything alive when the run starts
is left out of them first, as in ``bitcase serve``'s engine process.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from bench.engine_gpu_common import Budget, collector_pauses, guarded, log, random_prompts, summary
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams

__all__ = ["BENCH_ENGINE", "GC_FREEZE", "open_engine", "decode_by_context", "prefill_throughput", "MultiTurnSpec",
           "FULL_MULTI_TURN", "QUICK_MULTI_TURN", "multi_turn"]

# Limits every engine of the run shares (D's engine fields differ only in cuda_graphs).
BENCH_ENGINE = dict(device="cuda", dtype="bfloat16", page_size=16, num_pages=16384, max_num_seqs=16,
                    max_num_batched_tokens=8192, max_model_len=24576, keep_logit_rows=False)
# Whether a run freezes what is alive before it (bench/engine_gpu.py --no-gc-freeze: the A/B baseline).
GC_FREEZE = True


def open_engine(model_dir: Path, **overrides: Any) -> LLMEngine:
    """An engine of the benchmark's limits (graphs captured here when ``cuda_graphs``)."""
    start = time.perf_counter()
    engine = LLMEngine(model_dir, EngineConfig(**{**BENCH_ENGINE, **overrides}))
    log(f"engine ready in {time.perf_counter() - start:.1f} s ({overrides})")
    return engine


def _run(engine: LLMEngine, prompts: Sequence[Sequence[int]], max_tokens: int) -> dict[str, float]:
    """Run ``prompts`` to completion; times of the first-token step and of the decode window."""
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    for p in prompts:  # all or none enter the engine
        engine.validate(p, params)
    with collector_pauses(freeze=GC_FREEZE) as gc_ms:
        start = time.perf_counter()
        ids = [engine.add_request(p, params) for p in prompts]
        waiting_first, first_at, previous, step_s, finished = set(ids), None, start, [], {}
        while engine.has_unfinished():
            result = engine.step()
            now = time.perf_counter()
            if first_at is None:
                waiting_first -= {r.request_id for r in result.scheduled if r.is_sampled}
                first_at = now if not waiting_first else None
            else:
                step_s.append(now - previous)
            previous = now
            finished.update({o.request_id: len(o.token_ids) for o in result.finished})
    assert all(finished[i] == max_tokens for i in ids), f"a request stopped early: {finished}"
    assert first_at is not None
    return {"total_s": previous - start, "first_token_s": first_at - start, "decode_s": previous - first_at,
            "step_s": step_s, "gc_full_ms": gc_ms}


def _slowest(step_s: Sequence[float], count: int = 3) -> list[list[float]]:
    """The ``count`` slowest steps of a run as [step number from 1, ms], slowest first."""
    ranked = sorted(range(len(step_s)), key=lambda i: -step_s[i])[:count]
    return [[i + 1, round(1e3 * step_s[i], 3)] for i in ranked]


def _decode_runs(engine: LLMEngine, prompts: list[list[int]], new_tokens: int, repeats: int) -> dict[str, Any]:
    warm = _run(engine, prompts, 2)  # fills the prefix cache with the context
    runs = [_run(engine, prompts, new_tokens) for _ in range(repeats)]
    batch = len(prompts)
    return {"tokens_per_s": summary([batch * (new_tokens - 1) / r["decode_s"] for r in runs]),
            "step_ms": summary([1e3 * sorted(r["step_s"])[len(r["step_s"]) // 2] for r in runs]),
            "longest_step_ms": [round(1e3 * max(r["step_s"]), 3) for r in runs],
            # what separates tokens/s from the median step: per run, the three slowest steps as
            # (step after the first token, from 1; ms), and the mean step
            "slowest_steps": [_slowest(r["step_s"]) for r in runs],
            "mean_step_ms": summary([1e3 * statistics.fmean(r["step_s"]) for r in runs]),
            "gc_full_passes_ms": [[round(ms, 1) for ms in r["gc_full_ms"]] for r in runs],
            "first_token_s": summary([r["first_token_s"] for r in runs]), "warm_up_prefill_s": warm["first_token_s"],
            "batch": batch, "new_tokens": new_tokens}


def decode_by_context(engine: LLMEngine, *, contexts: Sequence[int], batch: int, new_tokens: int, repeats: int,
                      budget: Budget) -> dict[str, Any]:
    """Decode tokens per second at each cached context length (median of ``repeats`` runs)."""
    out: dict[str, Any] = {}
    for context in contexts:
        if not budget.allows(30):
            out[str(context)] = {"skipped": f"time budget ({budget.left():.0f} s left)"}
            continue
        prompts = random_prompts([max(context, 1)] * batch, seed=1000 + context, vocab_size=engine.spec.vocab_size)
        out[str(context)] = guarded(f"context {context}", lambda: _decode_runs(engine, prompts, new_tokens, repeats))
        if "tokens_per_s" in out[str(context)]:
            log(f"  context {context}: {out[str(context)]['tokens_per_s']['median']:.0f} tok/s "
                f"(step {out[str(context)]['step_ms']['median']:.2f} ms)")
    return out


def _prefill_runs(engine: LLMEngine, batch: int, length: int, repeats: int) -> dict[str, Any]:
    rates = []
    for r in range(repeats + 1):  # the first run warms up (compiles, grows allocator pools)
        prompts = random_prompts([length] * batch, seed=5000 + 97 * r + length, vocab_size=engine.spec.vocab_size)
        rates.append(batch * length / _run(engine, prompts, 1)["total_s"])
    return {"tokens_per_s": summary(rates[1:]), "batch": batch, "prompt_tokens": length}


def prefill_throughput(engine: LLMEngine, *, shapes: Sequence[tuple[int, int]], repeats: int,
                       budget: Budget) -> dict[str, Any]:
    """Prompt tokens per second for (batch, prompt length) shapes, fresh prompts every run."""
    out: dict[str, Any] = {}
    for batch, length in shapes:
        key = f"{batch}x{length}"
        if not budget.allows(30):
            out[key] = {"skipped": f"time budget ({budget.left():.0f} s left)"}
            continue
        out[key] = guarded(f"prefill {key}", lambda: _prefill_runs(engine, batch, length, repeats))
        if "tokens_per_s" in out[key]:
            log(f"  prefill {key}: {out[key]['tokens_per_s']['median']:.0f} tok/s")
    return out


@dataclass(frozen=True)
class MultiTurnSpec:
    """The study's multi-turn workload: sessions of turns, each turn's prompt = history + new tokens."""

    num_sessions: int
    num_turns: int
    first_prompt_tokens: int  # of which shared_prefix_tokens are common to every session (and cached)
    shared_prefix_tokens: int
    follow_up_tokens: int  # new tokens appended to the history for each later turn
    output_tokens: int  # per turn
    think_s: float  # between a turn's end and the session's next turn


FULL_MULTI_TURN = MultiTurnSpec(4, 6, 16384, 8192, 256, 768, 0.5)
QUICK_MULTI_TURN = MultiTurnSpec(4, 2, 2048, 1024, 64, 64, 0.5)


def multi_turn(engine: LLMEngine, spec: MultiTurnSpec, *, budget: Budget, reserve_s: float) -> dict[str, Any]:
    """Run the sessions with think times; per-session completion and per-turn latencies."""
    vocab = engine.spec.vocab_size
    shared = random_prompts([spec.shared_prefix_tokens], seed=77, vocab_size=vocab)[0]
    uniques = random_prompts([spec.first_prompt_tokens - spec.shared_prefix_tokens] * spec.num_sessions, seed=78,
                             vocab_size=vocab)
    follow_ups = random_prompts([spec.follow_up_tokens] * (spec.num_sessions * spec.num_turns), seed=79,
                                vocab_size=vocab)
    _run(engine, [shared], 1)  # the shared prefix is cached context when the sessions start
    history = [shared + u for u in uniques]
    due: list[float | None] = [0.0] * spec.num_sessions
    turns: list[list[dict[str, float]]] = [[] for _ in range(spec.num_sessions)]
    active: dict[str, int] = {}
    params = SamplingParams(max_tokens=spec.output_tokens, ignore_eos=True)
    with collector_pauses(freeze=GC_FREEZE) as gc_ms:
        complete, start = True, time.perf_counter()
        while any(d is not None for d in due) or active:
            now = time.perf_counter() - start
            for s, at in enumerate(due):
                if at is not None and at <= now:
                    active[engine.add_request(history[s], params)] = s
                    turns[s].append({"submitted_s": now, "prompt_tokens": len(history[s])})
                    due[s] = None
            if not engine.has_unfinished():
                time.sleep(min(0.01, max(0.0, min(d for d in due if d is not None) - now)))
                continue
            result = engine.step()
            now = time.perf_counter() - start
            for row in result.scheduled:
                turn = turns[active[row.request_id]][-1] if row.request_id in active else None
                if turn is not None and row.is_sampled and "first_token_s" not in turn:
                    turn["first_token_s"] = now
            for output in result.finished:
                s = active.pop(output.request_id)
                turns[s][-1].update(finished_s=now, cached_tokens=output.num_cached_tokens)
                history[s] = history[s] + list(output.token_ids)
                if len(turns[s]) < spec.num_turns:
                    history[s] += follow_ups[s * spec.num_turns + len(turns[s])]
                    due[s] = now + spec.think_s
            if budget.left() < reserve_s:
                complete = False
                for request_id in list(active):
                    engine.cancel(request_id)
                log(f"  multi-turn stopped by the time budget after {now:.0f} s")
                break
    wall = time.perf_counter() - start
    done_turns = [t for session in turns for t in session if "finished_s" in t]
    sessions = [{"completion_s": s[-1].get("finished_s") if len(s) == spec.num_turns else None,
                 "turns_finished": sum("finished_s" in t for t in s), "turns": s} for s in turns]
    return {"spec": asdict(spec), "complete": complete, "wall_s": wall, "sessions": sessions,
            "session_completion_s": summary([s["completion_s"] for s in sessions if s["completion_s"] is not None]),
            "turn_latency_s": summary([t["finished_s"] - t["submitted_s"] for t in done_turns]),
            "time_to_first_token_s": summary([t["first_token_s"] - t["submitted_s"] for t in done_turns
                                              if "first_token_s" in t]),
            "output_tokens_per_s": len(done_turns) * spec.output_tokens / wall,
            "gc_full_passes_ms": [round(ms, 1) for ms in gc_ms]}
