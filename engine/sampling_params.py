"""Sampling parameters and the explicit per-request sampler state (torch-free).

The sampler state is ``(seed, counter)``: the counter is the number of tokens the request has
produced. The random number for a position comes only from that pair (a keyed hash, see
:func:`uniform`), never from a global generator, a batch row or an arrival order, so equal logit
rows and equal states give equal tokens and equal successor states.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

__all__ = ["SamplingParams", "SamplerState", "uniform", "MAX_SEED"]

MAX_SEED = 2**64 - 1


@dataclass(frozen=True, slots=True)
class SamplerState:
    """Where a request's sampler stands: its seed and how many tokens it has produced."""

    seed: int
    counter: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"sampler seed must be in [0, 2**64), got {self.seed}")
        if self.counter < 0:
            raise ValueError(f"sampler counter must be >= 0, got {self.counter}")

    def advanced(self) -> "SamplerState":
        """The state after one more produced token."""
        return SamplerState(self.seed, self.counter + 1)

    def to_dict(self) -> dict[str, int]:
        """JSON form."""
        return {"seed": self.seed, "counter": self.counter}


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How a request samples and when it stops.

    ``temperature == 0`` is greedy (argmax, lowest index on ties). ``top_k == 0`` and
    ``top_p == 1`` disable those filters. ``stop_token_ids=None`` stops at the model's
    end-of-sequence ids unless ``ignore_eos``. ``prompt_logits`` makes the engine compute the
    logit row of every prompt position too (for prompt logprobs); such a request never attaches
    pages from the prefix cache, so every one of its rows is computed.
    """

    max_tokens: int = 16
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    stop_token_ids: tuple[int, ...] | None = None
    ignore_eos: bool = False
    prompt_logits: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        if not isinstance(self.temperature, (int, float)) or not 0.0 <= self.temperature < float("inf"):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (0 disables it), got {self.top_k!r}")
        if not isinstance(self.top_p, (int, float)) or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be an integer in [0, 2**64), got {self.seed!r}")
        if self.stop_token_ids is not None:
            object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
            if any(not isinstance(t, int) or t < 0 for t in self.stop_token_ids):
                raise ValueError(f"stop_token_ids must be non-negative integers, got {self.stop_token_ids!r}")
        if not isinstance(self.prompt_logits, bool):
            raise ValueError(f"prompt_logits must be True or False, got {self.prompt_logits!r}")

    @property
    def is_greedy(self) -> bool:
        """Whether the token is the argmax (no randomness is drawn)."""
        return self.temperature == 0.0

    def initial_state(self) -> SamplerState:
        """The sampler state before the first produced token."""
        return SamplerState(self.seed, 0)

    def to_dict(self) -> dict[str, object]:
        """JSON form (``prompt_logits`` only when set, so the keys of earlier records stay as they were)."""
        extra: dict[str, object] = {"prompt_logits": True} if self.prompt_logits else {}
        return {"max_tokens": self.max_tokens, "temperature": self.temperature, "top_k": self.top_k,
                "top_p": self.top_p, "seed": self.seed,
                "stop_token_ids": None if self.stop_token_ids is None else list(self.stop_token_ids),
                "ignore_eos": self.ignore_eos, **extra}


def uniform(state: SamplerState) -> float:
    """A uniform float in [0, 1) determined only by ``(seed, counter)``: 53 bits of a keyed BLAKE2b."""
    digest = hashlib.blake2b(struct.pack("<QQ", state.seed, state.counter), digest_size=8,
                             person=b"bitcase-sampler").digest()
    return (int.from_bytes(digest, "little") >> 11) * (1.0 / (1 << 53))
