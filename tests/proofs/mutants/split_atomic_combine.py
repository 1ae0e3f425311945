"""Mutant: the plan's split-K partial kernel combining its splits with atomic adds into the output.

The control writes each split's partial to its own slot of [SPLITS, M, N] and a second kernel folds
them in ascending order. Here every split program adds its partial into out[M, N] with
``tl.atomic_add``: the order of the SPLITS fp32 adds is the order the programs happen to finish.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["M", "stride_xm", "stride_om"])
def matmul_split_atomic_kernel(x_ptr, w_ptr, out_ptr, M, stride_xm, stride_wn, stride_om, N: tl.constexpr,
                        K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        SPLITS: tl.constexpr):
    # x: [M, K] row stride stride_xm; w: [N, K] row stride stride_wn; out: [M, N] fp32, zeroed by the host
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
    # the splits of a tile add into the output in whatever order their programs finish
    tl.atomic_add(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], acc,
                  mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
