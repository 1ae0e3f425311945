"""Mutant: the plan's split-K fold + residual norm scaling every row by the first row's statistic.

The control (kernels/matmul_combine_norm.py::matmul_combine_norm_kernel) normalises row ``row`` by
its own mean square. Here the mean square comes from row 0 of the batch (its partials folded and
its residual added the same way): a fused prologue that reads another row's statistic, so a
row's output depends on which request sits first in the batch.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["stride_ps", "stride_res"])
def matmul_combine_norm_kernel(partial_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, stride_ps, stride_res,
                               H: tl.constexpr, BLOCK_H: tl.constexpr, SPLITS: tl.constexpr, EPS: tl.constexpr,
                               DTYPE: tl.constexpr):
    # partial: [SPLITS, T, H] fp32, split stride stride_ps; res: [T, H] row stride stride_res;
    # w: [H]; out, res_out: [T, H] contiguous
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    mask = offs < H
    acc = tl.load(partial_ptr + row * H + offs, mask=mask, other=0.0)
    for split in tl.static_range(1, SPLITS):
        acc = acc + tl.load(partial_ptr + split * stride_ps + row * H + offs, mask=mask, other=0.0)
    x = acc.to(DTYPE).to(tl.float32) + tl.load(res_ptr + row * stride_res + offs, mask=mask, other=0.0).to(tl.float32)
    r = x.to(DTYPE)
    tl.store(res_out_ptr + row * H + offs, r, mask=mask)
    rf = r.to(tl.float32)
    # the statistic of the batch's first row, folded the same way, scales every row
    first = tl.load(partial_ptr + offs, mask=mask, other=0.0)
    for split in tl.static_range(1, SPLITS):
        first = first + tl.load(partial_ptr + split * stride_ps + offs, mask=mask, other=0.0)
    f = (first.to(DTYPE).to(tl.float32) + tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)).to(DTYPE)
    ff = f.to(tl.float32)
    var = tl.sum(ff * ff, axis=0) / H
    inv = tl.rsqrt(var + EPS)
    normed = (rf * inv).to(DTYPE).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * H + offs, (normed * w).to(DTYPE), mask=mask)
