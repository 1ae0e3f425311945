"""The one thread that owns the engine: admission and cancellation between steps, events out.

HTTP handlers never touch :class:`~engine.llm_engine.LLMEngine`. They hand :class:`Submission`
values and cancellations to :meth:`EngineLoop.submit` / :meth:`EngineLoop.cancel` (a locked
command list); the loop thread applies them between two steps, steps while anything is
unfinished, and sends each request's events through its ``sink`` (a callable the HTTP side
makes thread-safe with ``loop.call_soon_threadsafe``). The requests of every client share
the steps: continuous batching. The loop waits at most :data:`IDLE_WAIT_S` at a time, so a
shutdown flag is seen promptly.

The engine is built inside the thread (``torch.set_num_threads``, part of D, applies per
thread), and so are the start-up checks, so both see the thread count the engine runs with.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from engine.llm_engine import BadRequestError, StepResult
from engine.sampling_params import SamplingParams
from serving.events import Finished, Failed, PromptLogprobs, Token
from serving.logprobs import prompt_entries, token_entry
from serving.metrics import Metrics

__all__ = ["Submission", "EngineLoop", "Overloaded", "Unavailable", "IDLE_WAIT_S"]

IDLE_WAIT_S = 0.05  # longest wait for a command while idle: the shutdown flag is seen this fast


class Overloaded(RuntimeError):
    """More requests are pending than the server queues (answered 429)."""


class Unavailable(RuntimeError):
    """The server is draining, stopped or its engine failed (answered 503)."""


@dataclass(frozen=True, slots=True)
class Submission:
    """One engine request and where its events go."""

    request_id: str
    prompt_token_ids: tuple[int, ...]
    params: SamplingParams
    num_logprobs: int | None  # top-k logprobs per produced token (None: no logprobs)
    num_prompt_logprobs: int | None  # top-k per prompt position (needs params.prompt_logits)
    # called from the loop thread with a list of Token / PromptLogprobs / Finished / Failed events:
    # everything one step has for the request in one call, so the HTTP side wakes once a step
    sink: Callable[[list[Any]], None]


class EngineLoop:
    """Runs ``make_engine()`` in a dedicated thread and serves submissions until :meth:`stop`."""

    def __init__(self, make_engine: Callable[[], Any], *, max_pending: int, metrics: Metrics,
                 before_serving: Callable[[Any], None] | None = None) -> None:
        self._make_engine = make_engine
        self._before_serving = before_serving
        self.max_pending = max_pending
        self.metrics = metrics
        self._cond = threading.Condition()
        self._commands: list[tuple[str, Any]] = []
        self._num_pending = 0  # submitted and not finished (guarded by _cond)
        self._accepting = False
        self._stop = False
        self._drain_deadline: float | None = None
        self._subs: dict[str, Submission] = {}  # loop thread only
        self.engine: Any = None  # set by the loop thread once built; read-only elsewhere (D, spec)
        self.failure: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bitcase-engine-loop", daemon=True)

    # --- control (any thread) ------------------------------------------------------------------
    def start(self, *, timeout_s: float) -> None:
        """Start the thread and wait up to ``timeout_s`` for the engine (and start-up checks)."""
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"the engine did not start within {timeout_s:.0f} s")
        if self.failure is not None:
            raise self.failure

    def submit(self, subs: list[Submission]) -> None:
        """Queue submissions together, or raise :class:`Overloaded` / :class:`Unavailable`."""
        with self._cond:
            if not self._accepting:
                raise Unavailable(self.unavailable_reason())
            if self._num_pending + len(subs) > self.max_pending:
                raise Overloaded(f"{self._num_pending} requests are pending and the server queues at most "
                                 f"{self.max_pending}; retry later")
            self._num_pending += len(subs)
            self._commands.extend(("add", s) for s in subs)
            self._cond.notify()

    def cancel(self, request_id: str) -> None:
        """Cancel a request if it is still unfinished (its sink gets ``Finished('cancelled')``)."""
        with self._cond:
            self._commands.append(("cancel", request_id))
            self._cond.notify()

    def drain(self, timeout_s: float) -> None:
        """Refuse new requests; those unfinished after ``timeout_s`` finish with reason ``abort``."""
        with self._cond:
            self._accepting = False
            self._drain_deadline = time.monotonic() + timeout_s
            self._cond.notify()

    def stop(self, *, timeout_s: float) -> None:
        """Abort what is unfinished, end the thread and wait for it (at most ``timeout_s``)."""
        with self._cond:
            self._accepting = False
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout_s)

    @property
    def is_healthy(self) -> bool:
        return self._accepting and self.failure is None and self._thread.is_alive()

    def unavailable_reason(self) -> str:
        if self.failure is not None:
            return f"the engine failed and serves no more requests: {self.failure}"
        return "the server is shutting down and accepts no new requests"

    @property
    def num_pending(self) -> int:
        with self._cond:
            return self._num_pending

    # --- the loop thread -------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.engine = self._make_engine()
            if self._before_serving is not None:
                self._before_serving(self.engine)
        except BaseException as exc:  # reported by start()
            self.failure = exc
            self._ready.set()
            return
        with self._cond:
            self._accepting = not self._stop
        self._ready.set()
        try:
            self._serve()
        except BaseException as exc:  # the engine failed: every request learns it, nothing hangs
            logging.getLogger("bitcase.serve").exception("the engine loop stopped")
            self.failure = exc
            with self._cond:
                self._accepting = False
            for sub in list(self._subs.values()):
                self._finish(sub.request_id, Failed(f"the engine failed: {exc}"))

    def _serve(self) -> None:
        engine = self.engine
        while True:
            with self._cond:
                commands, self._commands = self._commands, []
                stop, deadline = self._stop, self._drain_deadline
                if not commands and not engine.has_unfinished() and not stop:
                    self._cond.wait(IDLE_WAIT_S)
                    continue
            for kind, value in commands:
                self._add(value) if kind == "add" else self._cancel(value, "cancelled")
            if stop or (deadline is not None and time.monotonic() >= deadline):
                for request_id in sorted(self._subs):
                    self._cancel(request_id, "abort")
                if stop:
                    return
            if engine.has_unfinished():
                started = time.perf_counter()
                result = engine.step()
                self._dispatch(result)
                self.metrics.observe_step(time.perf_counter() - started, len(result.produced))
            self.metrics.set_engine_state(num_waiting=len(engine.scheduler.waiting),
                                          num_running=len(engine.scheduler.running),
                                          num_free_pages=engine.block_manager.num_available_pages,
                                          num_pages=engine.config.num_pages)

    def _add(self, sub: Submission) -> None:
        if sub.request_id in self._subs:  # cannot happen with server-made ids; never let it corrupt state
            self._release(1)
            sub.sink([Failed(f"request id {sub.request_id} is already in use")])
            return
        try:
            self.engine.add_request(sub.prompt_token_ids, sub.params, request_id=sub.request_id)
        except BadRequestError as exc:
            self._release(1)
            sub.sink([Failed(str(exc), is_client_error=True)])
            return
        self._subs[sub.request_id] = sub
        self.metrics.count_prompt_tokens(len(sub.prompt_token_ids))

    def _cancel(self, request_id: str, reason: str) -> None:
        if request_id not in self._subs:
            return  # finished already, or never admitted
        output = self.engine.cancel(request_id)
        cached = 0 if output is None else output.num_cached_tokens
        self._finish(request_id, Finished(reason, cached))

    def _dispatch(self, result: StepResult) -> None:
        batches: dict[str, tuple[Callable[[list[Any]], None], list[Any]]] = {}

        def events_of(sub: Submission) -> list[Any]:
            return batches.setdefault(sub.request_id, (sub.sink, []))[1]

        for rows in result.prompt_rows:
            sub = self._subs.get(rows.request_id)
            if sub is not None and sub.num_prompt_logprobs is not None:
                events_of(sub).append(PromptLogprobs(rows.start, prompt_entries(
                    rows.rows, sub.prompt_token_ids, rows.start, sub.num_prompt_logprobs)))
        for p in result.produced:
            sub = self._subs.get(p.request_id)
            if sub is None:
                continue
            # the row is read here, before the next step may reuse its host slot
            entry = None if sub.num_logprobs is None else token_entry(p.logits, p.token, sub.num_logprobs)
            events_of(sub).append(Token(p.position, p.token, entry, p.digest))
        for output in result.finished:
            sub = self._subs.get(output.request_id)
            if sub is not None:
                events_of(sub).append(self._finished(output.request_id, Finished(
                    output.finish_reason or "stop", output.num_cached_tokens)))
        for sink, events in batches.values():
            sink(events)

    def _finish(self, request_id: str, event: Any) -> None:
        sink = self._subs[request_id].sink
        sink([self._finished(request_id, event)])

    def _finished(self, request_id: str, event: Any) -> Any:
        """Forget a request (its pending slot is free again); returns its last event."""
        self._subs.pop(request_id)
        self._release(1)
        if isinstance(event, Finished):
            self.metrics.count_finish(event.reason)
        return event

    def _release(self, count: int) -> None:
        with self._cond:
            self._num_pending -= count
