"""Logprobs from full float32 logit rows, computed the same way for every request.

``log_softmax`` in float32 on the CPU over the whole row, one row at a time: a row's logprobs
depend only on its bits (and D's thread count), never on other requests. The values are the
model's distribution before temperature, top-k and top-p (vLLM's ``raw_logprobs``). Ties in
the top-k order go to the lower token id.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from serving.events import LogprobEntry

__all__ = ["row_logprobs", "token_entry", "prompt_entries", "json_logprob", "NEG_INF_LOGPROB"]

NEG_INF_LOGPROB = -9999.0  # what JSON gets for -inf (JSON has no infinities; vLLM sends the same)


def row_logprobs(row: torch.Tensor) -> torch.Tensor:
    """``[V]`` float32 logprobs of one ``[V]`` float32 logit row."""
    return torch.log_softmax(row.to("cpu", torch.float32), dim=0)


def _top(lp: torch.Tensor, k: int) -> tuple[tuple[int, float], ...]:
    if k <= 0:
        return ()
    threshold = torch.topk(lp, min(k, lp.shape[0])).values[-1]
    candidates = torch.nonzero(lp >= threshold).flatten()  # ascending ids; ties at the threshold all in
    order = torch.sort(lp[candidates], descending=True, stable=True).indices[:k]
    ids = candidates[order]
    return tuple((int(i), float(lp[i])) for i in ids)


def _entry(lp: torch.Tensor, token: int, k: int) -> LogprobEntry:
    value = lp[token]
    rank = int((lp > value).sum()) + 1
    return LogprobEntry(token, float(value), rank, _top(lp, k))


def token_entry(row: torch.Tensor, token: int, k: int) -> LogprobEntry:
    """The entry of ``token`` under ``row`` with the row's top ``k``."""
    return _entry(row_logprobs(row), token, k)


def prompt_entries(rows: torch.Tensor, prompt: Sequence[int], start: int, k: int) -> tuple[LogprobEntry, ...]:
    """Entries for prompt tokens ``start + 1 ..``: row ``i`` (position ``start + i``) scores the next token."""
    return tuple(_entry(row_logprobs(rows[i]), prompt[start + i + 1], k) for i in range(rows.shape[0]))


def json_logprob(value: float) -> float | None:
    """A logprob as JSON carries it: exact, -inf as :data:`NEG_INF_LOGPROB`, NaN as null."""
    if math.isnan(value):
        return None
    return NEG_INF_LOGPROB if value == -math.inf else value
