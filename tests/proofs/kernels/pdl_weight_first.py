"""Positive control: a matmul under programmatic dependent launch that loads its first K step's
weight tile before the grid-dependency wait (the weight is immutable) and everything else after it.

tests/proofs/mutants/pdl_read_before_wait.py is this kernel with x's first tile loaded early too.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["M"])
def matmul_kernel(x_ptr, w_ptr, out_ptr, M, stride_xm, stride_wn, stride_om, N: tl.constexpr, K: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    # x: [M, K] row stride stride_xm; w: [N, K] row stride stride_wn; out: [M, N] fp32
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    w = tl.load(w_ptr + offs_n[None, :] * stride_wn + offs_k[:, None],
                mask=(offs_n[None, :] < N) & (offs_k[:, None] < K), other=0.0)
    if PDL:  # the weight tile above may be in flight while the previous launch finishes
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :],
                mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
    acc = tl.dot(x, w, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), input_precision="ieee")
    for k0 in range(BLOCK_K, K, BLOCK_K):
        k_idx = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                    mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
        w = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None],
                    mask=(offs_n[None, :] < N) & (k_idx[:, None] < K), other=0.0)
        acc = tl.dot(x, w, acc, input_precision="ieee")
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
