"""Mutant: the plan's split-K partial kernel with its split count chosen by the host from M.

The kernel is kernels/matmul_split.py::matmul_split_kernel unchanged; its contract
(split_count_from_m.toml) lets the host pick SPLITS = 4 for decode batches and 2 for prefill,
the usual "more splits when few rows fill the GPU" heuristic. Split s then covers different K
columns in the two launches, so the same row's partial s sums different products.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["M", "stride_xm", "stride_ps"])
def matmul_split_kernel(x_ptr, w_ptr, partial_ptr, M, stride_xm, stride_wn, stride_ps, N: tl.constexpr,
                        K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        SPLITS: tl.constexpr):
    # x: [M, K] row stride stride_xm; w: [N, K] row stride stride_wn; partial: [SPLITS, M, N] fp32
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    split = tl.program_id(2)  # K columns [split * K // SPLITS, (split + 1) * K // SPLITS)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(split * (K // SPLITS), (split + 1) * (K // SPLITS), BLOCK_K):
        k_idx = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                    mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
        w = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None],
                    mask=(offs_n[None, :] < N) & (k_idx[:, None] < K), other=0.0)
        acc = tl.dot(x, w, acc, input_precision="ieee")
    tl.store(partial_ptr + split * stride_ps + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
