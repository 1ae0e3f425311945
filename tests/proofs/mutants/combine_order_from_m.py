"""Mutant: the plan's split-K combine folding the partials in reversed order for small batches.

The control (kernels/matmul_combine.py::matmul_combine_kernel) folds splits 0, 1, ..., SPLITS - 1
for every M. Here a batch of at most 64 rows (decode) folds SPLITS - 1, ..., 0 and a larger one
(prefill) ascends: fp32 addition is not associative, so a row's sum depends on the batch it is in.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["M", "stride_ps", "stride_om"])
def matmul_combine_kernel(partial_ptr, bias_ptr, out_ptr, M, stride_ps, stride_om, N: tl.constexpr,
                          BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, HAS_BIAS: tl.constexpr,
                          OUT_DTYPE: tl.constexpr):
    # partial: [SPLITS, M, N] fp32, split stride stride_ps; bias: [N]; out: [M, N]
    row = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    is_col = offs_n < N
    decode = M <= 64  # small batches fold from the last split down
    first = tl.where(decode, SPLITS - 1, 0)
    acc = tl.load(partial_ptr + first * stride_ps + row * N + offs_n, mask=is_col, other=0.0)
    for i in tl.static_range(1, SPLITS):
        split = tl.where(decode, SPLITS - 1 - i, i)
        acc = acc + tl.load(partial_ptr + split * stride_ps + row * N + offs_n, mask=is_col, other=0.0)
    if HAS_BIAS:
        acc = acc + tl.load(bias_ptr + offs_n, mask=is_col, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_om + offs_n, acc.to(OUT_DTYPE), mask=is_col)
