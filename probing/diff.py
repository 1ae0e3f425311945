"""Bitwise comparison of two completions of one request, by prefix comparability.

Positions both runs produced are compared: token, chosen-token logprob, top-k tokens and their
order, top-k logprobs, and whole-row digests where the server sends them. Logprobs compare as
the exact numbers returned; ULP distances are float32 units. When the server returns no
logprobs, token ids (or, lacking those, the text) are all there is to compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from probing.floats import is_sentinel, json_safe, ulp_distance
from probing.wire import Completion, Position

__all__ = ["Difference", "compare_completions", "compare_positions", "resolution_of"]


@dataclass(frozen=True, slots=True)
class Difference:
    """Where two runs first differ, and how far apart their logprobs are anywhere."""

    step: int  # first differing position (0-based, over the compared positions)
    what: tuple[str, ...]  # what differs there: token, logprob, top-k order, top-k logprob, sentinel, row digest, text
    reference: str
    observed: str
    num_differing: int  # positions with any difference
    max_ulps: int | None  # over every pair of comparable finite logprobs
    largest: float | None

    def to_json(self) -> dict[str, Any]:
        """As an evidence-record detail."""
        return {"first_differing_position": self.step, "what": list(self.what), "reference": self.reference,
                "observed": self.observed, "num_differing_positions": self.num_differing,
                "max_ulp_distance": self.max_ulps,
                "largest_difference": None if self.largest is None else json_safe(self.largest)}

    def describe(self) -> str:
        """One line for a summary."""
        gap = f"; largest logprob difference {self.largest:.3g} ({self.max_ulps} float32 ulp)" if self.max_ulps else ""
        return f"first differs at position {self.step} ({', '.join(self.what)}){gap}"


def _pair(a: float | None, b: float | None, what: str, kinds: list[str], gaps: list[tuple[int, float]]) -> None:
    if a is None or b is None:
        if (a is None) != (b is None):
            kinds.append(what)
        return
    if a == b:
        return
    if is_sentinel(a) or is_sentinel(b):
        kinds.append("sentinel")  # a stand-in for -inf against a value: no distance to measure
        return
    kinds.append(what)
    gaps.append((ulp_distance(a, b), abs(a - b)))


def _show(p: Position) -> str:
    top = ", ".join(f"{k}={v!r}" for k, v in p.top[:3])
    return f"{p.token} logprob={p.logprob!r}" + (f" top=[{top}{', …' if len(p.top) > 3 else ''}]" if top else "")


def compare_positions(ref: tuple[Position, ...], obs: tuple[Position, ...],
                      ref_digests: tuple[str, ...] = (), obs_digests: tuple[str, ...] = ()) -> Difference | None:
    """The first difference over the positions both sequences hold, or ``None`` when equal."""
    first: tuple[int, list[str], str, str] | None = None
    gaps: list[tuple[int, float]] = []
    differing = 0
    for i in range(min(len(ref), len(obs))):
        a, b, kinds = ref[i], obs[i], []
        if a.token != b.token:
            kinds.append("token")
        _pair(a.logprob, b.logprob, "logprob", kinds, gaps)
        if [k for k, _ in a.top] != [k for k, _ in b.top]:
            kinds.append("top-k tokens or order")
        else:
            for (_, va), (_, vb) in zip(a.top, b.top):
                _pair(va, vb, "top-k logprob", kinds, gaps)
        if i < len(ref_digests) and i < len(obs_digests) and ref_digests[i] != obs_digests[i]:
            kinds.append("row digest")
        if kinds:
            differing += 1
            if first is None:
                first = (i, list(dict.fromkeys(kinds)), _show(a), _show(b))
    if first is None:
        return None
    return Difference(first[0], tuple(first[1]), first[2], first[3], differing,
                      max(g[0] for g in gaps) if gaps else None, max(g[1] for g in gaps) if gaps else None)


def compare_completions(ref: Completion, obs: Completion) -> Difference | None:
    """Compare generated positions (or the text, when the server returned no tokens)."""
    if ref.generated and obs.generated:
        return compare_positions(ref.generated, obs.generated, ref.row_digests, obs.row_digests)
    n = min(len(ref.text), len(obs.text))
    if ref.text[:n] == obs.text[:n]:
        return None
    at = next(i for i in range(n) if ref.text[i] != obs.text[i])
    return Difference(at, ("text",), repr(ref.text[at:at + 20]), repr(obs.text[at:at + 20]), 1, None, None)


def resolution_of(*, top_k: int, by_id: bool, row_digests: bool) -> str:
    """What a comparison can see, in words for the evidence summary.

    >>> resolution_of(top_k=20, by_id=True, row_digests=False)
    'token ids and top-20 float32 logprobs'
    >>> resolution_of(top_k=0, by_id=False, row_digests=False)
    'generated tokens or text only (no logprobs)'
    """
    by = "ids" if by_id else "texts"
    if not top_k:
        return "generated tokens or text only (no logprobs)"
    return f"token {by} and top-{top_k} float32 logprobs" + (" and whole logit rows by digest" if row_digests else "")
