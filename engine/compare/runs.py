"""What the suites need from an engine: run a set of requests and report traces plus witnesses.

The suites talk to an :class:`EngineHandle`, never to the engine's internals, so the protocol layer
tests against a fake engine and the real engine is adapted in one place (``engine_port.py``).
A handle is one engine *lifetime*: successive :meth:`EngineHandle.run` calls share its KV pool and
prefix cache (that is how the prefix suite keeps donor and reuser in one lifetime).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from engine.compare.bitwise import ObservedTrace
from engine.compare.units import RequestSpec

__all__ = ["RequestRun", "RunResult", "EngineHandle", "EngineFactory"]


@dataclass(frozen=True, slots=True)
class RequestRun:
    """One request's trace and what the engine did to it (the witnesses)."""

    trace: ObservedTrace
    cached_tokens: int  # positions attached from the prefix cache, summed over admissions
    chunk_boundaries: tuple[int, ...]  # history length computed after each prefill chunk
    num_preemptions: int = 0
    num_shared_steps: int = 0  # steps in which another request was computed alongside
    arrival_step: int = 0
    num_unfinished_at_arrival: int = 0  # other requests queued or running when this one arrived
    cancelled_at_step: int | None = None
    finish_reason: str | None = None

    @property
    def num_prefill_chunks(self) -> int:
        return len(self.chunk_boundaries)

    def witness_dict(self) -> dict[str, Any]:
        """JSON form of the witnesses (for evidence details)."""
        return {"cached_tokens": self.cached_tokens, "chunk_boundaries": list(self.chunk_boundaries),
                "num_preemptions": self.num_preemptions, "num_shared_steps": self.num_shared_steps,
                "arrival_step": self.arrival_step, "num_unfinished_at_arrival": self.num_unfinished_at_arrival,
                "cancelled_at_step": self.cancelled_at_step, "finish_reason": self.finish_reason,
                "num_positions": len(self.trace)}


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of one :meth:`EngineHandle.run`: per-request runs and engine-wide witnesses."""

    requests: Mapping[str, RequestRun]
    num_steps: int
    num_evictions: int  # registered (provenance-carrying) pages evicted during this run
    max_num_waiting_at_capacity: int = 0  # queued requests seen while the running set was full
    num_padded_steps: int = 0  # decode steps run as a padded batch (padding rows present)
    num_padded_mixed_steps: int = 0  # steps with prefill rows run padded to a graph shape
    extra: Mapping[str, Any] = field(default_factory=dict)


class EngineHandle(Protocol):
    """One engine lifetime."""

    config: Mapping[str, Any]  # the effective engine configuration (JSON-able) plus "serving_dtype"

    def run(self, requests: Sequence[RequestSpec], *, arrival_steps: Mapping[str, int] | None = None,
            cancel_steps: Mapping[str, int] | None = None) -> RunResult:
        """Run ``requests`` to completion with the step API.

        A request with an arrival step is added just before that step (0 = before the first step);
        a request with a cancel step is cancelled just before that step if still unfinished.
        """
        ...

    def close(self) -> None:
        """Release the engine."""
        ...


class EngineFactory(Protocol):
    """Opens a fresh engine lifetime for ``model_dir`` with EngineConfig overrides.

    ``expected_core`` is the digest of D's fields other than the engine limits: the engine must
    refuse to run when its own D differs from it (a suite varies limits, never anything else).
    """

    def __call__(self, model_dir: Path, overrides: Mapping[str, Any], *, perturbation: str | None = None,
                 expected_core: str | None = None) -> EngineHandle:
        ...
