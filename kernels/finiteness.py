"""The run-time attention finiteness check: what it flags, why that covers the contract's premise, CPU twins.

The paged-attention contract (kernels/contracts/paged_attention.toml) is proved under two
premises the proof cannot discharge: the q row and the K/V rows at positions up to the last
position of the token's query block are finite (``finite = true``), and float arithmetic on
finite values stays finite (``no_overflow``: the scores, the running max, the sums and the
accumulator). Two kernels that already touch those values flag, per (token, head), a violation
into a float32 ``nonfinite`` buffer (1.0 flagged, 0.0 clean) that the engine reads with the
step's logits:

* ``rope_store_kv`` (kernels/rope_store_kv.py) flags a rotated K row or a V row it writes into the
  cache that holds an inf or NaN. Attention reads only K/V rows at positions up to a block's last one, and each of
  them was written by ``rope_store_kv`` in this step or in an earlier step of the same request, or
  came from a prefix-cache page an earlier step published. A request ends at the first flagged
  step and a flagged step publishes nothing, so every K/V row attention reads carries a clean
  flag.
* ``attention_combine`` (kernels/attention_combine.py) flags a (token, head) when the running
  max m of a segment it merges, the merged sum l or the stored output (the fp32 quotient or
  its DTYPE rounding) is inf or NaN. With finite K/V this catches a non-finite q row and every
  overflow: a non-finite q component makes every score it enters non-finite (``inf * x`` is
  inf or NaN, ``0 * inf`` is NaN), so a segment's scores are all -inf (its m is -inf), or one
  is +inf or NaN (then some ``p = exp(s - m)`` is NaN and l is NaN); an overflowing score acts
  the same way; an overflowing l or acc stays inf or NaN through every later rescaling (a
  factor in [0, 1] and additions) and reaches the merged l or the output.

What stays trusted: that the hardware's float operations propagate inf and NaN as IEEE 754
says (the argument above), that the flagging code computes what it says (tests, not proofs),
and every value attention does not read (other kernels' arithmetic is checked only where it
reaches attention's inputs). Rows of decode padding are not flagged for any request.
"""

from __future__ import annotations

import torch

__all__ = ["row_flags", "any_nonfinite"]


def any_nonfinite(x: torch.Tensor, dims: int) -> torch.Tensor:
    """Bool tensor of ``x``'s leading dims: whether any of the trailing ``dims`` dims holds an inf or NaN."""
    finite = torch.isfinite(x)
    return ~finite.flatten(x.dim() - dims).all(-1) if dims else ~finite


def row_flags(*bad: torch.Tensor) -> torch.Tensor:
    """float32 1.0 where any of the equally shaped bool tensors ``bad`` is true, else 0.0."""
    out = bad[0]
    for b in bad[1:]:
        out = out | b
    return out.to(torch.float32)
