"""What the engine does with the run-time attention finiteness check's flags (kernels/finiteness.py).

The runner reads each step's flags with its logits, per chunk (engine/model_runner.py). A flagged
chunk's request broke the premise the attention contract is proved under, so none of its rows of
that step can be trusted: it ends with finish reason ``"error"`` and an error naming the step and
positions, no token of that step is produced for it, and nothing computed in the step is
published to the prefix cache (engine/scheduler.py). The other requests of the step continue:
each kernel's contract makes their rows independent of the flagged ones. Every such event is
recorded as a :class:`NonFiniteEvent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from engine.scheduler import ScheduledChunk

__all__ = ["FINISH_REASON", "NonFiniteEvent", "flagged_chunks"]

FINISH_REASON = "error"


@dataclass(frozen=True, slots=True)
class NonFiniteEvent:
    """A request ended by the finiteness check: step, request and the positions the step computed."""

    step_index: int
    request_id: str
    start: int
    end: int

    @property
    def message(self) -> str:
        """The request's error."""
        return (f"the attention finiteness check flagged this request at step {self.step_index} (positions "
                f"{self.start}..{self.end - 1}): a K/V row, the attention state or its output held inf or NaN, "
                "which breaks the premise the attention kernels are proved under; the request was ended and "
                "nothing computed in that step was cached")

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"step_index": self.step_index, "request_id": self.request_id, "start": self.start, "end": self.end}


def flagged_chunks(step_index: int, chunks: Sequence[ScheduledChunk], flags: Sequence[bool],
                   launched_index: Sequence[int]) -> list[NonFiniteEvent]:
    """Events of the ``chunks`` whose launched chunk ``launched_index[i]`` has ``flags`` set, in plan order."""
    return [NonFiniteEvent(step_index, c.seq.request_id, c.start, c.end)
            for c, i in zip(chunks, launched_index) if flags[i]]
