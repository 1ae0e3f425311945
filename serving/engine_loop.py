"""The HTTP process's handle on the engine process: submissions out, each request's events in.

HTTP handlers never touch the engine. They hand :class:`Submission` values and cancellations to
:meth:`EngineLoop.submit` / :meth:`EngineLoop.cancel`, which send them down a pipe to the engine
process (serving/engine_process.py); it applies them between two steps. One reader thread here
receives the engine's one message per step and hands each request its events through its
``sink`` (a callable the HTTP side makes thread-safe with ``loop.call_soon_threadsafe``). The
requests of every client share the steps: continuous batching.

The engine runs in a process of its own so that its per-step Python and the HTTP side's
per-token Python do not take turns on one interpreter lock. A produced token's row digest comes
later than the token; here it is a :class:`~concurrent.futures.Future` resolved when it arrives.
If the engine process dies, every open request gets :class:`~serving.events.Failed`, every
awaited digest an error, and :attr:`EngineLoop.is_healthy` turns false.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable

from engine.sampling_params import SamplingParams
from serving.engine_process import EngineInfo, engine_main
from serving.events import NON_FINITE, Failed, Finished, Token
from serving.metrics import Metrics

__all__ = ["Submission", "EngineLoop", "EngineFailed", "Overloaded", "Unavailable"]

log = logging.getLogger("bitcase.serve")


class Overloaded(RuntimeError):
    """More requests are pending than the server queues (answered 429)."""


class Unavailable(RuntimeError):
    """The server is draining, stopped or its engine failed (answered 503)."""


class EngineFailed(RuntimeError):
    """The engine process failed or exited while serving."""


@dataclass(frozen=True, slots=True)
class Submission:
    """One engine request and where its events go."""

    request_id: str
    prompt_token_ids: tuple[int, ...]
    params: SamplingParams
    num_logprobs: int | None  # top-k logprobs per produced token (None: no logprobs)
    num_prompt_logprobs: int | None  # top-k per prompt position (needs params.prompt_logits)
    # called from the reader thread with a list of Token / PromptLogprobs / Finished / Failed
    # events: everything one step has for the request in one call, so the HTTP side wakes once a step
    sink: Callable[[list[Any]], None]


class EngineLoop:
    """Runs ``start_engine(status)`` (picklable; returns the engine and the start-up checks) in an
    engine process and serves submissions until :meth:`stop`."""

    def __init__(self, start_engine: Callable[[Callable[[str], None]], tuple[Any, list[dict[str, Any]]]], *,
                 max_pending: int, metrics: Metrics, on_status: Callable[[str], None] = lambda _: None) -> None:
        self._start_engine = start_engine
        self._on_status = on_status
        self.max_pending = max_pending
        self.metrics = metrics
        # the reader thread never waits for _sending: a full command pipe (the engine process busy
        # sending) then cannot stop the reader from draining the events pipe
        self._sending = threading.Lock()  # the command pipe; taken before _lock, so commands keep their order
        self._lock = threading.Lock()  # guards the fields below
        self._subs: dict[str, Submission] = {}
        self._digests: dict[tuple[str, int], Future] = {}  # (request id, position): awaited row digests
        self._accepting = False
        self._stopping = False
        self.info: EngineInfo | None = None  # set by start(): D, plan digest, limits, start-up checks
        self.failure: BaseException | None = None
        ctx = multiprocessing.get_context("spawn")  # CUDA cannot initialise in a forked child
        commands_in, self._commands = ctx.Pipe(duplex=False)
        self._events, events_out = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=engine_main, args=(start_engine, commands_in, events_out),
                                    name="bitcase-engine", daemon=True)
        self._child_ends = (commands_in, events_out)
        self._reader = threading.Thread(target=self._read, name="bitcase-engine-events", daemon=True)

    # --- control (any thread) ------------------------------------------------------------------
    def start(self, *, timeout_s: float) -> None:
        """Start the engine process and wait up to ``timeout_s`` for the engine and start-up checks."""
        self._process.start()
        for end in self._child_ends:  # so that a dead child reads as EOF here
            end.close()
        deadline = time.monotonic() + timeout_s
        while self.info is None:
            if not self._events.poll(max(0.0, min(1.0, deadline - time.monotonic()))):
                if not self._process.is_alive():
                    raise EngineFailed(f"the engine process exited during start-up (exit code "
                                       f"{self._process.exitcode}); its error output says why")
                if time.monotonic() >= deadline:
                    self._process.kill()
                    raise TimeoutError(f"the engine did not start within {timeout_s:.0f} s")
                continue
            try:
                message = self._events.recv()
            except EOFError:  # it exited before saying why: its error output has the reason
                self._process.join(5)
                raise EngineFailed(f"the engine process exited during start-up (exit code "
                                   f"{self._process.exitcode}); its error output says why") from None
            if message[0] == "status":
                self._on_status(message[1])
            elif message[0] == "failed":
                self._process.join(10)
                raise message[1]
            else:
                self.info = message[1]
        with self._lock:
            self._accepting = not self._stopping
        self._reader.start()

    def submit(self, subs: list[Submission]) -> None:
        """Queue submissions together, or raise :class:`Overloaded` / :class:`Unavailable`."""
        with self._sending:
            with self._lock:
                self._register(subs)
            self._send(*[("add", s.request_id, s.prompt_token_ids, s.params, s.num_logprobs, s.num_prompt_logprobs)
                         for s in subs])

    def _register(self, subs: list[Submission]) -> None:
        """Record ``subs`` as pending (with _lock held), or raise."""
        if not self._accepting:
            raise Unavailable(self.unavailable_reason())
        if len(self._subs) + len(subs) > self.max_pending:
            raise Overloaded(f"{len(self._subs)} requests are pending and the server queues at most "
                             f"{self.max_pending}; retry later")
        if any(s.request_id in self._subs for s in subs):  # never with server-made ids
            raise Unavailable("a request id is already in use")
        for s in subs:
            self._subs[s.request_id] = s

    def cancel(self, request_id: str) -> None:
        """Cancel a request if it is still unfinished (its sink gets ``Finished('cancelled')``)."""
        with self._sending:
            with self._lock:
                unfinished = request_id in self._subs
            if unfinished:
                self._send(("cancel", request_id))

    def drain(self, timeout_s: float) -> None:
        """Refuse new requests; those unfinished after ``timeout_s`` finish with reason ``abort``."""
        with self._sending:
            with self._lock:
                self._accepting = False
            self._send(("drain", timeout_s))

    def stop(self, *, timeout_s: float) -> None:
        """Abort what is unfinished, end the engine process and wait for it (at most ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        with self._sending:
            with self._lock:
                self._accepting, self._stopping = False, True
            self._send(("stop",))
        if self._reader.is_alive():
            self._reader.join(timeout_s)
        self._process.join(max(0.0, deadline - time.monotonic()))
        if self._process.is_alive():
            log.warning("the engine process did not stop within %.0f s; killing it", timeout_s)
            self._process.kill()
            self._process.join(5)

    @property
    def is_healthy(self) -> bool:
        return (self._accepting and self.failure is None and self._reader.is_alive()
                and self._process.is_alive())

    def unavailable_reason(self) -> str:
        if self.failure is not None:
            return f"the engine failed and serves no more requests: {self.failure}"
        return "the server is shutting down and accepts no new requests"

    @property
    def num_pending(self) -> int:
        with self._lock:
            return len(self._subs)

    def _send(self, *commands: tuple) -> None:  # with _sending held
        if self.failure is not None or not self._process.is_alive():
            return  # the reader thread fails what is open
        try:
            for command in commands:
                self._commands.send(command)
        except OSError as exc:  # the engine process went away between the check and the send
            log.warning("the engine process does not take commands: %s", exc)

    # --- the reader thread ---------------------------------------------------------------------
    def _read(self) -> None:
        try:
            while True:
                message = self._events.recv()
                if message[0] == "step":
                    self._dispatch(*message[1:])
                elif message[0] == "digests":
                    self._resolve(message[1])
                elif message[0] == "crashed":
                    raise EngineFailed(message[1])
                elif message[0] == "stopped":
                    return
        except (EOFError, OSError):
            self._process.join(1)
            self._fail(EngineFailed(f"the engine process exited (exit code {self._process.exitcode})"))
        except BaseException as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        log.error("the engine stopped: %s", exc)
        with self._lock:
            self.failure = exc
            self._accepting = False
            subs, self._subs = sorted(self._subs.items()), {}
            digests, self._digests = self._digests, {}
        for _, sub in subs:
            sub.sink([Failed(f"the engine failed: {exc}")])
        for future in digests.values():
            future.set_exception(EngineFailed(f"the engine failed before this row's digest arrived: {exc}"))

    def _resolve(self, digests: list) -> None:
        """Resolve awaited row digests: ``(request id, position, ok, digest or error)`` each."""
        with self._lock:
            resolved = [(self._digests.pop((rid, pos), None), ok, value) for rid, pos, ok, value in digests]
        for future, ok, value in resolved:
            if future is not None:
                future.set_result(value) if ok else future.set_exception(RuntimeError(value))

    def _dispatch(self, events: list, digests: list, state: tuple, step_s: float | None, num_tokens: int,
                  prompt_tokens: int) -> None:
        batches = []
        with self._lock:
            for request_id, items in events:
                sub = self._subs.get(request_id)
                if sub is None:
                    continue  # cannot happen: a request's last event is its Finished / Failed
                out = []
                for item in items:
                    if type(item) is tuple:  # a produced token: (position, token, logprobs)
                        future: Future = Future()
                        self._digests[(request_id, item[0])] = future
                        out.append(Token(item[0], item[1], item[2], future))
                    else:
                        out.append(item)
                        if isinstance(item, (Finished, Failed)):
                            del self._subs[request_id]
                            if isinstance(item, Finished):
                                self.metrics.count_finish(item.reason)
                            elif item.code == NON_FINITE:
                                self.metrics.count_finish("error")
                                self.metrics.count_non_finite()
                batches.append((sub.sink, out))
        self._resolve(digests)
        for sink, out in batches:
            sink(out)
        if step_s is not None:
            self.metrics.observe_step(step_s, num_tokens)
        if prompt_tokens:
            self.metrics.count_prompt_tokens(prompt_tokens)
        self.metrics.set_engine_state(num_waiting=state[0], num_running=state[1], num_free_pages=state[2],
                                      num_pages=state[3])
