"""One compare run spread over several GPUs of a machine: one shard process per GPU.

Device ``k`` of ``n`` runs shard ``k+1/n`` (engine/compare/sharding.py) in a child process
(``python -m engine.compare.shard_process``). A child for ``cuda:i`` sees only that GPU
(``CUDA_VISIBLE_DEVICES=i``) and runs on ``cuda``, so every child names the same D as a
single-GPU run and the shards' records together are exactly that run's. Children report progress
as JSON lines on stdout and write their records as a bundle, which the parent reads back. A child
that fails fails the whole run at once and the other shards are stopped (its comparisons would
otherwise go missing); a child whose parent dies stops (its stdin ends), so no shard keeps a GPU
busy for a run nobody will read. A child that reports nothing for the worker timeout (see
``worker_client.py``) counts as failed too: no wait on a shard is unbounded. An interrupted run
(KeyboardInterrupt in the parent) asks every running child to stop (SIGTERM), gives them
``STOP_GRACE_S`` to write the units they finished, and raises :class:`DevicesInterrupted` with those
records; ``done`` (an interrupted run's record ids) makes every shard skip what was written.

Torch-free: the parent only starts processes and reads files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Collection, Sequence

from engine.compare.progress import ProgressCallback, ProgressEvent
from engine.compare.worker_client import TIMEOUT_ENV, absolute_pythonpath, resolve_timeout
from evidence_db.bundle import Deployment, EvidenceRecord

__all__ = ["run_on_devices", "parse_devices", "DeviceRunError", "DevicesInterrupted", "STOP_GRACE_S"]

STOP_GRACE_S = 120.0  # for an interrupted shard to write its finished units before it is killed


class DeviceRunError(RuntimeError):
    """A shard process failed; the message carries the end of its log."""


class DevicesInterrupted(KeyboardInterrupt):
    """A multi-device run stopped by KeyboardInterrupt: ``records`` of the units the shards finished.

    Still a KeyboardInterrupt, so a caller that does not keep partial runs stops as before."""

    def __init__(self, records: list[EvidenceRecord], num_finished: int, num_units: int) -> None:
        super().__init__(f"interrupted after {num_finished} of {num_units} units")
        self.records, self.num_finished, self.num_units = records, num_finished, num_units


def parse_devices(devices: Sequence[str]) -> list[str]:
    """Validate device names: ``cpu`` (tests) or ``cuda:N``, each CUDA index once."""
    out: list[str] = []
    for name in devices:
        if name != "cpu" and not (name.startswith("cuda:") and name[5:].isdigit()):
            raise ValueError(f"device {name!r}: a multi-device run takes cuda:N names (or cpu)")
        if name != "cpu" and name in out:
            raise ValueError(f"device {name} is named twice")
        out.append(name)
    if not out:
        raise ValueError("a multi-device run needs at least one device")
    return out


class _Child:
    def __init__(self, index: int, count: int, device: str, job: dict, tmp: Path) -> None:
        self.shard = f"{index + 1}/{count}"
        self.out = tmp / f"shard-{index + 1}.jsonl"
        self.log = tmp / f"shard-{index + 1}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, absolute_pythonpath(env)) if p)
        if device.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = device.removeprefix("cuda:")
        message = {**job, "shard": self.shard, "device": "cuda" if device.startswith("cuda") else device,
                   "out": str(self.out)}
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "engine.compare.shard_process"], cwd=root, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.proc.stdin is not None
        # stdin stays open until the run ends: a shard whose stdin ends stops (shard_process.py)
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        self.done = self.total = 0
        self.last_heard = time.monotonic()  # when the child last reported progress

    def wait_or_kill(self, deadline: float) -> None:
        """Wait for the child until ``deadline`` (time.monotonic()), then kill it."""
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def records(self) -> list[EvidenceRecord]:
        """The records of the bundle the child wrote (none if it wrote nothing)."""
        if not self.out.is_file():
            return []
        with open(self.out, encoding="utf-8") as f:
            return [EvidenceRecord.from_json_dict(json.loads(line)) for line in f if line.strip()]


def _wait_all_or_first_failure(children: list[_Child], timeout: float) -> tuple[_Child, str] | None:
    """Wait for every child; when one fails or stays silent ``timeout`` s, stop the others at once.

    Returns the first child seen failing with why, or None when all exited with code 0.
    """
    while True:
        failed = next(((c, f"exited with code {c.proc.returncode}") for c in children
                       if c.proc.poll() not in (None, 0)), None)
        silent = next((c for c in children if c.proc.poll() is None
                       and time.monotonic() - c.last_heard > timeout), None)
        if failed is None and silent is not None:
            failed = (silent, f"reported nothing for {timeout:g} s (the bound; set it with --worker-timeout "
                              f"or ${TIMEOUT_ENV}) and was stopped")
        if failed is not None:
            for c in children:
                if c.proc.poll() is None:
                    c.proc.kill()
                    c.proc.wait()
            return failed
        if all(c.proc.poll() == 0 for c in children):
            return None
        time.sleep(0.2)


def run_on_devices(model_dir: str | Path, suites: Sequence[str], scale: str, *, devices: Sequence[str],
                   deployment: Deployment, label: str = "", command: Sequence[str] = (), seed: int | None = None,
                   factory: str | None = None, progress: ProgressCallback | None = None,
                   worker_timeout: float | None = None, done: Collection[str] = ()) -> list[EvidenceRecord]:
    """Run ``suites`` at ``scale`` split over ``devices``; return every shard's records (no runtime checks).

    ``worker_timeout`` bounds a shard's silence and, inside each shard, its reference workers'.
    ``done``: record ids an interrupted run wrote; their units are not run again. Raises
    :class:`DeviceRunError` when a shard process fails or stays silent past the bound,
    :class:`DevicesInterrupted` on KeyboardInterrupt, and :class:`ValueError` for a bad device
    list or timeout.
    """
    devices = parse_devices(devices)
    timeout = resolve_timeout(worker_timeout)
    job = {"model": str(Path(model_dir).resolve()), "suites": list(suites), "scale": scale,
           "deployment": {"fields": deployment.fields, "digest": deployment.digest}, "label": label,
           "command": list(command), "seed": seed, "factory": factory, "worker_timeout": timeout,
           "done": sorted(done)}
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="bitcase-devices-") as tmp:
        children = [_Child(i, len(devices), d, job, Path(tmp)) for i, d in enumerate(devices)]

        def follow(child: _Child) -> None:
            assert child.proc.stdout is not None
            for line in child.proc.stdout:
                event = ProgressEvent(**json.loads(line))
                with lock:
                    child.last_heard = time.monotonic()
                    child.done, child.total = event.done, max(child.total, event.total)
                    if progress is not None:
                        done, total = sum(c.done for c in children), sum(c.total for c in children)
                        progress(ProgressEvent(event.kind, f"shard {child.shard}: {event.message}", done, total,
                                               event.unit_id, event.status))

        threads = [threading.Thread(target=follow, args=(c,), daemon=True) for c in children]
        for t in threads:
            t.start()
        try:
            failed = _wait_all_or_first_failure(children, timeout)
        except KeyboardInterrupt:
            for child in children:  # asked to write what they finished, all at once, within one grace period
                if child.proc.poll() is None:
                    child.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_S
            for child in children:
                child.wait_or_kill(deadline)
            for t in threads:
                t.join(timeout=30)
            records = [r for child in children for r in child.records()]
            finished = len({r.details["unit"] for r in records if "unit" in r.details})
            raise DevicesInterrupted(records, finished, sum(c.total for c in children)) from None
        except BaseException:
            for child in children:
                child.proc.kill()
            raise
        finally:
            for child in children:
                child.proc.stdin.close()
        for t in threads:
            t.join(timeout=30)
        missing = next((c for c in children if not c.out.is_file()), None)
        if failed is None and missing is not None:
            failed = (missing, f"exited with code {missing.proc.returncode} without writing its records")
        if failed is not None:
            child, why = failed
            tail = child.log.read_text(errors="replace")[-3000:]
            raise DeviceRunError(f"shard {child.shard} on {devices[children.index(child)]} {why} "
                                 f"(the other shards were stopped): {tail}")
        return [r for child in children for r in child.records()]
