"""Deliberately non-invariant configurations for the negative control.

``batch-keyed-linear`` replaces the engine's linear op (``kernels.ops.linear``) with a BLAS matmul
(torch's default path) whose K dimension is split into ``1 + rows % 4`` partial sums: the result
of a row depends on how many rows share the launch, the defect batch-invariant kernels exist to
prevent. The original op still runs first, so plan admission and launch recording see the same
launches as an unperturbed engine; only the values change. A residual branch whose weight runs the
fixed split-K pair (``kernels.ops.linear_unfolded`` returning partials that the next norm folds)
is left unperturbed, so its launches stay those of the engine; every other projection (qkv and
gate/up always, o and down when they are not split) goes through the perturbed op.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch

__all__ = ["PERTURBATIONS", "perturbed"]


def _batch_keyed_linear(original):
    def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
               out_dtype: torch.dtype | None = None) -> torch.Tensor:
        # x: [M, K]; weight: [N, K]; bias: [N] -> out: [M, N]
        out = original(x, weight, bias, out_dtype=out_dtype)
        num_rows, k = x.shape
        num_parts = 1 + num_rows % 4
        bounds = [round(k * i / num_parts) for i in range(num_parts + 1)]  # host arithmetic: graph-capturable
        acc = torch.zeros(out.shape, dtype=torch.float32, device=x.device)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            acc += x[:, lo:hi].float() @ weight[:, lo:hi].float().T
        if bias is not None:
            acc += bias.float()
        out.copy_(acc.to(out.dtype))
        return out
    return linear


PERTURBATIONS = {"batch-keyed-linear": _batch_keyed_linear}


@contextmanager
def perturbed(name: str | None) -> Iterator[None]:
    """Within the block, the engine runs with perturbation ``name`` (None: unperturbed)."""
    if name is None:
        yield
        return
    if name not in PERTURBATIONS:
        raise ValueError(f"unknown perturbation {name!r}; known: {', '.join(PERTURBATIONS)}")
    from kernels import ops

    original = ops.linear
    ops.linear = PERTURBATIONS[name](original)
    try:
        yield
    finally:
        ops.linear = original
