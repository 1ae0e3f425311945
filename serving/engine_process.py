"""The engine's own process: it builds the engine, steps it, and reports once per step over a pipe.

The HTTP process and the engine share no interpreter lock: the engine's per-step Python (plan,
sample, commit, logprobs) never waits for the HTTP side's per-token Python, nor the reverse.
:func:`engine_main` runs in a child started with the ``spawn`` method (CUDA initialises in a
fresh process). Commands arrive as tuples on ``commands`` and are applied between steps:

- ``("add", request_id, prompt_token_ids, params, num_logprobs, num_prompt_logprobs)``
- ``("cancel", request_id)``, ``("drain", timeout_s)``, ``("stop",)``

Messages go out on ``events``: ``("status", text)`` and then ``("ready", EngineInfo)`` or
``("failed", exception)`` at start-up; afterwards one :data:`StepMessage` per step (and one per
idle wake-up that has news), ``("crashed", text)`` if the engine fails, ``("stopped",)`` last.
Row digests are computed by the engine's worker threads; a step never waits for them. A digest
ready when its step's message goes out travels in it; any other is sent by the worker thread that
finished it, as ``("digests", [(request_id, position, ok, digest or error)])``, right away rather
than with the next step's message, so a streamed token waits for its digest no longer than the
hashing takes. Both kinds of sender share one lock on the pipe, and a late digest is only ever
sent after the message that carried its token.
"""

from __future__ import annotations

import gc
import logging
import pickle
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from engine.llm_engine import BadRequestError, StepResult
from serving.events import NON_FINITE, Failed, Finished, PromptLogprobs
from serving.logprobs import prompt_entries, token_entry

__all__ = ["EngineInfo", "engine_main", "IDLE_WAIT_S", "LAST_DIGESTS_S"]

IDLE_WAIT_S = 0.05  # longest wait for a command while idle: a dead parent is noticed this fast
LAST_DIGESTS_S = 30.0  # at stop, the longest wait for digests still being computed

# ("step", [(request_id, [event, ...]), ...], [(request_id, position, ok, digest or error), ...],
#  (num_waiting, num_running, num_free_pages, num_pages), step seconds or None, tokens, prompt tokens)
# A produced token travels as the tuple (position, token, LogprobEntry or None); other events as
# the serving.events values.
StepMessage = tuple


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """What the HTTP side needs to know of the engine it serves."""

    vocab_size: int
    max_model_len: int
    eos_token_ids: tuple[int, ...]
    deployment_digest: str
    deployment_fields: dict[str, Any]
    plan_digest: str
    startup_checks: list[dict[str, Any]]
    pid: int


