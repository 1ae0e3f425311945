"""Deterministic sharding: ``--shard i/n`` assigns whole units to shard ``i`` of ``n``.

Torch-free. Every machine builds the same unit list (same seed, same scale), so each computes the
same assignment without talking to the others. Units are assigned longest first to the least loaded
shard (ties to the lowest shard), using each unit's static cost estimate; the shards partition the
units, so ingesting all ``n`` shards gives exactly the full counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from engine.compare.units import Unit

__all__ = ["Shard", "parse_shard", "assign", "select"]

_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: need 1 <= i <= n")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """Parse ``"i/n"`` (1-based).

    >>> parse_shard("2/3")
    Shard(index=2, count=3)
    """
    m = _SHARD_RE.match(text or "")
    if not m:
        raise ValueError(f"shard {text!r} is not of the form i/n (for example 1/4)")
    return Shard(int(m.group(1)), int(m.group(2)))


def assign(units: Sequence[Unit], count: int) -> dict[str, int]:
    """Unit id -> shard index (1-based), longest first onto the least loaded shard."""
    loads = [0] * count
    out: dict[str, int] = {}
    for unit in sorted(units, key=lambda u: (-u.cost, u.unit_id)):
        target = min(range(count), key=lambda i: (loads[i], i))
        loads[target] += max(unit.cost, 1)
        out[unit.unit_id] = target + 1
    return out


def select(units: Sequence[Unit], shard: Shard) -> list[Unit]:
    """The units of ``shard``, in plan order."""
    owner = assign(units, shard.count)
    return [u for u in units if owner[u.unit_id] == shard.index]
