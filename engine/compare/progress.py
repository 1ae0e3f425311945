"""Progress events a compare run reports to its caller (a CLI progress bar, the assure pipeline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["ProgressEvent", "ProgressCallback"]


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """``kind`` is ``"start"`` (``total`` units planned for this shard), ``"note"`` (work inside a
    unit), or ``"unit"`` (a unit finished with ``status``; ``done`` of ``total`` units are done)."""

    kind: str
    message: str
    done: int = 0
    total: int = 0
    unit_id: str = ""
    status: str = ""


ProgressCallback = Callable[[ProgressEvent], None]
