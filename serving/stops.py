"""Stop strings over incrementally decoded text.

Text that could be the beginning of a stop string is held back, so no client ever sees part of
a stop string; when one appears, the text before it is the choice's last text. Streamed and
non-streamed responses run the same code, so their texts are equal.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["StopScanner"]


class StopScanner:
    """Feed decoded text with :meth:`feed`; :attr:`stopped` once a stop string appeared."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(stops)
        self.stopped = False
        self._held = ""

    def feed(self, text: str) -> str:
        """The text that may be released now."""
        if self.stopped:
            return ""
        held = self._held + text
        if not self.stops:
            return held
        found = [i for i in (held.find(s) for s in self.stops) if i >= 0]
        if found:
            self.stopped, self._held = True, ""
            return held[:min(found)]
        keep = max((k for s in self.stops for k in range(min(len(s) - 1, len(held)), 0, -1)
                    if held.endswith(s[:k])), default=0)
        self._held = held[len(held) - keep:] if keep else ""
        return held[:len(held) - keep]

    def flush(self) -> str:
        """What is still held (the request ended without a stop string)."""
        held, self._held = self._held, ""
        return "" if self.stopped else held
