"""Arithmetic for the CPU path that is position-independent by construction.

The CPU path may only combine values with operations whose result for one element is a fixed
function of that element's operands, wherever the element sits in the tensor:

* correctly rounded IEEE-754 ``+ - * /`` and ``sqrt`` (one torch op each, never fused:
  ``addcmul``/``addmm`` may contract to FMA in one code path and not in another);
* exact operations: ``floor``, ``clamp``, ``where``, ``maximum``, integer arithmetic, bit casts,
  dtype casts (round-to-nearest-even), gathers and copies.

Reductions are written out as a fixed pairwise tree of elementwise adds, so their order is a
function of the reduced length alone. Transcendentals are polynomials in the ops above: torch's
own ``exp``/``sigmoid`` switch between a vectorised body and a scalar tail whose results differ
in the last bit (measured for ``sigmoid`` with torch 2.13 on AVX2), and where the tail falls
depends on the tensor's total size and thread split. BLAS matmuls are not used at all: their
blocking depends on M.
"""

from __future__ import annotations

import torch

__all__ = ["tree_sum", "exp", "rsqrt"]

_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375  # 9 significant bits: n * _LN2_HI is exact for |n| < 2**15
_LN2_LO = -2.12194440e-4
# Cephes expf minimax polynomial for exp(r) on |r| <= ln(2)/2 (about 1 ulp).
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
# exp(x) is 0 in float32 below about -103.97 and inf above about 88.72; inside the clamp both
# halves of 2**n stay normal, so the final product is the only rounding of the scale.
_EXP_MIN, _EXP_MAX = -104.0, 89.0


def tree_sum(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Sum over ``dim`` in a fixed pairwise order that depends only on the length of ``dim``.

    The length is zero-padded to a power of two ``w``; each step adds element ``i`` and element
    ``i + w/2`` of the previous level. Every output element is the same expression tree of
    correctly rounded adds on its own inputs, so it is independent of the other elements.
    """
    x = x.movedim(dim, -1)
    length = x.shape[-1]
    if length == 0:
        return x.new_zeros(x.shape[:-1])
    width = 1 << (length - 1).bit_length()
    if width != length:
        x = torch.cat([x, x.new_zeros(*x.shape[:-1], width - length)], dim=-1)
    while width > 1:
        width //= 2
        x = x[..., :width] + x[..., width:]
    return x[..., 0]


def exp(x: torch.Tensor) -> torch.Tensor:
    """``exp`` of a float32 tensor from position-independent ops (Cody-Waite + Cephes polynomial).

    ``exp(-inf)`` is exactly ``+0.0`` (masked attention scores rely on it), ``exp(+inf)`` is
    ``inf``, NaN stays NaN, results below the float32 range flush towards zero like IEEE
    rounding does. Accuracy: within 2 ulp of the correctly rounded value on normal results.
    """
    if x.dtype != torch.float32:
        raise TypeError(f"cpu_math.exp expects float32, got {x.dtype}")
    xc = x.clamp(_EXP_MIN, _EXP_MAX)  # -inf -> -104, whose result below rounds to exactly +0.0
    n = torch.floor(xc * _LOG2E + 0.5)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = r * _EXP_POLY[0] + _EXP_POLY[1]
    for coefficient in _EXP_POLY[2:]:
        p = p * r + coefficient
    y = (p * (r * r) + r) + 1.0
    n_int = n.to(torch.int32)
    n_low = n_int >> 1  # floor(n / 2)
    scale_low = ((n_low + 127) << 23).view(torch.float32)  # 2**n_low, exact
    scale_high = ((n_int - n_low + 127) << 23).view(torch.float32)  # 2**(n - n_low), exact
    return (y * scale_low) * scale_high


def rsqrt(x: torch.Tensor) -> torch.Tensor:
    """``1 / sqrt(x)`` from two correctly rounded ops."""
    return 1.0 / torch.sqrt(x)
