"""What the engine loop tells a request's handler: torch-free values, as the engine process sends them."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

__all__ = ["LogprobEntry", "Token", "PromptLogprobs", "Finished", "Failed", "NON_FINITE"]

# Failed.code of a request the engine's run-time attention finiteness check ended (engine/finiteness.py)
NON_FINITE = "non_finite_attention"


@dataclass(frozen=True, slots=True)
class LogprobEntry:
    """A token's logprob under one full row, its rank, and the row's top-k ``(token, logprob)`` pairs.

    Logprobs are float32 values held in Python floats (exact); ``rank`` is 1 + the number of
    tokens with a strictly larger logprob.
    """

    token: int
    logprob: float
    rank: int
    top: tuple[tuple[int, float], ...]


@dataclass(frozen=True, slots=True)
class Token:
    """A produced token."""

    position: int  # among the request's produced tokens
    token: int
    logprobs: LogprobEntry | None
    digest: Future  # of the full row's sha256 digest (resolves once the engine process sends it)


@dataclass(frozen=True, slots=True)
class PromptLogprobs:
    """Logprobs of prompt tokens ``start + 1 ..`` (the first prompt token has none)."""

    start: int  # row position: entry i is the logprob of prompt token start + i + 1
    entries: tuple[LogprobEntry, ...]


@dataclass(frozen=True, slots=True)
class Finished:
    """The request ended: "stop", "length", "cancelled" or "abort" (shutdown)."""

    reason: str
    num_cached_tokens: int


@dataclass(frozen=True, slots=True)
class Failed:
    """The request could not run (an engine refusal, or an engine failure), or the engine ended it
    (``code`` NON_FINITE: the run-time finiteness check flagged it)."""

    message: str
    is_client_error: bool = False
    code: str | None = None
