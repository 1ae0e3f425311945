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

__all__ = ["sample", "greedy_tokens"]


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
        sorted_probs, order = torch.sort(probs, descending=True, stable=True)
        mass_before = torch.cumsum(sorted_probs, dim=0) - sorted_probs
        drop = order[mass_before >= params.top_p]
        probs = probs.index_fill(0, drop, 0.0)
    cdf = torch.cumsum(probs, dim=0)
    target = uniform(state) * float(cdf[-1])
    token = int(torch.searchsorted(cdf, torch.tensor([target], dtype=torch.float64), right=True)[0])
    # u < 1 keeps target below the total; the clamp only guards the last float rounding step
    token = min(token, vocab_size - 1)
    while probs[token] == 0.0 and token > 0:  # only reachable through that last rounding step
        token -= 1
    return token, state.advanced()


def greedy_tokens(logits: torch.Tensor) -> torch.Tensor:
    """``[S]`` int64: each row's greedy token, on the logits' device (what :func:`sample` picks greedily)."""
    # logits: [S, V] float32
    return torch.argmax(logits, dim=-1)
