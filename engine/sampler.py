"""Token choice from one float32 logit row and the request's explicit sampler state.

Each row is sampled on its own (no batched op can couple rows) on the CPU in float64, and the
only randomness is :func:`engine.sampling_params.uniform` of ``(seed, counter)``. So the token
and the successor state are a function of (row, parameters, state) alone.

Greedy rows may be chosen on the device instead (:func:`greedy_tokens`): an argmax returns an
index, computed by comparisons only, with the same rule (first index of the maximum, NaN
counting as the maximum) on every device, so the token is the one :func:`sample` would choose.
"""

from __future__ import annotations

import torch

from engine.sampling_params import SamplerState, SamplingParams, uniform

__all__ = ["sample", "nucleus", "whole_row_cut", "greedy_tokens", "split_argmax"]

# The top-p cut sorts first the entries within these fractions of the row's largest probability.
NUCLEUS_LEVELS = (2.0**-8, 2.0**-16, 2.0**-32)


def sample(row: torch.Tensor, params: SamplingParams, state: SamplerState) -> tuple[int, SamplerState]:
    """Choose a token from ``row`` ([V] float32); return it with the state after this step.

    Greedy is the first index of the maximum. Otherwise: scale by temperature, keep the
    ``top_k`` largest logits (ties at the k-th value all kept), softmax, keep the smallest
    most-probable set whose mass reaches ``top_p``, then invert the CDF (in vocabulary order)
    at one uniform number.
    """
    # row: [V] float32
    if row.dim() != 1 or row.dtype != torch.float32:
        raise ValueError(f"sample expects a [V] float32 row, got {tuple(row.shape)} {row.dtype}")
    if params.is_greedy:
        return int(torch.argmax(row)), state.advanced()
    x = row.detach().to("cpu", torch.float64) / params.temperature
    vocab_size = x.shape[0]
    if 0 < params.top_k < vocab_size:
        kth = torch.topk(x, params.top_k, sorted=True).values[-1]
        x = torch.where(x < kth, torch.full_like(x, float("-inf")), x)
    probs = torch.softmax(x, dim=0)
    if params.top_p < 1.0:
        probs = nucleus(probs, params.top_p)
    cdf = torch.cumsum(probs, dim=0)
    target = uniform(state) * float(cdf[-1])
    token = int(torch.searchsorted(cdf, torch.tensor([target], dtype=torch.float64), right=True)[0])
    # u < 1 keeps target below the total; the clamp only guards the last float rounding step
    token = min(token, vocab_size - 1)
    while probs[token] == 0.0 and token > 0:  # only reachable through that last rounding step
        token -= 1
    return token, state.advanced()


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """``probs`` ([V] float64, from a softmax) with every entry outside the smallest most-probable
    set of mass ``top_p`` zeroed, bit for bit the cut of a stable descending sort of the whole row.

    That cut drops the sorted entries whose mass before them (cumsum minus the entry) reaches
    ``top_p``: a suffix, since that mass never decreases along a descending order. The entries at
    least some value are exactly the sort's first ones, in the same (stable) order, and a cumsum
    is sequential, so sorting only them gives the same masses: when the cut falls among them, it
    is the whole row's cut. So the row's entries within :data:`NUCLEUS_LEVELS` of its largest are
    tried first, narrowest first, each only if it holds about ``top_p`` of the mass and at most half
    the row (guesses that can cost time, never bits); then the whole row (at once when it holds a
    NaN, which orders apart).
    """
    # probs: [V] float64
    largest = probs.max()  # NaN when the row holds one
    if not bool(torch.isnan(largest)):
        for level in NUCLEUS_LEVELS:
            is_candidate = probs >= largest * level
            if 2 * int(is_candidate.sum()) > probs.shape[0]:
                break
            if float(torch.where(is_candidate, probs, 0.0).sum()) >= top_p:
                candidates = torch.nonzero(is_candidate).squeeze(1)  # ascending: the stable order of ties
                sorted_probs, order = torch.sort(probs[candidates], descending=True, stable=True)
                is_cut = (torch.cumsum(sorted_probs, dim=0) - sorted_probs) >= top_p
                if bool(is_cut.any()):
                    keep = candidates[order[~is_cut]]
                    return torch.zeros_like(probs).index_copy_(0, keep, probs[keep])
    return whole_row_cut(probs, top_p)


def whole_row_cut(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The top-p cut by its definition: a stable descending sort of the whole row ([V] float64)."""
    sorted_probs, order = torch.sort(probs, descending=True, stable=True)
    mass_before = torch.cumsum(sorted_probs, dim=0) - sorted_probs
    return probs.index_fill(0, order[mass_before >= top_p], 0.0)


# bench/greedy_tokens.py, H100, 4 rows of 128,256, torch (split_argmax) / Triton (kernels/greedy.py): 64 parts
# 15.4 / 3.94 us, 128 12.4 / 3.93, 256 11.4 / 3.95, 1,002 11.3 / 6.37
_MAX_PARTS = 256
_MIN_PART_LEN = 256


def _num_parts(vocab_size: int) -> int:
    """Equal parts a row is split into for :func:`greedy_tokens`: a power of two dividing it, parts of at least _MIN_PART_LEN."""
    parts = 1
    while parts < _MAX_PARTS and vocab_size % (2 * parts) == 0 and vocab_size // (2 * parts) >= _MIN_PART_LEN:
        parts *= 2
    return parts


def greedy_tokens(logits: torch.Tensor) -> torch.Tensor:
    """``[S]`` int64: each row's greedy token, on the logits' device (what :func:`sample` picks greedily).

    A row is split into equal parts (one GPU reduction over a whole 128K row runs on a handful
    of thread blocks): the first maximal index of each part, then the first part whose maximum
    is the row's. That part holds the row's first maximal index and it is the one its argmax
    found, so the result equals ``torch.argmax(row)``, NaN counting as the maximum (a part with a
    NaN has NaN as its maximum, and the first such part holds the first NaN).
    """
    # logits: [S, V] float32
    if logits.is_cuda:  # two Triton launches instead of split_argmax's four torch kernels (same index)
        from kernels.greedy import greedy_argmax

        return greedy_argmax(logits, _num_parts(logits.shape[1]))
    return split_argmax(logits, _num_parts(logits.shape[1]))


def split_argmax(logits: torch.Tensor, parts: int) -> torch.Tensor:
    """``[S]`` int64 ``torch.argmax(logits, dim=-1)`` of ``logits`` [S, V] through ``parts`` equal parts
    (a divisor of V) of each row, as :func:`greedy_tokens` describes."""
    num_rows, vocab_size = logits.shape
    assert vocab_size % parts == 0, f"{parts} parts do not divide a row of {vocab_size}"
    if parts == 1:
        return torch.argmax(logits, dim=-1)
    pieces = logits.view(num_rows, parts, vocab_size // parts)  # [S, P, V/P]
    # [S, P] each part's maximum and its first maximal index (one reduction: max with indices is argmax's)
    best, where = torch.max(pieces, dim=-1)
    part = torch.argmax(best, dim=-1, keepdim=True)  # [S, 1]: first part holding the row's maximum
    # four kernels in all, each a launch of a decode step's graph
    return torch.add(torch.gather(where, 1, part).squeeze(1), part.squeeze(1), alpha=vocab_size // parts)