def _portable(exc: BaseException) -> BaseException:
    """``exc`` itself if it survives pickling (the CLI maps start-up errors by type), else its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def engine_main(start_engine: Callable[[Callable[[str], None]], tuple[Any, list[dict[str, Any]]]],
                commands: Any, events: Any) -> None:
    """Child process entry: build with ``start_engine(status)`` (engine, start-up checks), then serve."""
    import os

    # Ctrl-C reaches the whole process group and a service manager may signal every process:
    # the parent decides (drain, then stop), so the engine ignores both and follows its commands.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        engine, checks = start_engine(lambda text: events.send(("status", text)))
    except BaseException as exc:
        events.send(("failed", _portable(exc)))
        return
    # The engine lives as long as this process: everything alive now (torch, the engine, its
    # graphs) is left out of the cyclic collector's passes, so no full pass over it (about 130 ms
    # with torch loaded) stalls a decode step. Objects made while serving are collected as before.
    gc.collect()
    gc.freeze()
    events.send(("ready", EngineInfo(engine.spec.vocab_size, engine.config.max_model_len,
                                     tuple(engine.spec.eos_token_ids), engine.deployment.digest,
                                     dict(engine.deployment.fields), engine.runner.plan.digest, checks, os.getpid())))
    try:
        _Server(engine, commands, events).run()
    except (EOFError, BrokenPipeError):
        return  # the parent is gone: nobody to serve
    except BaseException as exc:
        logging.getLogger("bitcase.serve").exception("the engine stopped")
        try:
            events.send(("crashed", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass


class _Server:
    """The step loop of the engine process."""

    def __init__(self, engine: Any, commands: Any, events: Any) -> None:
        self.engine = engine
        self.commands = commands
        self.events = events
        # request id -> (prompt token ids, num_logprobs, num_prompt_logprobs)
        self.subs: dict[str, tuple[tuple[int, ...], int | None, int | None]] = {}
        self.digests: list[tuple[str, int, Any]] = []  # (request id, position, future) of this step's tokens
        self.deadline: float | None = None
        self.out: dict[str, list[Any]] = {}
        self.prompt_tokens = 0
        self.pipe = threading.Condition()  # held for every send; notified when a late digest is sent
        self.num_late = 0  # digests handed to worker threads, not yet sent

    def run(self) -> None:
        engine = self.engine
        while True:
            busy = engine.has_unfinished()
            stop = self._apply(self._receive(0 if busy else IDLE_WAIT_S))
            if stop or (self.deadline is not None and time.monotonic() >= self.deadline):
                for request_id in sorted(self.subs):
                    self._cancel(request_id, "abort")
            step_s, num_tokens = None, 0
            if engine.has_unfinished():
                started = time.perf_counter()
                result = engine.step()
                self._collect(result)
                step_s, num_tokens = time.perf_counter() - started, len(result.produced)
            self._send(step_s, num_tokens)
            if stop:
                with self.pipe:  # the last digests, then the end
                    if not self.pipe.wait_for(lambda: self.num_late == 0, LAST_DIGESTS_S):
                        logging.getLogger("bitcase.serve").warning(
                            "%d row digests were not ready %.0f s after the stop", self.num_late, LAST_DIGESTS_S)
                    self.events.send(("stopped",))
                return

    def _receive(self, timeout: float) -> list[tuple]:
        received: list[tuple] = []
        while self.commands.poll(timeout if not received else 0):
            received.append(self.commands.recv())  # EOFError: the parent closed its end
        return received

    def _apply(self, received: list[tuple]) -> bool:
        stop = False
        for command in received:
            kind = command[0]
            if kind == "add":
                self._add(*command[1:])
            elif kind == "cancel":
                self._cancel(command[1], "cancelled")
            elif kind == "drain":
                self.deadline = time.monotonic() + command[1]
            elif kind == "stop":
                stop = True
        return stop

    def _add(self, request_id: str, prompt: tuple[int, ...], params: Any, num_logprobs: int | None,
             num_prompt_logprobs: int | None) -> None:
        if request_id in self.subs:  # cannot happen with server-made ids; never let it corrupt state
            self.out.setdefault(request_id, []).append(Failed(f"request id {request_id} is already in use"))
            return
        try:
            self.engine.add_request(prompt, params, request_id=request_id)
        except BadRequestError as exc:
            self.out.setdefault(request_id, []).append(Failed(str(exc), is_client_error=True))
            return
        self.subs[request_id] = (prompt, num_logprobs, num_prompt_logprobs)
        self.prompt_tokens += len(prompt)

    def _cancel(self, request_id: str, reason: str) -> None:
        if self.subs.pop(request_id, None) is None:
            return  # finished already, or never admitted
        output = self.engine.cancel(request_id)
        cached = 0 if output is None else output.num_cached_tokens
        self.out.setdefault(request_id, []).append(Finished(reason, cached))

    def _collect(self, result: StepResult) -> None:
        for rows in result.prompt_rows:
            sub = self.subs.get(rows.request_id)
            if sub is not None and sub[2] is not None:
                self.out.setdefault(rows.request_id, []).append(
                    PromptLogprobs(rows.start, prompt_entries(rows.rows, sub[0], rows.start, sub[2])))
        for p in result.produced:
            sub = self.subs.get(p.request_id)
            if sub is None:
                continue
            # the row is read here, before the next step may reuse its host slot
            entry = None if sub[1] is None else token_entry(p.logits, p.token, sub[1])
            self.out.setdefault(p.request_id, []).append((p.position, p.token, entry))
            self.digests.append((p.request_id, p.position, p.digest))
        for output in result.finished:
            if self.subs.pop(output.request_id, None) is not None:
                end = Failed(output.error or "the engine ended the request", code=NON_FINITE) \
                    if output.finish_reason == "error" else \
                    Finished(output.finish_reason or "stop", output.num_cached_tokens)
                self.out.setdefault(output.request_id, []).append(end)

    def _send(self, step_s: float | None, num_tokens: int) -> None:
        ready, late = [], []
        for request_id, position, future in self.digests:
            (ready if future.done() else late).append((request_id, position, future))
        self.digests = []
        if not (self.out or ready or step_s is not None or self.prompt_tokens):
            return
        engine = self.engine
        state = (len(engine.scheduler.waiting), len(engine.scheduler.running),
                 engine.block_manager.num_available_pages, engine.config.num_pages)
        with self.pipe:
            self.events.send(("step", list(self.out.items()), [_digest_item(*d) for d in ready], state, step_s,
                              num_tokens, self.prompt_tokens))
            self.num_late += len(late)
        self.out, self.prompt_tokens = {}, 0
        for request_id, position, future in late:  # after their tokens' message: the pipe keeps the order
            future.add_done_callback(lambda f, r=request_id, p=position: self._send_late(r, p, f))

    def _send_late(self, request_id: str, position: int, future: Any) -> None:
        """Runs in the worker thread that finished the digest (or here, if it was done already)."""
        with self.pipe:
            self.num_late -= 1
            try:
                self.events.send(("digests", [_digest_item(request_id, position, future)]))
            except OSError:
                pass  # the parent is gone; the step loop notices on its next receive
            self.pipe.notify_all()


def _digest_item(request_id: str, position: int, future: Any) -> tuple[str, int, bool, str]:
    if future.exception() is not None:
        return request_id, position, False, f"the row digest failed: {future.exception()}"
    return request_id, position, True, future.result()
