"""HTTP to the server under test: bounded concurrency, a timeout on every request, timestamps.

Each completion is a :class:`Call` with the monotonic times it was sent and answered, so a
scenario can show its requests overlapped. Transport errors and 429/502/503/504 answers are
retried a bounded number of times with backoff; a call that needed a retry is marked, and the
scenarios never use it as a comparison (its timing, and so its batch, is not the one planned).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import httpx

from probing.wire import Completion, WireError, parse_completion

__all__ = ["ProbeInputError", "Endpoint", "Call", "ProbeClient", "error_message", "parse_endpoint"]

_RETRY_STATUS = (429, 502, 503, 504)


class ProbeInputError(ValueError):
    """Bad input to the probe (URL, options, deployment file): the message says what and how to fix it."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The server's root URL, its OpenAI API base, what evidence may name, and a credential if given."""

    root: str
    api_base: str
    display: str  # as given, without user, password, query or fragment
    token: str | None = None


def parse_endpoint(url: str, *, api_key: str | None = None) -> Endpoint:
    """Split ``URL`` (with or without a trailing ``/v1``) into root and API base; credentials stay out of ``display``.

    >>> e = parse_endpoint("http://me:s3cret@127.0.0.1:8000/v1/?key=x")
    >>> e.root, e.api_base, e.display, e.token
    ('http://127.0.0.1:8000', 'http://127.0.0.1:8000/v1', 'http://127.0.0.1:8000/v1', 's3cret')
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProbeInputError(f"URL {url!r} is not an http(s) URL with a host",
                              hint="e.g. bitcase probe http://127.0.0.1:8000/v1 --served-model-name NAME")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    path = parts.path.rstrip("/")
    root_path = path[:-3] if path.endswith("/v1") else path
    root = urlunsplit((parts.scheme, netloc, root_path, "", ""))
    return Endpoint(root=root, api_base=root + "/v1", display=urlunsplit((parts.scheme, netloc, path, "", "")),
                    token=api_key or parts.password or None)


@dataclass(frozen=True, slots=True)
class Call:
    """One completion request: what came back (or the error), when, and after how many attempts."""

    label: str
    completion: Completion | None
    sent: float
    answered: float
    attempts: int
    error: str | None = None

    @property
    def is_usable(self) -> bool:
        """A completion that came back on its first attempt: only those are compared."""
        return self.completion is not None and self.attempts == 1

    def overlaps(self, other: "Call") -> bool:
        """Whether the two requests were in flight at the same time (as seen from the client)."""
        return self.sent < other.answered and other.sent < self.answered


class ProbeClient:
    """An async client for one endpoint; at most ``concurrency`` requests in flight."""

    def __init__(self, endpoint: Endpoint, *, timeout_s: float, concurrency: int, retries: int = 2,
                 on_answer: Callable[[Call], None] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {endpoint.token}"} if endpoint.token else {}
        self.endpoint = endpoint
        self.retries = retries
        self.timeout_s = timeout_s
        self._limit = asyncio.Semaphore(concurrency)
        self._on_answer = on_answer
        self._http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout_s),
                                       limits=httpx.Limits(max_connections=concurrency + 2), transport=transport)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def request(self, method: str, url: str, body: Any = None) -> tuple[int, Any]:
        """(status, parsed JSON or text) of one request, retried as the module says; (0, message) if unreachable."""
        status, payload, _ = await self._send(method, url, body)
        return status, payload

    async def peek(self, url: str, *, timeout_s: float) -> tuple[int, Any]:
        """One GET outside the concurrency bound, never retried: (status, JSON or whole text); (0, message) on error.

        For the server's self-reports sampled while the probe's own requests are in flight.
        """
        try:
            response = await self._http.get(url, timeout=timeout_s)
        except httpx.HTTPError as exc:
            return 0, f"{type(exc).__name__}: {exc}"
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, response.text

    async def _send(self, method: str, url: str, body: Any) -> tuple[int, Any, int]:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(method, url, json=body)
            except httpx.TimeoutException:
                status, payload = 0, f"no answer within {self.timeout_s:g} s"
            except httpx.TransportError as exc:
                status, payload = 0, f"{type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                try:
                    payload = response.json()
                except ValueError:
                    payload = response.text[:500]
            if (status == 0 or status in _RETRY_STATUS) and attempt <= self.retries:
                await asyncio.sleep(0.25 * 2 ** attempt)
                continue
            return status, payload, attempt

    async def complete(self, body: dict[str, Any], *, label: str, num_prompt: int | None = None,
                       echo: bool = False) -> Call:
        """POST one completion and parse it; errors come back in the :class:`Call`, never raised."""
        async with self._limit:
            sent = time.monotonic()
            status, payload, attempts = await self._send("POST", self.endpoint.api_base + "/completions", body)
            answered = time.monotonic()
        completion, error = None, None
        if status != 200:
            error = f"HTTP {status}: {error_message(payload)}" if status else str(payload)
        else:
            try:
                completion = parse_completion(payload, num_prompt=num_prompt, echo=echo)
            except WireError as exc:
                error = f"not a completion: {exc}"
        call = Call(label, completion, sent, answered, attempts, error)
        if self._on_answer is not None:
            self._on_answer(call)
        return call


def error_message(payload: Any) -> str:
    """The server's error message, however it nests it."""
    if isinstance(payload, dict):
        inner = payload.get("error", payload)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner.get("detail") or inner)[:300]
        return str(payload.get("detail") or inner)[:300]
    return str(payload)[:300]
