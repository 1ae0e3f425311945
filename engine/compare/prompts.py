"""Deterministic prompts as token ids (never text): a prompt is a function of (seed, label, length).

Torch-free. Labels are stable names such as ``"batch.p07"``; the same label always gives the same
ids, so a shard on another machine rebuilds exactly the prompts of the full run.
"""

from __future__ import annotations

import hashlib
import random

__all__ = ["prompt_ids", "extend_ids", "first_page_collisions"]


def _rng(seed: int, label: str) -> random.Random:
    # A digest of the label (not Python's salted str hash) keeps the stream identical across processes.
    key = hashlib.sha256(f"{seed}:{label}".encode("utf-8")).digest()
    return random.Random(int.from_bytes(key[:16], "little"))


def prompt_ids(seed: int, label: str, length: int, vocab_size: int) -> tuple[int, ...]:
    """``length`` token ids in ``[1, vocab_size)`` drawn from a stream keyed by ``(seed, label)``.

    Id 0 is left out because checkpoints often use it for padding.

    >>> prompt_ids(7, "demo", 4, 256) == prompt_ids(7, "demo", 4, 256)
    True
    >>> len(prompt_ids(7, "demo", 5, 256))
    5
    """
    if length < 1:
        raise ValueError(f"prompt {label!r}: length must be >= 1, got {length}")
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
    rng = _rng(seed, label)
    return tuple(rng.randrange(1, vocab_size) for _ in range(length))


def extend_ids(base: tuple[int, ...], seed: int, label: str, length: int, vocab_size: int) -> tuple[int, ...]:
    """``base`` followed by ``length`` fresh ids keyed by ``label`` (a suffix distinct from other labels)."""
    return tuple(base) + prompt_ids(seed, label, length, vocab_size)


def first_page_collisions(prompts: dict[str, tuple[int, ...]], page_size: int) -> list[tuple[str, str]]:
    """Pairs of labels whose first full pages are equal (they could share cached KV by accident).

    Suites that must not see prefix-cache hits between prompts check this is empty.
    """
    seen: dict[tuple[int, ...], str] = {}
    pairs: list[tuple[str, str]] = []
    for label in sorted(prompts):
        ids = prompts[label]
        if len(ids) < page_size:
            continue
        head = ids[:page_size]
        if head in seen:
            pairs.append((seen[head], label))
        else:
            seen[head] = label
    return pairs
