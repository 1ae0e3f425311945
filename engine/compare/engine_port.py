"""The real engine behind the :class:`~engine.compare.runs.EngineHandle` contract.

Runs requests with the step API (``LLMEngine.add_request`` / ``step`` / ``cancel``) and turns each
``RequestOutput`` and ``StepResult`` into traces and witnesses: cached-token counts, the prefill
chunk ends actually used, preemptions, which requests shared a step, what was in flight when a
request arrived, queueing at capacity, evictions of registered pages, decode steps padded to a
graph batch size (derived from the scheduled rows and the configuration's graph batch sizes) and
steps with prefill rows padded to a graph shape (counted by the runner as it runs them).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from engine.compare.bitwise import ObservedTrace
from engine.compare.perturb import perturbed
from engine.compare.runs import RequestRun, RunResult
from engine.compare.units import RequestSpec
from engine.compare.identity import core_digest
from engine.config import EngineConfig
from engine.decode_padding import graph_batch_size, is_decode_step
from engine.deployment import DeploymentMismatch
from engine.llm_engine import LLMEngine, RequestOutput

__all__ = ["RealEngine", "open_engine", "observed_trace"]


def observed_trace(output: RequestOutput) -> ObservedTrace:
    """The comparison view of an engine trace (rows must have been kept)."""
    entries = output.trace.entries
    if any(e.logits is None for e in entries):
        raise ValueError(f"request {output.request_id}: the engine kept only row digests (keep_logit_rows=False)")
    vocab = output.trace.entries[0].logits.shape[0] if entries else 0
    logits = torch.stack([e.logits for e in entries]) if entries else torch.empty(0, vocab, dtype=torch.float32)
    return ObservedTrace(tuple(e.token for e in entries),
                         tuple((e.sampler_state.seed, e.sampler_state.counter) for e in entries), logits)


class RealEngine:
    """One ``LLMEngine`` lifetime."""

    def __init__(self, model_dir: Path, overrides: Mapping[str, Any], *, perturbation: str | None = None,
                 expected_core: str | None = None) -> None:
        self.perturbation = perturbation
        # Everything alive before this engine is left out of later collections, so the one in
        # close() looks at this engine's objects only (0.2 ms instead of 130 ms with torch loaded).
        gc.freeze()
        with perturbed(perturbation):
            self.engine = LLMEngine(model_dir, EngineConfig.from_kwargs(**{**overrides, "keep_logit_rows": True}))
        if expected_core is not None and core_digest(self.engine.deployment) != expected_core:
            raise DeploymentMismatch(f"this engine runs under D {self.engine.deployment.digest}, which differs "
                                     "from the expected D beyond the engine limits the suite varies")
        self.config = {name: getattr(self.engine.config, name) for name in EngineConfig.__dataclass_fields__}
        self.config["serving_dtype"] = self.engine.dtype

    def run(self, requests: Sequence[RequestSpec], *, arrival_steps: Mapping[str, int] | None = None,
            cancel_steps: Mapping[str, int] | None = None) -> RunResult:
        """Run ``requests`` to completion (see :class:`~engine.compare.runs.EngineHandle`)."""
        with perturbed(self.perturbation):
            return self._run(requests, dict(arrival_steps or {}), dict(cancel_steps or {}))

    def _run(self, requests: Sequence[RequestSpec], arrivals: dict[str, int], cancels: dict[str, int]) -> RunResult:
        engine = self.engine
        pending = sorted(requests, key=lambda r: arrivals.get(r.label, 0))  # stable: list order within a step
        ids: dict[str, str] = {}
        outputs: dict[str, RequestOutput] = {}
        shared = {r.label: 0 for r in requests}
        in_flight_at_arrival: dict[str, int] = {}
        cancelled_at: dict[str, int] = {}
        step = evictions = max_waiting = padded = 0
        sizes = engine.config.graph_batch_sizes
        mixed_before = engine.runner.num_padded_mixed_steps
        while pending or engine.has_unfinished():
            while pending and arrivals.get(pending[0].label, 0) <= step:
                request = pending.pop(0)
                in_flight_at_arrival[request.label] = len(ids) - len(outputs)
                ids[request.label] = engine.add_request(list(request.prompt), request.params,
                                                        request_id=f"{request.label}#{engine.num_steps}")
            for label, at in cancels.items():
                if at == step and label in ids and label not in outputs:
                    output = engine.cancel(ids[label])
                    if output is not None:
                        outputs[label], cancelled_at[label] = output, step
            if not engine.has_unfinished():
                step += 1  # idle until the next arrival
                continue
            result = engine.step()
            step += 1
            evictions += result.num_evicted_pages
            scheduler = engine.scheduler
            if len(scheduler.running) >= engine.config.max_num_seqs:
                max_waiting = max(max_waiting, len(scheduler.waiting))
            if is_decode_step(result.scheduled, sizes):
                padded += graph_batch_size(len(result.scheduled), sizes) > len(result.scheduled)
            rows = {r.request_id for r in result.scheduled}
            if len(rows) > 1:
                for label, rid in ids.items():
                    shared[label] += rid in rows
            for output in result.finished:
                label = next(lbl for lbl, rid in ids.items() if rid == output.request_id)
                outputs[label] = output
        runs = {}
        for request in requests:
            out = outputs[request.label]
            runs[request.label] = RequestRun(
                trace=observed_trace(out), cached_tokens=out.num_cached_tokens,
                chunk_boundaries=out.prefill_chunk_ends, num_preemptions=out.num_preemptions,
                num_shared_steps=shared[request.label], arrival_step=arrivals.get(request.label, 0),
                num_unfinished_at_arrival=in_flight_at_arrival[request.label],
                cancelled_at_step=cancelled_at.get(request.label), finish_reason=out.finish_reason)
        return RunResult(runs, num_steps=step, num_evictions=evictions, max_num_waiting_at_capacity=max_waiting,
                         num_padded_steps=padded,
                         num_padded_mixed_steps=engine.runner.num_padded_mixed_steps - mixed_before)

    def close(self) -> None:
        """Drop the engine and give its device memory back now.

        The runner and its graph sets refer to each other, so the KV pool and graphs would wait for
        a cyclic collection (run here, over the objects made since the engine opened); and the
        candidate process and its reference workers share one GPU, so memory one process's
        allocator keeps cached is memory the others cannot have.
        """
        del self.engine
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def open_engine(model_dir: Path, overrides: Mapping[str, Any], *, perturbation: str | None = None,
                expected_core: str | None = None) -> RealEngine:
    """The default engine factory (``engine.compare.engine_port:open_engine``)."""
    return RealEngine(Path(model_dir), overrides, perturbation=perturbation, expected_core=expected_core)
