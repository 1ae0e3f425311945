"""One shard of a multi-device compare run (started by engine/compare/devices.py).

Reads one JSON job line on stdin (model, suites, scale, shard, device, deployment, label,
command, seed, factory, worker_timeout, out, and optionally done: record ids an interrupted run
already wrote), runs the shard's other units without runtime checks, writes their records to
``out`` as a bundle and reports progress as JSON lines on stdout. Exit code 0 once the bundle is
written. Interrupted (SIGTERM, as the parent sends when its own run is interrupted, or SIGINT), it
writes the units that finished to ``out`` and exits with code 4. The parent keeps stdin open while
it waits: when stdin ends before the shard does (the parent was killed, or gave up), the process
exits at once with code 3 and writes nothing, so no shard outlives the run that started it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading

from engine.compare.api import CompareInterrupted, run_suites
from engine.compare.progress import ProgressEvent
from engine.compare.protocol import PROTOCOL_SEED
from engine.compare.reference_worker import DEFAULT_FACTORY
from evidence_db.bundle import Deployment, write_bundle


PARENT_GONE_EXIT = 3
INTERRUPTED_EXIT = 4


def _interrupt(signum, frame) -> None:
    # Ctrl-C reaches the whole process group and the parent then sends SIGTERM as well: a second
    # interrupt while the first unwinds must not cut the finished units' bundle short
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def _exit_when_stdin_ends() -> None:
    sys.stdin.read()  # returns only at end of input: the parent closed it or died
    os._exit(PARENT_GONE_EXIT)


def main() -> None:
    """Run the job read from stdin."""
    job = json.loads(sys.stdin.readline())
    threading.Thread(target=_exit_when_stdin_ends, name="bitcase-parent-watch", daemon=True).start()
    # Progress owns file descriptor 1; anything else printing to stdout lands in the log instead.
    events = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def progress(event: ProgressEvent) -> None:
        events.write(json.dumps(dataclasses.asdict(event)) + "\n")
        events.flush()

    deployment = Deployment(fields=job["deployment"]["fields"], digest=job["deployment"]["digest"])
    signal.signal(signal.SIGTERM, _interrupt)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # as Python itself: a background job keeps ignoring it
        signal.signal(signal.SIGINT, _interrupt)
    try:
        records = run_suites(job["model"], job["suites"], job["scale"], job["device"], job["shard"], progress,
                             deployment=deployment, factory=job["factory"] or DEFAULT_FACTORY, label=job["label"],
                             command=job["command"], seed=PROTOCOL_SEED if job["seed"] is None else job["seed"],
                             runtime=False, worker_timeout=job.get("worker_timeout"), done=set(job.get("done", ())))
    except CompareInterrupted as exc:
        write_bundle(job["out"], exc.records)
        sys.exit(INTERRUPTED_EXIT)
    write_bundle(job["out"], records)


if __name__ == "__main__":
    main()
