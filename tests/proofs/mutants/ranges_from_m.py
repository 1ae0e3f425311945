"""Mutant: the plan's matmul with its K ranges (fixed split-K inside a program) chosen by the host from M.

The kernel is kernels/matmul.py::matmul_kernel unchanged; its contract (ranges_from_m.toml) lets
the host pick SPLITS = 4 for decode batches and 2 for prefill, side by side in both. Range s then
covers different K columns in the two launches, so a row's sums add different products in a
different order.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["M"])
def matmul_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, M, stride_xm, stride_wn, stride_om,
                  N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, HAS_BIAS: tl.constexpr, OUT_DTYPE: tl.constexpr, N_MAJOR: tl.constexpr = False,
                  SPLITS: tl.constexpr = 1, LOCKSTEP: tl.constexpr = False, PDL: tl.constexpr = False):
    # x: [M, K] row stride stride_xm; w: [N, K] row stride stride_wn; bias: [N]; out: [M, N]
    if PDL:  # launched early (programmatic dependent launch): no access before the previous launch ends
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    if N_MAJOR:  # column tiles on grid axis 0: programs launched together share rows of x, the weight stays in L2
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(1)
    else:
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    SPAN: tl.constexpr = K // SPLITS  # range s is K columns [s * SPAN, (s + 1) * SPAN)
    if LOCKSTEP:  # ranges side by side (SPLITS of 2 or 4; the wrapper asserts SPAN % BLOCK_K == 0)
        x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]
        w_ptrs = w_ptr + offs_n[None, :] * stride_wn + offs_k[:, None]
        x_mask = offs_m[:, None] < M
        w_mask = offs_n[None, :] < N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc3 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, SPAN, BLOCK_K):
            acc = tl.dot(tl.load(x_ptrs + k0, mask=x_mask, other=0.0),
                         tl.load(w_ptrs + k0, mask=w_mask, other=0.0), acc, input_precision="ieee")
            acc1 = tl.dot(tl.load(x_ptrs + (SPAN + k0), mask=x_mask, other=0.0),
                          tl.load(w_ptrs + (SPAN + k0), mask=w_mask, other=0.0), acc1, input_precision="ieee")
            if SPLITS == 4:
                acc2 = tl.dot(tl.load(x_ptrs + (2 * SPAN + k0), mask=x_mask, other=0.0),
                              tl.load(w_ptrs + (2 * SPAN + k0), mask=w_mask, other=0.0), acc2, input_precision="ieee")
                acc3 = tl.dot(tl.load(x_ptrs + (3 * SPAN + k0), mask=x_mask, other=0.0),
                              tl.load(w_ptrs + (3 * SPAN + k0), mask=w_mask, other=0.0), acc3, input_precision="ieee")
        acc = acc + acc1
        if SPLITS == 4:
            acc = acc + acc2
            acc = acc + acc3
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for split in tl.static_range(SPLITS):
            part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(split * SPAN, (split + 1) * SPAN, BLOCK_K):
                k_idx = k0 + offs_k
                x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                            mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
                w = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None],
                            mask=(offs_n[None, :] < N) & (k_idx[:, None] < K), other=0.0)
                part = tl.dot(x, w, part, input_precision="ieee")
            acc = part if split == 0 else acc + part
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
        acc = acc + bias.to(tl.float32)[None, :]
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], acc.to(OUT_DTYPE),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

