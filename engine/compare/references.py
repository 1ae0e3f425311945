"""Cold references computed in fresh processes: each job alone in a fresh engine of a fresh process.

A :class:`ReferencePool` starts one worker process (``engine/compare/reference_worker.py``) per
process name (``"first"``, ``"second"``) on first use and keeps it for the run; every job still
gets its own engine lifetime inside the worker, so a reference never shares a KV pool, a prefix
cache or a batch with anything. Jobs can be submitted ahead (:meth:`ReferencePool.prefetch`): the
worker then computes references while the compare process runs candidates, on another core.

Paths are made absolute before they reach a worker (it runs in the package's directory, not the
caller's). A job that fails is remembered as failed: every comparison that needs it gets the
worker's message at once. Every wait on a worker is bounded (``worker_client.py``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from engine.compare.reference_worker import DEFAULT_FACTORY, load_run
from engine.compare.runs import RequestRun
from engine.compare.units import ReferenceJob
from engine.compare.worker_client import WorkerClient, WorkerError, absolute_pythonpath, resolve_timeout

__all__ = ["ReferencePool", "ReferenceError", "DEFAULT_FACTORY"]


class ReferenceError(RuntimeError):
    """A reference could not be computed (the worker broke, or the engine refused the job)."""


class ReferencePool:
    """Fresh-process cold references for one compare run; results are cached by job key."""

    def __init__(self, model_dir: Path, base_overrides: Mapping[str, Any], *, factory: str = DEFAULT_FACTORY,
                 perturbation: str | None = None, expected_core: str | None = None,
                 timeout: float | None = None) -> None:
        self.model_dir = Path(model_dir).resolve()
        self.base_overrides = dict(base_overrides)
        self.factory = factory
        self.perturbation = perturbation
        self.expected_core = expected_core
        self.timeout = resolve_timeout(timeout)
        self._workers: dict[str, WorkerClient] = {}
        self._submitted: dict[str, tuple[str, Path]] = {}  # job key -> (process, output file)
        self._results: dict[str, RequestRun] = {}
        self._failures: dict[str, str] = {}  # job key -> why it has no result (raised again on every get)
        self._num_jobs = 0
        self._tmp = tempfile.TemporaryDirectory(prefix="bitcase-refs-")

    def _worker(self, process: str) -> WorkerClient:
        if process not in self._workers:
            argv = [sys.executable, "-m", "engine.compare.reference_worker", "--model", str(self.model_dir),
                    "--factory", self.factory]
            if self.perturbation:
                argv += ["--perturbation", self.perturbation]
            if self.expected_core:
                argv += ["--expected-core", self.expected_core]
            root = str(Path(__file__).resolve().parents[2])
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            env["PYTHONPATH"] = os.pathsep.join(p for p in (root, absolute_pythonpath(env)) if p)
            # the package's directory, so a caller's directory holding an ``engine/`` cannot shadow it
            self._workers[process] = WorkerClient(process, argv, cwd=root, env=env, timeout=self.timeout,
                                                  log_path=Path(self._tmp.name) / f"worker-{process}.log")
        return self._workers[process]

    def _submit(self, job: ReferenceJob) -> None:
        if job.key in self._results or job.key in self._submitted or job.key in self._failures:
            return
        out = Path(self._tmp.name) / f"{self._num_jobs:05d}.pt"
        self._num_jobs += 1
        self._submitted[job.key] = (job.process, out)
        overrides = {**self.base_overrides, **dict(job.engine)}
        self._worker(job.process).submit(job.key, {"request": job.request.to_dict(), "engine": overrides,
                                                   "out": str(out)})

    def prefetch(self, jobs: Iterable[ReferenceJob]) -> None:
        """Submit ``jobs`` now, so their workers compute them while the caller does other work."""
        for job in jobs:
            self._submit(job)

    def get(self, job: ReferenceJob) -> RequestRun:
        """The cold run of ``job`` (submitted if it was not, waited for, then cached).

        Raises :class:`ReferenceError` with the worker's message, for this and every later ``get``
        of the same job.
        """
        if job.key in self._failures:
            raise ReferenceError(self._failures[job.key])
        if job.key not in self._results:
            self._submit(job)
            process, out = self._submitted.pop(job.key)
            where = f"reference {job.request.label} ({process} process)"
            try:
                reply = self._worker(process).reply(job.key)
                if "error" in reply:
                    raise ReferenceError(f"{where}: {reply['error']}")
                self._results[job.key] = load_run(out)
            except WorkerError as exc:
                self._failures[job.key] = f"reference {job.request.label}: {exc}"
                raise ReferenceError(self._failures[job.key]) from None
            except ReferenceError as exc:
                self._failures[job.key] = str(exc)
                raise
            except Exception as exc:  # an unreadable trace file: this job fails, the others go on
                self._failures[job.key] = f"{where}: its trace {out} cannot be read: {type(exc).__name__}: {exc}"
                raise ReferenceError(self._failures[job.key]) from None
            finally:
                out.unlink(missing_ok=True)
        return self._results[job.key]

    def close(self) -> None:
        """Stop the worker processes (all at once) and remove temporary files."""
        for worker in self._workers.values():
            worker.close()
        for worker in self._workers.values():
            worker.wait()
        self._workers.clear()
        self._tmp.cleanup()
