"""Mutant: the plan's gate/up projection with SiLU in its epilogue, the epilogue broadcasting one row's up.

The control (kernels/matmul_silu.py::matmul_silu_kernel) multiplies each row's activation by that
row's up projection. Here every row of a tile takes the up projection of the tile's first row: a
fused epilogue reading another row's value, so a row's output depends on which request shares its
tile.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["M"])
def matmul_silu_kernel(x_ptr, w_ptr, out_ptr, M, stride_xm, stride_wn, stride_om,
                       I: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, DTYPE: tl.constexpr, N_MAJOR: tl.constexpr = False,
                       PDL: tl.constexpr = False):
    # x: [M, K] row stride stride_xm; w: [2*I, K] row stride stride_wn (gate rows, then up rows); out: [M, I]
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
    if N_MAJOR:
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(1)
    else:
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc_gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_idx = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                    mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
        w_mask = (offs_n[None, :] < I) & (k_idx[:, None] < K)
        w_gate = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None], mask=w_mask, other=0.0)
        w_up = tl.load(w_ptr + (I + offs_n[None, :]) * stride_wn + k_idx[:, None], mask=w_mask, other=0.0)
        acc_gate = tl.dot(x, w_gate, acc_gate, input_precision="ieee")
        acc_up = tl.dot(x, w_up, acc_up, input_precision="ieee")
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    gate = acc_gate.to(DTYPE).to(tl.float32)
    up = acc_up.to(DTYPE).to(tl.float32)
    # the mutation: every row of the tile multiplied by the up projection of the tile's first row
    up = tl.sum(tl.where((offs_m == pid_m * BLOCK_M)[:, None], up, 0.0), axis=0)[None, :]
    act = (gate / (1.0 + tl.exp(-gate))).to(DTYPE).to(tl.float32)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], (act * up).to(DTYPE),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < I))

