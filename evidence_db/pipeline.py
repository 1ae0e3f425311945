"""Preparing records in a second process while this one inserts them (both cores of the machine).

Reading, parsing, validating and hashing a record costs more CPU than inserting it, so for
large bundles a forked worker runs the first half of :class:`Preparer` (reading, parsing,
checking, encoding: any iterator of :class:`CheckedRecord`) and sends the records, in batches
of the store's batch size, through a pipe; this process finishes them (the content digest,
:meth:`Preparer.finish`: that balances the two processes' work) and appends them. Nothing about
the transaction changes: the worker never touches the database, the caller still inserts
everything in its one transaction and commits only at the end. An error in the worker (a bad
record) travels back as the same :class:`BundleError` with the same text, after the records
before it, so errors surface in record order, where a single process would raise them: after
the batches before were appended, before its own batch. The pipe holds at most a batch or
two, so memory stays flat; if this process dies, the worker's next send fails and it exits;
if the worker dies, this process raises :class:`StoreError`.
"""

from __future__ import annotations

import gc
import multiprocessing
import pickle
import signal
import sys
import traceback
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Callable, Iterable, Iterator

from evidence_db.errors import BundleError, StoreError
from evidence_db.prepare import CheckedRecord, PreparedRecord, Preparer

__all__ = ["prepared_in_worker", "can_use_worker"]

_BATCH, _END, _INPUT_ERROR, _CRASH = "batch", "end", "input-error", "crash"


def can_use_worker() -> bool:
    """Whether the worker is used here: on Linux (fork is safe there; macOS system libraries may not survive it)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


@contextmanager
def prepared_in_worker(produce: Callable[[], Iterable[CheckedRecord]], *,
                       batch_size: int) -> Iterator[Iterator[PreparedRecord]]:
    """The records ``produce()`` yields, checked in a forked worker process and finished here.

    Use as ``with prepared_in_worker(fn, batch_size=n) as records: ...``; leaving the block
    (normally or by an exception) stops the worker. ``produce`` runs in the worker only.
    """
    context = multiprocessing.get_context("fork")  # the worker needs no imports and no pickled target
    receiver, sender = context.Pipe(duplex=False)
    worker = context.Process(target=_work, args=(produce, sender, receiver, batch_size),
                             name="bitcase-ingest-prepare", daemon=True)
    worker.start()
    sender.close()  # this process only reads: the worker's end must be the last writer
    try:
        yield _receive(receiver, worker)
    finally:
        receiver.close()
        if worker.is_alive():
            worker.terminate()
        worker.join()


def _receive(receiver: Connection, worker: multiprocessing.process.BaseProcess) -> Iterator[PreparedRecord]:
    make, finish = CheckedRecord._make, Preparer().finish
    while True:
        try:
            kind, payload = pickle.loads(receiver.recv_bytes())
        except EOFError:
            worker.join(timeout=5)
            raise StoreError(f"the process preparing records stopped unexpectedly (exit code {worker.exitcode})",
                             hint="it may have run out of memory or been killed; run the ingest again") from None
        if kind == _BATCH:
            for row in payload:
                yield finish(make(row))
        elif kind == _END:
            return
        elif kind == _INPUT_ERROR:
            raise _rebuild(*payload)
        else:
            raise RuntimeError(f"preparing records failed in the worker process:\n{payload}")


def _rebuild(cls: type[BundleError], message: str, where: str, field: str, hint: str | None) -> BundleError:
    """The worker's input error, with the same class, text, place and hint."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.hint, error.where, error.field = hint, where, field
    return error


def _work(produce: Callable[[], Iterable[CheckedRecord]], sender: Connection, receiver: Connection,
          batch_size: int) -> None:
    receiver.close()  # else this process would keep the pipe open and never see the parent go
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops this worker
    gc.freeze()  # the parent's objects, inherited: never scanned here (and their pages never copied for it)
    dumps, protocol = pickle.dumps, pickle.HIGHEST_PROTOCOL
    try:
        try:
            batch: list[tuple] = []
            for record in produce():
                batch.append(tuple(record))
                if len(batch) == batch_size:
                    sender.send_bytes(dumps((_BATCH, batch), protocol))
                    batch = []
            if batch:
                sender.send_bytes(dumps((_BATCH, batch), protocol))
            message = (_END, None)
        except BundleError as exc:
            if batch:  # the records before the bad one: finishing them may find an earlier error
                sender.send_bytes(dumps((_BATCH, batch), protocol))
            message = (_INPUT_ERROR, (type(exc), str(exc), exc.where, exc.field, exc.hint))
        except Exception:  # a bug: hand its traceback to the parent, which reports it
            message = (_CRASH, traceback.format_exc())
        sender.send_bytes(dumps(message, protocol))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent stopped reading (it failed or was killed): nothing left to do
    finally:
        sender.close()
