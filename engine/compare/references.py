"""Cold references computed in fresh processes: each job alone in a fresh engine of a fresh process.

A :class:`ReferencePool` starts one worker process (``engine/compare/reference_worker.py``) per
process name (``"first"``, ``"second"``) on first use and keeps it for the run; every job still
gets its own engine lifetime inside the worker, so a reference never shares a KV pool, a prefix
cache or a batch with anything. Jobs can be submitted ahead (:meth:`ReferencePool.prefetch`): the
worker then computes references while the compare process runs candidates, on another core.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping

from engine.compare.reference_worker import DEFAULT_FACTORY, load_run
from engine.compare.runs import RequestRun
from engine.compare.units import ReferenceJob

__all__ = ["ReferencePool", "ReferenceError", "DEFAULT_FACTORY"]


class ReferenceError(RuntimeError):
    """A reference could not be computed (the worker died or the engine refused the job)."""


class _Worker:
    """One worker process: a writer thread feeds jobs; replies are read in order on demand."""

    def __init__(self, argv: list[str], stderr_path: Path) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.stderr_path = stderr_path
        # stderr goes to a file: a chatty worker can never fill a pipe and stall the run.
        with open(stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                         text=True, env=env, cwd=root)
        self._outbox: queue.Queue[str | None] = queue.Queue()
        self._replies: dict[str, dict[str, Any]] = {}
        self._num_unanswered = 0
        self._writer = threading.Thread(target=self._write, name="bitcase-reference-writer", daemon=True)
        self._writer.start()

    def _write(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            while (line := self._outbox.get()) is not None:
                stdin.write(line)
                stdin.flush()
            stdin.close()
        except OSError:  # the worker died; the reader reports it with its stderr
            pass

    def submit(self, key: str, message: dict[str, Any]) -> None:
        self._num_unanswered += 1
        self._outbox.put(json.dumps({"key": key, **message}) + "\n")

    def reply(self, key: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while key not in self._replies:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait(timeout=60)
                stderr = self.stderr_path.read_text(errors="replace")
                raise ReferenceError(f"reference process exited (code {self.proc.poll()}): {stderr[-2000:]}")
            message = json.loads(line)
            self._replies[message["key"]] = message
            self._num_unanswered -= 1
        return self._replies.pop(key)

    def close(self) -> None:
        """End the worker: it exits when its input ends, or at once if it still has jobs nobody needs."""
        self._outbox.put(None)
        if self._num_unanswered:
            self.proc.terminate()

    def wait(self) -> None:
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._writer.join(timeout=10)
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
        self._submitted: dict[str, tuple[str, Path]] = {}  # job key -> (process, output file)
        self._results: dict[str, RequestRun] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="bitcase-refs-")

    def _worker(self, process: str) -> _Worker:
        if process not in self._workers:
            argv = [sys.executable, "-m", "engine.compare.reference_worker", "--model", str(self.model_dir),
                    "--factory", self.factory]
            if self.perturbation:
                argv += ["--perturbation", self.perturbation]
            if self.expected_core:
                argv += ["--expected-core", self.expected_core]
            self._workers[process] = _Worker(argv, Path(self._tmp.name) / f"worker-{process}.log")
        return self._workers[process]

    def _submit(self, job: ReferenceJob) -> None:
        if job.key in self._results or job.key in self._submitted:
            return
        out = Path(self._tmp.name) / f"{len(self._submitted):05d}.pt"
        self._submitted[job.key] = (job.process, out)
        overrides = {**self.base_overrides, **dict(job.engine)}
        self._worker(job.process).submit(job.key, {"request": job.request.to_dict(), "engine": overrides,
                                                   "out": str(out)})

    def prefetch(self, jobs: Iterable[ReferenceJob]) -> None:
        """Submit ``jobs`` now, so their workers compute them while the caller does other work."""
        for job in jobs:
            self._submit(job)

    def get(self, job: ReferenceJob) -> RequestRun:
        """The cold run of ``job`` (submitted if it was not, waited for, then cached)."""
        if job.key not in self._results:
            self._submit(job)
            process, out = self._submitted[job.key]
            reply = self._worker(process).reply(job.key)
            if "error" in reply:
                raise ReferenceError(f"reference {job.request.label} ({job.process} process): {reply['error']}")
            self._results[job.key] = load_run(out)
            out.unlink()
        return self._results[job.key]

    def close(self) -> None:
        """Stop the worker processes (all at once) and remove temporary files."""
        for worker in self._workers.values():
            worker.close()
        for worker in self._workers.values():
            worker.wait()
        self._workers.clear()
        self._tmp.cleanup()
