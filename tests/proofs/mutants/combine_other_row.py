"""Mutant: the plan's split-K combine reading a partial at another row's batch position.

The control reads ``partial[s, row]`` for every split. Here splits after the first are read at
row ``M - 1 - row``, as if the partial buffer were laid out from the end of the batch: the row's
output then mixes in another request's partial products, which differ with the batch.
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
    # later splits are read at the batch position mirrored from the end of the batch
    acc = tl.load(partial_ptr + row * N + offs_n, mask=is_col, other=0.0)
    for split in tl.static_range(1, SPLITS):
        acc = acc + tl.load(partial_ptr + split * stride_ps + (M - 1 - row) * N + offs_n, mask=is_col, other=0.0)
    if HAS_BIAS:
        acc = acc + tl.load(bias_ptr + offs_n, mask=is_col, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_om + offs_n, acc.to(OUT_DTYPE), mask=is_col)
