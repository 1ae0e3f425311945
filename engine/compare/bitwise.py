"""Bitwise trace comparison: full float32 logit rows, tokens and sampler states.

Acceptance is byte equality, which is stricter than ``torch.equal`` (that one calls ``0.0 == -0.0``
equal and ``NaN`` unequal to itself): rows are compared as their int32 bit patterns after checking
shape, dtype and finiteness. An invalid trace (wrong dtype, non-finite logits, wrong shape) is an
*error*, reported apart from a numerical mismatch. Same-argmax at the first differing row is
recorded separately and never turns a mismatch into a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

__all__ = ["ObservedTrace", "Mismatch", "TraceProblem", "compare_traces", "validate_trace"]


@dataclass(frozen=True, slots=True)
class ObservedTrace:
    """A request's observable trace: one entry per produced position."""

    tokens: tuple[int, ...]
    sampler_states: tuple[tuple[int, int], ...]  # (seed, counter) after each produced position
    logits: torch.Tensor  # logits: [num_positions, vocab_size] float32, on CPU

    def __len__(self) -> int:
        return len(self.tokens)

    def head(self, n: int) -> "ObservedTrace":
        """The first ``n`` positions."""
        return ObservedTrace(self.tokens[:n], self.sampler_states[:n], self.logits[:n])


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Where two traces first differ and by how much.

    ``position`` is the produced position (0 = the row computed from the prompt). ``element`` is the
    first differing vocabulary index of that row (None when only the token or sampler state
    differs). ``largest_difference`` is max |a - b| over that row in float64.
    """

    position: int
    what: tuple[str, ...]  # subset of ("logits", "token", "sampler_state", "length")
    element: int | None = None
    largest_difference: float = 0.0
    num_differing_elements: int = 0
    num_differing_positions: int = 0
    same_argmax: bool | None = None
    candidate_token: int | None = None
    reference_token: int | None = None
    candidate_state: tuple[int, int] | None = None
    reference_state: tuple[int, int] | None = None
    candidate_length: int = 0
    reference_length: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON form for evidence details."""
        return {"first_differing_position": self.position, "what": list(self.what),
                "element_index": self.element, "largest_difference": self.largest_difference,
                "num_differing_elements": self.num_differing_elements,
                "num_differing_positions": self.num_differing_positions, "same_argmax": self.same_argmax,
                "candidate_token": self.candidate_token, "reference_token": self.reference_token,
                "candidate_sampler_state": None if self.candidate_state is None else list(self.candidate_state),
                "reference_sampler_state": None if self.reference_state is None else list(self.reference_state),
                "candidate_length": self.candidate_length, "reference_length": self.reference_length}


class TraceProblem(ValueError):
    """A trace that cannot serve as evidence (wrong dtype, shape or non-finite values)."""


def validate_trace(trace: ObservedTrace, *, name: str) -> None:
    """Raise :class:`TraceProblem` unless the trace is well formed: float32 rows, finite, one per position."""
    logits = trace.logits
    if logits.dtype != torch.float32:
        raise TraceProblem(f"{name}: logit rows are {logits.dtype}, not float32")
    if logits.dim() != 2 or logits.shape[0] != len(trace.tokens) or len(trace.sampler_states) != len(trace.tokens):
        raise TraceProblem(f"{name}: {tuple(logits.shape)} logit rows for {len(trace.tokens)} tokens and "
                           f"{len(trace.sampler_states)} sampler states")
    if logits.numel() and not bool(torch.isfinite(logits).all()):
        bad = int((~torch.isfinite(logits)).any(dim=1).nonzero()[0, 0])
        raise TraceProblem(f"{name}: non-finite logits at position {bad}")


def _row_difference(a: torch.Tensor, b: torch.Tensor) -> tuple[int | None, int, float]:
    # a, b: [vocab_size] float32 -> (first differing element, number differing, max |a - b|)
    differ = a.view(torch.int32) != b.view(torch.int32)
    count = int(differ.sum())
    if not count:
        return None, 0, 0.0
    first = int(differ.nonzero()[0, 0])
    largest = float((a.double() - b.double()).abs().max())
    return first, count, largest


def compare_traces(candidate: ObservedTrace, reference: ObservedTrace, *, mode: str = "full") -> Mismatch | None:
    """The first difference between two traces, or None when they agree bitwise.

    ``mode="full"`` requires equal lengths; ``mode="prefix"`` requires the candidate to be no longer
    than the reference and to equal its beginning (prefix comparability for a cut-short request).
    Both traces must pass :func:`validate_trace` first.
    """
    validate_trace(candidate, name="candidate")
    validate_trace(reference, name="reference")
    n_cand, n_ref = len(candidate), len(reference)
    if candidate.logits.shape[1:] != reference.logits.shape[1:]:
        raise TraceProblem(f"vocabulary sizes differ: {candidate.logits.shape[1]} vs {reference.logits.shape[1]}")
    n = min(n_cand, n_ref)
    first: Mismatch | None = None
    num_positions = 0
    for i in range(n):
        element, count, largest = _row_difference(candidate.logits[i], reference.logits[i])
        what = tuple(name for name, differs in (
            ("logits", count > 0),
            ("token", candidate.tokens[i] != reference.tokens[i]),
            ("sampler_state", candidate.sampler_states[i] != reference.sampler_states[i])) if differs)
        if not what:
            continue
        num_positions += 1
        if first is None:
            same_argmax = None
            if count:
                same_argmax = int(candidate.logits[i].argmax()) == int(reference.logits[i].argmax())
            first = Mismatch(position=i, what=what, element=element, largest_difference=largest,
                             num_differing_elements=count, same_argmax=same_argmax,
                             candidate_token=candidate.tokens[i], reference_token=reference.tokens[i],
                             candidate_state=tuple(candidate.sampler_states[i]),
                             reference_state=tuple(reference.sampler_states[i]))
    length_bad = (n_cand != n_ref) if mode == "full" else (n_cand > n_ref)
    if first is None and not length_bad:
        return None
    if first is None:
        return Mismatch(position=n, what=("length",), candidate_length=n_cand, reference_length=n_ref)
    extra = ("length",) if length_bad else ()
    return replace(first, what=first.what + extra, num_differing_positions=num_positions,
                   candidate_length=n_cand, reference_length=n_ref)
