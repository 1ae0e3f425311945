"""Plan types: requests, cold-reference jobs, comparisons and units (the unit of work and of evidence).

Torch-free. A *unit* is one piece of engine work with its comparisons (for example "groups of 4 in
reversed order" = 32 comparisons). Units are what ``--shard i/n`` distributes and what one
``test_result`` record reports, so a suite's count is the sum of its units' comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evidence_db.canonical import digest_of
from engine.sampling_params import SamplingParams

__all__ = ["RequestSpec", "ReferenceJob", "ComparisonSpec", "Unit", "engine_overrides"]


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request: a stable label, its prompt as token ids and its sampling parameters."""

    label: str
    prompt: tuple[int, ...]
    params: SamplingParams

    def to_dict(self) -> dict[str, Any]:
        """JSON form (also what a reference job's key is computed from)."""
        return {"label": self.label, "prompt": list(self.prompt), "params": self.params.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RequestSpec":
        """Inverse of :meth:`to_dict`."""
        return cls(d["label"], tuple(d["prompt"]), SamplingParams(**d["params"]))


def engine_overrides(**overrides: object) -> tuple[tuple[str, object], ...]:
    """EngineConfig overrides as a sorted, hashable tuple of pairs."""
    return tuple(sorted(overrides.items()))


@dataclass(frozen=True, slots=True)
class ReferenceJob:
    """A cold singleton run: the request alone in a fresh engine inside a fresh process.

    ``process`` names the reference process: jobs with the same name share one process (each still
    in its own fresh engine); ``"second"`` is an independent process used to show that two fresh
    processes agree.
    """

    request: RequestSpec
    engine: tuple[tuple[str, object], ...] = ()
    process: str = "first"
    # Stable key of the job's content (prompt, parameters, engine overrides, process), computed once:
    # an 8K-token prompt makes it a digest of tens of kilobytes.
    key: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", digest_of({"request": self.request.to_dict(),
                                                   "engine": [list(p) for p in self.engine],
                                                   "process": self.process}))

    @property
    def ref(self) -> str:
        """How a :class:`ComparisonSpec` names this job."""
        return "job:" + self.key


@dataclass(frozen=True, slots=True)
class ComparisonSpec:
    """One counted comparison: a candidate trace against a reference trace.

    ``mode`` is ``"full"`` (equal lengths required) or ``"prefix"`` (the candidate may be shorter, as
    a cancelled request is; its trace must equal the beginning of the reference).
    ``witnesses`` names what must be observed for the comparison to count (see ``witnesses.py``).
    """

    comparison_id: str
    candidate: str  # a request label of the unit's own runs, or "job:<ReferenceJob key>"
    # "job:<ReferenceJob key>", a request label of the unit's own runs, or "cold:<label>" for a cold
    # reference whose request is known only at run time (the suite resolves it itself)
    reference: str
    mode: str = "full"
    witnesses: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in ("full", "prefix"):
            raise ValueError(f"comparison {self.comparison_id}: mode must be 'full' or 'prefix'")


@dataclass(frozen=True, slots=True)
class Unit:
    """A unit of work and evidence. ``plan`` is suite-specific (groups, budget, scenario...)."""

    unit_id: str
    suite: str
    comparisons: tuple[ComparisonSpec, ...]
    references: tuple[ReferenceJob, ...] = ()
    plan: Any = None
    cost: int = 0  # estimated tokens processed, used only to balance shards
    requests: dict[str, RequestSpec] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        ids = [c.comparison_id for c in self.comparisons]
        if len(set(ids)) != len(ids):
            raise ValueError(f"unit {self.unit_id}: duplicate comparison ids")

    @property
    def num_comparisons(self) -> int:
        return len(self.comparisons)
