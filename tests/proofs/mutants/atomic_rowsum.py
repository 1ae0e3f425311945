"""Mutant: a row sum accumulated with atomics by one program per column block."""

import triton
import triton.language as tl


@triton.jit
def rowsum_atomic(x_ptr, out_ptr, stride_x, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < N, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(x, axis=0))
