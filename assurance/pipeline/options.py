"""Options of one ``bitcase assure`` / ``bitcase refresh`` run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evidence_db.keys import SigningKey

__all__ = ["AssureOptions", "STAGES"]

# Producer stages in run order; each owns the obligations listed in ``assurance.pipeline.stages``.
STAGES = ("verify", "runtime", "properties", "compare")


@dataclass(frozen=True, slots=True)
class AssureOptions:
    """Where to read and write, what to run, and on which device."""

    db_url: str
    home: Path  # generated models and evidence bundles
    out_dir: Path  # report and diagram
    case_path: Path  # the assurance case to evaluate
    model_dir: Path | None = None  # None: the preset model made on first use
    device: str = "cpu"
    scale: str = "ci"
    devices: tuple[str, ...] = ()  # cuda:N names to split the comparison suites over (one shard each)
    is_forced: bool = False  # recompute even fresh evidence (new record ids via a run label)
    stages: tuple[str, ...] = STAGES
    is_rendering: bool = True
    signing_key: SigningKey | None = None  # signs every bundle the stages write

    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"device {self.device!r} is not cpu, cuda or cuda:N")
        if self.scale not in ("ci", "full"):
            raise ValueError(f"scale {self.scale!r} is not ci or full")
        if self.devices and (self.device == "cpu" or len(set(self.devices)) != len(self.devices)
                             or not all(d.startswith("cuda:") and d[5:].isdigit() for d in self.devices)):
            raise ValueError(f"devices {list(self.devices)}: need distinct cuda:N names and a CUDA device")
        unknown = sorted(set(self.stages) - set(STAGES))
        if unknown:
            raise ValueError(f"unknown stage(s) {', '.join(unknown)}; stages are {', '.join(STAGES)}")

    @property
    def preset(self) -> str:
        """The preset model used when no ``--model`` is given."""
        return "llama-1b" if self.scale == "full" else "tiny"
