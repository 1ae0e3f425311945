"""Per-request observable traces and prefix comparability (study §2.3).

A trace is the request's prompt and initial sampler state, then for each produced position the
full float32 logit row (or only its digest when rows are not kept), the chosen token and the
sampler state after the step. Two traces of the same request agree when the shorter equals the
beginning of the longer, bitwise.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from engine.sampling_params import SamplerState

__all__ = ["TraceEntry", "Trace", "Difference", "TraceComparison", "compare_traces", "row_digest"]


def row_digest(row: torch.Tensor) -> str:
    """``sha256:<hex>`` of a float32 row's bytes (bitwise identity, NaN payloads included).

    The row's memory is hashed in place (no copy); hashlib releases the GIL while it hashes,
    so worker threads can digest rows while the engine steps (engine/row_digests.py).
    """
    data = row.detach()
    if data.device.type != "cpu" or data.dtype != torch.float32 or not data.is_contiguous():
        data = data.to("cpu", torch.float32).contiguous()
    return "sha256:" + hashlib.sha256(data.numpy()).hexdigest()


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One produced position."""

    position: int  # index among the produced tokens (0 = first produced)
    token: int
    sampler_state: SamplerState  # after this step
    logits_digest: str
    logits: torch.Tensor | None = None  # [V] float32 on the CPU, when rows are kept


@dataclass(slots=True)
class Trace:
    """The observable trace of one request."""

    prompt_token_ids: tuple[int, ...]
    initial_state: SamplerState
    entries: list[TraceEntry] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def token_ids(self) -> list[int]:
        return [e.token for e in self.entries]


@dataclass(frozen=True, slots=True)
class Difference:
    """Where two traces first differ."""

    position: int
    what: str  # "logits", "token" or "sampler_state"
    element_index: int | None = None  # first differing vocabulary index (rows kept on both sides)
    max_abs_diff: float | None = None  # largest |a - b| over the row (inf/nan when non-finite)
    detail: str = ""

    def describe(self) -> str:
        """One line for reports."""
        where = f"position {self.position}: {self.what} differ"
        if self.element_index is not None:
            where += f" first at element {self.element_index}, largest |diff| {self.max_abs_diff:.6g}"
        return where + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True, slots=True)
class TraceComparison:
    """The verdict of :func:`compare_traces`."""

    agree: bool  # prefix comparable
    num_compared: int  # positions compared (the shorter trace's length)
    first_difference: Difference | None = None


def _row_difference(position: int, a: torch.Tensor, b: torch.Tensor) -> Difference:
    if a.shape != b.shape:
        return Difference(position, "logits", None, None, f"shapes {tuple(a.shape)} vs {tuple(b.shape)}")
    index = int(torch.nonzero(a.view(torch.int32) != b.view(torch.int32))[0, 0])
    max_abs = float((a.to(torch.float64) - b.to(torch.float64)).abs().max())
    return Difference(position, "logits", index, max_abs)


def compare_traces(a: Trace, b: Trace) -> TraceComparison:
    """Decide prefix comparability of two traces of the same request and locate the first difference.

    Raises ``ValueError`` when the traces belong to different requests (prompt or initial
    sampler state differ): the claim says nothing about those.
    """
    if a.prompt_token_ids != b.prompt_token_ids or a.initial_state != b.initial_state:
        raise ValueError("traces of different requests (prompt or initial sampler state differ) are not comparable")
    num = min(len(a), len(b))
    for i in range(num):
        x, y = a.entries[i], b.entries[i]
        if x.logits_digest != y.logits_digest:
            if x.logits is not None and y.logits is not None:
                return TraceComparison(False, num, _row_difference(i, x.logits, y.logits))
            return TraceComparison(False, num, Difference(i, "logits", detail="digests differ; rows not kept"))
        if x.token != y.token:
            return TraceComparison(False, num, Difference(i, "token", detail=f"{x.token} vs {y.token}"))
        if x.sampler_state != y.sampler_state:
            return TraceComparison(False, num, Difference(i, "sampler_state",
                                                          detail=f"{x.sampler_state} vs {y.sampler_state}"))
    return TraceComparison(True, num)
