"""The outcome of verifying one (kernel, configuration): verdict, obligations, premises, trust."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from proofs.smt import Obligation
from proofs.trusted import TrustedAssumption

__all__ = ["VERDICTS", "Premise", "KernelResult"]

VERDICTS = ("VERIFIED", "REFUTED", "UNKNOWN", "UNSUPPORTED")


@dataclass(frozen=True, slots=True)
class Premise:
    text: str
    source: str  # contract | verifier
    checked: str  # "wrapper assert at line N" | "trusted"


@dataclass(slots=True)
class KernelResult:
    """Verdict of one kernel at one configuration.

    VERIFIED is a relational invariance proof under the listed premises and trusted
    assumptions: the selected output elements of two launches are bitwise equal whenever their
    related inputs are. It says nothing about numerical accuracy.
    """

    kernel: str
    key: str
    source_file: str
    source_digest: str
    contract_file: str
    configuration: dict[str, Any]
    verdict: str
    reason: str = ""
    counterexample: dict[str, Any] = field(default_factory=dict)
    obligations: list[Obligation] = field(default_factory=list)
    premises: list[Premise] = field(default_factory=list)
    trusted: list[TrustedAssumption] = field(default_factory=list)
    demand: dict[str, str] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    claim: str = ""
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    @property
    def proved(self) -> int:
        return sum(1 for o in self.obligations if o.status == "proved")

    @property
    def evidence_status(self) -> str:
        return {"VERIFIED": "pass", "REFUTED": "fail"}.get(self.verdict, "inconclusive")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["obligations_proved"] = self.proved
        d["obligations"] = [{k: v for k, v in asdict(o).items() if k != "counterexample" or v}
                            for o in self.obligations]
        return d
