"""The cold-reference worker process: each job alone in a fresh engine, traces back as files.

Entry point: ``python -m engine.compare.reference_worker --model DIR --factory MOD:ATTR``. Jobs
arrive as JSON lines on stdin (``key``, ``request``, ``engine`` overrides, ``out`` path); each
reply is one JSON line ``{"key": ..., "ok": true}`` or ``{"key": ..., "error": "..."}``, in job
order. A job that fails does not stop the worker.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

from engine.compare.bitwise import ObservedTrace
from engine.compare.runs import EngineFactory, RequestRun
from engine.compare.units import RequestSpec

__all__ = ["DEFAULT_FACTORY", "load_factory", "save_run", "load_run", "main"]

DEFAULT_FACTORY = "engine.compare.engine_port:open_engine"


def load_factory(spec: str) -> EngineFactory:
    """Resolve ``"module:attribute"`` to an engine factory."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"engine factory {spec!r} is not of the form module:attribute")
    return getattr(importlib.import_module(module), attr)


def save_run(run: RequestRun, path: Path) -> None:
    """Write a request run (trace and witnesses) to ``path``."""
    torch.save({"tokens": list(run.trace.tokens), "states": [list(s) for s in run.trace.sampler_states],
                "logits": run.trace.logits.contiguous(), "witness": run.witness_dict()}, path)


def load_run(path: Path) -> RequestRun:
    """Read what :func:`save_run` wrote."""
    d = torch.load(path, weights_only=True)
    trace = ObservedTrace(tuple(d["tokens"]), tuple(tuple(s) for s in d["states"]), d["logits"])
    w = d["witness"]
    return RequestRun(trace=trace, cached_tokens=w["cached_tokens"], chunk_boundaries=tuple(w["chunk_boundaries"]),
                      num_preemptions=w["num_preemptions"], num_shared_steps=w["num_shared_steps"],
                      finish_reason=w["finish_reason"])


def _serve(model_dir: Path, factory_spec: str, perturbation: str | None, expected_core: str | None) -> None:
    # Replies own file descriptor 1; anything else printing to stdout lands on stderr instead.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    factory = load_factory(factory_spec)
    for line in sys.stdin:
        message = json.loads(line)
        reply: dict[str, Any] = {"key": message["key"]}
        try:
            request = RequestSpec.from_dict(message["request"])
            handle = factory(model_dir, message["engine"], perturbation=perturbation, expected_core=expected_core)
            try:
                run = handle.run([request]).requests[request.label]
            finally:
                handle.close()
            save_run(run, Path(message["out"]))
            reply["ok"] = True
        except Exception as exc:  # the job fails, the worker survives: the client reports it per comparison
            reply["error"] = f"{type(exc).__name__}: {exc}"
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main(argv: list[str] | None = None) -> None:
    """Worker process: serve reference jobs from stdin until it closes."""
    parser = argparse.ArgumentParser(description="bitcase cold-reference worker")
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--factory", default=DEFAULT_FACTORY)
    parser.add_argument("--perturbation", default=None)
    parser.add_argument("--expected-core", default=None)
    args = parser.parse_args(argv)
    _serve(args.model, args.factory, args.perturbation, args.expected_core)


if __name__ == "__main__":
    main()
