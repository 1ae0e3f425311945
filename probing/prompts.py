"""Prompts for one probe run: fresh token ids (or words) from the run's seed.

A fresh seed per run makes every prompt's first use its first use ever on that server, so a
cold run needs no cache control; ``--seed`` repeats a run's prompts exactly.
"""

from __future__ import annotations

import random

__all__ = ["PromptMaker", "FIRST_ID"]

FIRST_ID = 3  # ids below this are often special (padding, begin, end)
_WORDS = ("the of and to in is was for on that with as by at from his her it an were are which this be or "
          "has had not but one all their they there been have new more when who will after its also two first "
          "time into only other some could over than then them these such can like may most made about years "
          "many would where well while city world three part between later during under both each early name "
          "number year state made work much long small great house water place river light north south").split()


class PromptMaker:
    """Token-id prompts below ``vocab`` (or word prompts when ids are not accepted) from ``seed``."""

    def __init__(self, *, seed: int, vocab: int, token_ids: bool) -> None:
        self._rng = random.Random(seed)
        self.vocab = vocab
        self.token_ids = token_ids

    def make(self, length: int) -> list[int] | str:
        """A new prompt of ``length`` tokens (words, when the server takes only text)."""
        if self.token_ids:
            return [self._rng.randrange(FIRST_ID, self.vocab) for _ in range(length)]
        return " ".join(self._rng.choice(_WORDS) for _ in range(length))

    def extend(self, prefix: list[int] | str, length: int) -> list[int] | str:
        """``prefix`` followed by ``length`` new tokens."""
        suffix = self.make(length)
        return prefix + suffix if isinstance(prefix, list) else f"{prefix} {suffix}"
