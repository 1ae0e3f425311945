"""One HTTP request's engine requests (its choices), their events, stop strings and cancellation.

Every choice is one engine request; all of an HTTP request's choices are submitted together
and report into one asyncio queue, fed from the engine loop's reader thread with ``call_soon_threadsafe``.
A choice whose text reaches a stop string is cancelled in the engine at once. Whatever ends the
handler (a finished response, a client that went away, an error) cancels what is unfinished.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import struct
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from engine.sampling_params import MAX_SEED, SamplingParams
from serving.engine_loop import EngineFailed, EngineLoop, Submission
from serving.events import Failed, Finished, LogprobEntry, PromptLogprobs, Token
from serving.stops import StopScanner
from serving.text import TextCodec

__all__ = ["ChoiceSpec", "ChoiceState", "Generation", "derived_seed", "row_digest", "DISCONNECT_POLL_S"]

DISCONNECT_POLL_S = 0.25  # how often a non-streamed request checks that its client is still there
_ids = itertools.count()


def derived_seed(seed: int, index: int) -> int:
    """Seed of choice ``index`` of a request with ``seed``: the seed itself for choice 0, so ``n=1``
    equals the same request alone; for the others a keyed hash of ``(seed, index)``, distinct per index."""
    if index == 0:
        return seed
    digest = hashlib.blake2b(struct.pack("<QQ", seed, index), digest_size=8, person=b"bitcase-n-seed").digest()
    return int.from_bytes(digest, "little") & MAX_SEED


@dataclass(frozen=True, slots=True)
class ChoiceSpec:
    """What one choice asks of the engine."""

    prompt_token_ids: tuple[int, ...]
    params: SamplingParams
    stops: tuple[str, ...]
    num_logprobs: int | None
    num_prompt_logprobs: int | None
    prompt_index: int  # which prompt of the request (completions take several)


@dataclass(slots=True)
class ChoiceState:
    """What a choice produced so far."""

    spec: ChoiceSpec
    decoder: Any
    scanner: StopScanner
    token_ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # released text, one piece per token (may be "")
    logprobs: list[LogprobEntry | None] = field(default_factory=list)
    digests: list[Any] = field(default_factory=list)  # futures of row digests
    prompt_logprobs: list[LogprobEntry] = field(default_factory=list)
    finish_reason: str | None = None
    num_cached_tokens: int = 0
    error: Failed | None = None

    @property
    def text(self) -> str:
        return "".join(self.texts)


class Generation:
    """Submits the choices and turns engine events into choice state."""

    def __init__(self, loop: EngineLoop, codec: TextCodec, specs: list[ChoiceSpec]) -> None:
        self.engine_loop = loop
        self.id = f"{next(_ids):x}"
        self.choices = [ChoiceState(s, codec.stream(), StopScanner(s.stops)) for s in specs]
        self.request_ids = [f"{self.id}-{i}" for i in range(len(specs))]
        self._queue: asyncio.Queue = asyncio.Queue()
        self._aloop = asyncio.get_running_loop()
        self._open = set(range(len(specs)))

    def _sink(self, index: int):
        def put(events: list[Any]) -> None:
            try:
                self._aloop.call_soon_threadsafe(self._queue.put_nowait, (index, events))
            except RuntimeError:  # the event loop closed: nobody listens any more
                pass
        return put

    def submit(self) -> None:
        """Hand every choice to the engine loop (raises Overloaded / Unavailable, submitting none)."""
        self.engine_loop.submit([Submission(rid, c.spec.prompt_token_ids, c.spec.params, c.spec.num_logprobs,
                                            c.spec.num_prompt_logprobs, self._sink(i))
                                 for i, (rid, c) in enumerate(zip(self.request_ids, self.choices))])

    def cancel_unfinished(self) -> None:
        for i in sorted(self._open):
            self.engine_loop.cancel(self.request_ids[i])
        self._open.clear()

    async def updates(self, is_disconnected=None) -> AsyncIterator[tuple[int, str, bool, bool]]:
        """Yield ``(choice, new text, finished, with_token)`` per token or end of a choice, until all end.

        ``with_token``: the update is a produced token (the choice's last); a stop string ends a
        choice on a token.

        ``is_disconnected`` (an async callable) is polled while waiting; when it says so the
        unfinished choices are cancelled and the iteration ends.
        """
        checked = time.monotonic()
        try:
            while self._open:
                if self._queue.empty():
                    try:
                        index, events = await asyncio.wait_for(self._queue.get(), DISCONNECT_POLL_S)
                    except asyncio.TimeoutError:
                        index, events = -1, ()
                else:  # no timer for what is already here
                    index, events = self._queue.get_nowait()
                if is_disconnected is not None and time.monotonic() - checked >= DISCONNECT_POLL_S:
                    checked = time.monotonic()  # polled on a clock: a busy stream is checked too
                    if await is_disconnected():
                        return
                for event in events:
                    if index not in self._open:
                        break  # a choice that already ended (stop string): its cancellation echo
                    update = self._apply(index, event)
                    if update is not None:
                        yield update
        finally:
            self.cancel_unfinished()

    def _apply(self, index: int, event: Any) -> tuple[int, str, bool, bool] | None:
        choice = self.choices[index]
        if isinstance(event, PromptLogprobs):
            choice.prompt_logprobs.extend(event.entries)
            return None
        if isinstance(event, Token):
            choice.token_ids.append(event.token)
            choice.logprobs.append(event.logprobs)
            choice.digests.append(event.digest)
            text = choice.scanner.feed(choice.decoder.push(event.token))
            choice.texts.append(text)
            if choice.scanner.stopped:
                choice.finish_reason = "stop"
                self._close(index, cancel=True)
                return index, text, True, True
            return index, text, False, True
        if isinstance(event, Finished):
            choice.num_cached_tokens = event.num_cached_tokens
            choice.finish_reason = event.reason
            tail = choice.scanner.feed(choice.decoder.finish())
            tail += choice.scanner.flush()
            if choice.texts:
                choice.texts[-1] += tail
            elif tail:
                choice.texts.append(tail)
            self._close(index, cancel=False)
            return index, tail, True, False
        assert isinstance(event, Failed)
        choice.error, choice.finish_reason = event, "error"
        self._close(index, cancel=False)
        return index, "", True, False

    def _close(self, index: int, *, cancel: bool) -> None:
        self._open.discard(index)
        if cancel:
            self.engine_loop.cancel(self.request_ids[index])

    async def digests(self, index: int) -> list[str | None]:
        """The row digests of a choice's tokens (they arrive after their tokens)."""
        return [await row_digest(f) for f in self.choices[index].digests]


async def row_digest(future: Any) -> str | None:
    """Await an engine digest future; shielded, since cancelling a wrapped future would cancel the
    engine loop's own. None when the engine process died before sending it (the choice then ends
    with finish reason "error")."""
    try:
        if future.done():  # the common case once a step has been dispatched: no wrapping, no wake-up
            return future.result()
        return await asyncio.shield(asyncio.wrap_future(future))
    except EngineFailed:
        return None
