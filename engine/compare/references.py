"""Cold references computed in fresh processes: each job alone in a fresh engine of a fresh process.

A :class:`ReferencePool` starts one worker process per process name (``"first"``, ``"second"``...)
on first use and keeps it for the run; every job still gets its own engine lifetime inside that
worker, so a reference never shares a KV pool, a prefix cache or a batch with anything. Jobs travel
as JSON lines on the worker's stdin; traces come back as ``torch.save`` files.

Worker entry point: ``python -m engine.compare.references --model DIR --factory MOD:ATTR``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

import torch

from engine.compare.bitwise import ObservedTrace
from engine.compare.runs import EngineFactory, RequestRun
from engine.compare.units import ReferenceJob, RequestSpec

__all__ = ["ReferencePool", "ReferenceError", "load_factory", "save_run", "load_run"]

DEFAULT_FACTORY = "engine.compare.engine_port:open_engine"


class ReferenceError(RuntimeError):
    """A reference could not be computed (the worker died or the engine refused the job)."""


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


class _Worker:
    def __init__(self, argv: list[str], stderr_path: Path) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.stderr_path = stderr_path
        # stderr goes to a file: a chatty worker can never fill a pipe and stall the run.
        with open(stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                         text=True, env=env, cwd=root)

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.proc.wait(timeout=60)
            stderr = self.stderr_path.read_text(errors="replace")
            raise ReferenceError(f"reference process exited (code {self.proc.poll()}): {stderr[-2000:]}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


class ReferencePool:
    """Fresh-process cold references for one compare run; results are cached by job key."""

    def __init__(self, model_dir: Path, base_overrides: Mapping[str, Any], *, factory: str = DEFAULT_FACTORY,
                 perturbation: str | None = None, expected_core: str | None = None) -> None:
        self.model_dir = Path(model_dir)
        self.base_overrides = dict(base_overrides)
        self.factory = factory
        self.perturbation = perturbation
        self.expected_core = expected_core
        self._workers: dict[str, _Worker] = {}
        self._results: dict[str, RequestRun] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="bitcase-refs-")

    def get(self, job: ReferenceJob) -> RequestRun:
        """The cold run of ``job`` (computed on first request, then cached)."""
        if job.key not in self._results:
            worker = self._workers.get(job.process)
            if worker is None:
                argv = [sys.executable, "-m", "engine.compare.references", "--model", str(self.model_dir),
                        "--factory", self.factory]
                if self.perturbation:
                    argv += ["--perturbation", self.perturbation]
                if self.expected_core:
                    argv += ["--expected-core", self.expected_core]
                stderr_path = Path(self._tmp.name) / f"worker-{job.process}.log"
                worker = self._workers[job.process] = _Worker(argv, stderr_path)
            out = Path(self._tmp.name) / f"{len(self._results):05d}.pt"
            overrides = {**self.base_overrides, **dict(job.engine)}
            reply = worker.request({"request": job.request.to_dict(), "engine": overrides, "out": str(out)})
            if "error" in reply:
                raise ReferenceError(f"reference {job.request.label} ({job.process} process): {reply['error']}")
            self._results[job.key] = load_run(out)
            out.unlink()
        return self._results[job.key]

    def close(self) -> None:
        """Stop the worker processes and remove temporary files."""
        for worker in self._workers.values():
            worker.close()
        self._workers.clear()
        self._tmp.cleanup()

    def __enter__(self) -> "ReferencePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve(model_dir: Path, factory_spec: str, perturbation: str | None, expected_core: str | None) -> None:
    # Replies own file descriptor 1; anything else printing to stdout lands on stderr instead.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    factory = load_factory(factory_spec)
    for line in sys.stdin:
        message = json.loads(line)
        try:
            request = RequestSpec.from_dict(message["request"])
            handle = factory(model_dir, message["engine"], perturbation=perturbation, expected_core=expected_core)
            try:
                run = handle.run([request]).requests[request.label]
            finally:
                handle.close()
            save_run(run, Path(message["out"]))
            reply: dict[str, Any] = {"ok": True}
        except Exception as exc:  # the job fails, the worker survives: the client reports it per comparison
            reply = {"error": f"{type(exc).__name__}: {exc}"}
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
