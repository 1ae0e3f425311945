"""Timing for bench/kernels.py: GPU time per call (CUDA graphs, cold L2) and the ceilings.

On CUDA a case's calls are captured into one CUDA graph over enough independent input copies
to exceed the L2 cache, so replays measure GPU time with cold caches and no Python overhead;
the median over replays is reported. Where capture fails the same calls are timed eagerly
with CUDA events (and the mode says so). On CPU, wall time with ``time.perf_counter``.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

__all__ = ["L2_FLUSH_BYTES", "time_calls", "eager_call_us", "process_cpu_us", "copy_bandwidth_gbps",
           "cublas_bf16_tflops"]

L2_FLUSH_BYTES = 256 * 2**20  # more than any current GPU's L2 (H100/H200: 50 MiB)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_calls(calls: list[Callable[[], object]], *, device: str, repeats: int) -> tuple[float, str]:
    """Median microseconds per call over ``repeats`` passes through ``calls``, and the timing mode."""
    for call in calls:  # warm-up: compiles Triton kernels, fills allocator pools
        call()
    _sync(device)
    if device != "cuda":
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            for call in calls:
                call()
            samples.append((time.perf_counter() - start) * 1e6 / len(calls))
        return statistics.median(samples), "cpu wall clock"
    mode = "cuda graph"
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for call in calls:
                call()
        run: Callable[[], None] = graph.replay
    except Exception as exc:  # capture is an optimisation; eager timing still measures the GPU
        mode = f"eager events (graph capture failed: {type(exc).__name__}: {exc})"[:200]

        def run() -> None:
            for call in calls:
                call()
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / len(calls))
    return statistics.median(samples), mode


def eager_call_us(call: Callable[[], object], *, device: str, iterations: int = 20) -> float:
    """Wall-clock microseconds per eager call, host overhead included (what an engine step pays)."""
    call()
    _sync(device)
    start = time.perf_counter()
    for _ in range(iterations):
        call()
    _sync(device)
    return (time.perf_counter() - start) * 1e6 / iterations


def process_cpu_us(call: Callable[[], object], *, iterations: int = 20) -> float:
    """CPU seconds of this process per call, in microseconds: on a shared machine, unlike wall
    time, not inflated by other processes' load (intra-op threads add theirs)."""
    call()
    start = time.process_time()
    for _ in range(iterations):
        call()
    return (time.process_time() - start) * 1e6 / iterations


def copy_bandwidth_gbps(*, device: str, repeats: int, num_bytes: int = 4 * 2**30) -> float:
    """Device-to-device copy bandwidth, the memory ceiling: bytes read plus bytes written per second.

    On CUDA, ``num_bytes`` (several GB, far beyond L2) are copied eagerly ``repeats`` times, each
    copy timed alone with CUDA events; the median is reported. Eager on purpose: a copy captured
    in a CUDA graph becomes a memcpy node, which measured well below what a copy kernel moves.
    """
    src = torch.empty(num_bytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    if device != "cuda":
        per_call_us, _ = time_calls([lambda: dst.copy_(src)], device=device, repeats=repeats)
        return 2 * num_bytes / (per_call_us * 1e-6) / 1e9
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3)
    return 2 * num_bytes / statistics.median(samples) / 1e9


def cublas_bf16_tflops(*, device: str, repeats: int, size: int = 8192) -> float:
    """bf16 matmul throughput of torch (cuBLAS on CUDA) at size^3, the compute ceiling."""
    a = torch.randn(size, size, device=device).bfloat16()
    b = torch.randn(size, size, device=device).bfloat16()
    per_call_us, _ = time_calls([lambda: torch.mm(a, b)], device=device, repeats=repeats)
    return 2 * size**3 / (per_call_us * 1e-6) / 1e12
