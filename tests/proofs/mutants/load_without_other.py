"""Mutant: an RMSNorm whose masked load has no ``other``, so padding lanes enter the sum undefined."""

import triton
import triton.language as tl


@triton.jit
def rms_norm_no_other(x_ptr, w_ptr, out_ptr, stride_x, stride_out, H, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    mask = offs < H
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask)  # the bug: lanes past H are undefined
    var = tl.sum(x * x, axis=0) / H
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_out + offs, x * tl.rsqrt(var + 1e-5) * w, mask=mask)
