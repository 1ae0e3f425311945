"""Mutant: an RMSNorm launched with programmatic dependent launch whose grid-dependency wait sits
under a constexpr the plan leaves off, so the kernel never waits: it may read x while the launch
before it is still writing it.
"""

import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_out, H: tl.constexpr, BLOCK_H: tl.constexpr,
                    EPS: tl.constexpr, DTYPE: tl.constexpr, PDL: tl.constexpr, WAIT: tl.constexpr = False):
    # x, out: [T, H] with row strides as given; w: [H]
    if WAIT:
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    mask = offs < H
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=0) / H
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + offs, (x * tl.rsqrt(var + EPS) * w).to(DTYPE), mask=mask)
