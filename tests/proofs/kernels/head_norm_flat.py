"""Positive control: per-head RMS norm on a flattened grid, one program per (token, head).

Program id ``pid`` is token ``pid // NUM_HEADS`` and head ``pid % NUM_HEADS``; NUM_HEADS need
not be a power of two, so the writer witness inverts a division by a general constant.
"""

import triton
import triton.language as tl


@triton.jit
def head_norm_kernel(x_ptr, w_ptr, out_ptr, stride_xt, stride_ot, eps, NUM_HEADS: tl.constexpr,
                     HEAD_DIM: tl.constexpr):
    # x, out: [T, NUM_HEADS, HEAD_DIM]; w: [HEAD_DIM]
    pid = tl.program_id(0)
    token = pid // NUM_HEADS
    head = pid % NUM_HEADS
    offs_d = tl.arange(0, HEAD_DIM)
    x = tl.load(x_ptr + token * stride_xt + head * HEAD_DIM + offs_d)
    w = tl.load(w_ptr + offs_d)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / HEAD_DIM + eps)
    tl.store(out_ptr + token * stride_ot + head * HEAD_DIM + offs_d, x * rstd * w)
