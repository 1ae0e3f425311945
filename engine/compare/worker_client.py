"""The compare process's side of one cold-reference worker: jobs in, replies out, every wait bounded.

A writer thread feeds job lines to the worker's stdin and a reader thread queues its reply lines,
so the caller waits on a queue with a timeout, never on a pipe. The bound is on the worker's
silence: waiting for a job's reply fails when the worker answered nothing for ``timeout`` seconds
(jobs are answered in order, so a long queue ahead is fine as long as answers keep coming). A
worker that exits, sends garbage or stays silent is *broken*: it is stopped, and that job and every
later job of it fail with one message naming the worker, what happened and the end of its log.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

__all__ = ["WorkerClient", "WorkerError", "DEFAULT_TIMEOUT_S", "TIMEOUT_ENV", "resolve_timeout",
           "absolute_pythonpath"]

TIMEOUT_ENV = "BITCASE_WORKER_TIMEOUT"
DEFAULT_TIMEOUT_S = 900.0  # a full-scale reference (8K prompt, 128 decode steps) takes seconds on a GPU
_EXIT_GRACE_S = 60.0  # for a worker to exit once its input ends
_LOG_TAIL = 2000


class WorkerError(RuntimeError):
    """A worker is broken (exited, silent past the bound, or unreadable); the message says which and why."""


def resolve_timeout(timeout: float | None = None, env: dict[str, str] | None = None) -> float:
    """Seconds of worker silence tolerated: ``timeout``, else ``$BITCASE_WORKER_TIMEOUT``, else 900.

    Raises :class:`ValueError` (naming the source) unless the value is a positive number.
    """
    source, raw = "worker timeout", timeout
    if raw is None:
        raw = (os.environ if env is None else env).get(TIMEOUT_ENV)
        source = f"${TIMEOUT_ENV}"
        if raw is None or raw == "":
            return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{source} {raw!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{source} {raw!r} must be a positive, finite number of seconds")
    return value


def absolute_pythonpath(env: dict[str, str]) -> str:
    """``$PYTHONPATH`` with relative entries made absolute (the worker runs in another directory)."""
    entries = [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]
    return os.pathsep.join(str(Path(e).resolve()) for e in entries)


class WorkerClient:
    """One worker process, named ``name`` in every message (``reference process 'first'``)."""

    def __init__(self, name: str, argv: list[str], *, cwd: str, env: dict[str, str], log_path: Path,
                 timeout: float) -> None:
        self.name = name
        self.log_path = log_path
        self.timeout = timeout
        # the log is a file: a chatty worker can never fill a pipe and stall the run
        with open(log_path, "w") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         text=True, env=env, cwd=cwd)
        self._outbox: queue.Queue[str | None] = queue.Queue()
        self._inbox: queue.Queue[str | None] = queue.Queue()
        self._replies: dict[str, dict[str, Any]] = {}
        self._num_unanswered = 0
        self._broken: str | None = None
        self._threads = [threading.Thread(target=self._write, name=f"bitcase-{name}-writer", daemon=True),
                         threading.Thread(target=self._read, name=f"bitcase-{name}-reader", daemon=True)]
        for thread in self._threads:
            thread.start()

    def _write(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            while (line := self._outbox.get()) is not None:
                stdin.write(line)
                stdin.flush()
            stdin.close()
        except (OSError, ValueError):  # the worker died; the reader sees its output end
            pass

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            for line in stdout:
                self._inbox.put(line)
        except (OSError, ValueError):
            pass
        self._inbox.put(None)

    def submit(self, key: str, message: dict[str, Any]) -> None:
        """Queue a job; its reply is read by :meth:`reply`."""
        self._num_unanswered += 1
        self._outbox.put(json.dumps({"key": key, **message}) + "\n")

    def _log_tail(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip()
        except OSError as exc:
            return f"(its log {self.log_path} cannot be read: {exc})"
        return f"its log ends: {text[-_LOG_TAIL:]}" if text else "its log is empty"

    def _break(self, what: str) -> WorkerError:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=_EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        self._broken = f"reference process {self.name!r} (pid {self.proc.pid}) {what}; {self._log_tail()}"
        return WorkerError(self._broken)

    def reply(self, key: str) -> dict[str, Any]:
        """The reply to job ``key``: waits while the worker keeps answering, at most ``timeout`` s of silence.

        Raises :class:`WorkerError` when the worker is or becomes broken.
        """
        while key not in self._replies:
            if self._broken is not None:
                raise WorkerError(self._broken)
            try:
                line = self._inbox.get(timeout=self.timeout)
            except queue.Empty:
                raise self._break(f"answered nothing for {self.timeout:g} s (the bound; set it with "
                                  f"--worker-timeout or ${TIMEOUT_ENV}) and was stopped") from None
            if line is None:
                try:
                    code = self.proc.wait(timeout=_EXIT_GRACE_S)
                except subprocess.TimeoutExpired:
                    raise self._break("closed its output before answering and was stopped") from None
                raise self._break(f"exited with code {code} before answering")
            try:
                message = json.loads(line)
                self._replies[message["key"]] = message
            except (ValueError, KeyError, TypeError):
                raise self._break(f"sent a line that is not a reply ({line[:200]!r}) and was stopped") from None
            self._num_unanswered -= 1
        return self._replies.pop(key)

    def close(self) -> None:
        """End the worker: it exits when its input ends, or at once if it still has jobs nobody needs."""
        self._outbox.put(None)
        if self._num_unanswered and self.proc.poll() is None:
            self.proc.terminate()

    def wait(self) -> None:
        """Wait (bounded) for the worker to exit after :meth:`close`; kill it past the grace period."""
        try:
            self.proc.wait(timeout=_EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=_EXIT_GRACE_S)
        for thread in self._threads:
            thread.join(timeout=10)
        if self.proc.stdout:
            self.proc.stdout.close()
