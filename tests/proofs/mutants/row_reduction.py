"""Mutant: a normalisation that reduces across the rows of a tile (i.e. across requests)."""

import triton
import triton.language as tl


@triton.jit
def tile_norm(x_ptr, out_ptr, M, stride_x, stride_out, H: tl.constexpr, BLOCK_M: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, H)
    mask = rows[:, None] < M
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    scale = tl.sum(x * x, axis=0) / H  # the bug: sums over the rows of the tile, not over one row
    out = x * tl.rsqrt(scale + 1e-5)[None, :]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], out, mask=mask)
