"""What a suite's runner gets: the model, the scale, the engine factory and the cold-reference pool."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from engine.compare.progress import ProgressCallback, ProgressEvent
from engine.compare.references import ReferencePool
from engine.compare.runs import EngineFactory, EngineHandle
from engine.compare.scales import ScaleSpec

__all__ = ["SuiteContext", "base_overrides"]


def base_overrides(scale: ScaleSpec, device: str) -> dict[str, Any]:
    """EngineConfig fields every candidate and reference of ``scale`` starts from: D's, on ``device``.

    Graphs are captured on demand: a run starts hundreds of engines and each runs a few of D's
    graph shapes, so capturing all of them at every start would dominate a full-scale run. When a
    graph is captured changes no bit (engine/config.py); D's shapes are the same either way.
    """
    return {**dict(scale.deployment), "device": device, "graph_capture": "on_demand"}


@dataclass(slots=True)
class SuiteContext:
    """Shared by every unit of one compare run (one process, one model, one scale)."""

    model_dir: Path
    scale: ScaleSpec
    vocab_size: int
    seed: int
    device: str
    factory: EngineFactory
    references: ReferencePool
    perturbation: str | None = None
    progress: ProgressCallback | None = None
    expected_core: str | None = None  # digest of D without its engine limits (identity.core_digest)

    @property
    def base(self) -> dict[str, Any]:
        return base_overrides(self.scale, self.device)

    def open_engine(self, **overrides: Any) -> EngineHandle:
        """A fresh engine lifetime in this process: the scale's base config with ``overrides``."""
        return self.factory(self.model_dir, {**self.base, **overrides}, perturbation=self.perturbation,
                            expected_core=self.expected_core)

    def engine_config(self, **overrides: Any) -> Mapping[str, Any]:
        """The configuration :meth:`open_engine` would use (for evidence details)."""
        return {**self.base, **overrides}

    def note(self, message: str) -> None:
        """Report progress (a line for a progress bar or log)."""
        if self.progress is not None:
            self.progress(ProgressEvent("note", message))
