"""Helpers for bench/engine_gpu.py: time budget, progress, statistics, copy rate, bytes per step.

The roofline of a decode step is the bytes it must move (every weight once, plus the K/V it
reads) over the device-to-device copy rate measured in the same run (read plus write bytes per
second, as a copy moves them); tokens per second at the roofline are rows per step over that
time.
"""

from __future__ import annotations

import gc
import platform
import statistics
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch

__all__ = ["Budget", "log", "guarded", "summary", "copy_rate_bytes_per_s", "weight_bytes", "kv_bytes_per_token",
           "roofline_tokens_per_s", "environment", "random_prompts", "free_cuda", "collector_pauses"]

_START = time.perf_counter()


def log(message: str) -> None:
    """One progress line with the elapsed wall time (flushed: the run is watched remotely)."""
    print(f"[{time.perf_counter() - _START:7.1f} s] {message}", flush=True)


def guarded(label: str, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``measure()``, or its error with the traceback, so the measurements after it still run."""
    try:
        return measure()
    except Exception:  # recorded in the results; the run goes on
        error = traceback.format_exc()
        log(f"  {label} FAILED: {error.strip().splitlines()[-1]}")
        return {"error": error}


@dataclass
class Budget:
    """A wall-clock deadline shared by the parts of one run."""

    seconds: float
    started: float = _START

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.started)

    def allows(self, seconds: float) -> bool:
        """Whether ``seconds`` more work fits before the deadline."""
        return self.left() >= seconds


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, minimum, maximum and relative spread ((max - min) / median) of repeated runs."""
    if not values:
        return {"n": 0}
    median = statistics.median(values)
    return {"median": median, "min": min(values), "max": max(values), "n": len(values), "values": list(values),
            "spread": (max(values) - min(values)) / median if median else None}


def copy_rate_bytes_per_s(num_bytes: int = 2**30, repeats: int = 10) -> dict[str, Any]:
    """Device-to-device copy rate (read + write bytes per second): median of ``repeats`` copies."""
    src = torch.empty(num_bytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    rates = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        rates.append(2 * num_bytes / (start.elapsed_time(end) * 1e-3))
    del src, dst
    return {"bytes_per_s": statistics.median(rates), "copy_bytes": num_bytes, "runs": summary(rates)}


def weight_bytes(spec: Any, element_size: int = 2) -> int:
    """Bytes of every weight a decode step reads once (a tied embedding counted once)."""
    h, i, v = spec.hidden_size, spec.intermediate_size, spec.vocab_size
    q, kv = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    per_layer = h * (q + 2 * kv) + q * h + 2 * h * i + i * h + 2 * h + (q + 2 * kv if spec.has_qkv_bias else 0)
    embeddings = v * h * (1 if spec.tie_word_embeddings else 2)
    return element_size * (spec.num_layers * per_layer + embeddings + h)


def kv_bytes_per_token(spec: Any, element_size: int = 2) -> int:
    """K and V bytes one cached position holds over all layers."""
    return 2 * spec.num_layers * spec.num_kv_heads * spec.head_dim * element_size


def roofline_tokens_per_s(spec: Any, *, batch: int, context: int, new_tokens: int, copy_rate: float) -> float:
    """Tokens per second if every decode step moved only its bytes at the copy rate.

    A step reads every weight once and each row's K/V over its context; averaged over the
    ``new_tokens`` steps of the measured window (the context grows by one per step).
    """
    mean_context = context + (new_tokens - 1) / 2
    step_bytes = weight_bytes(spec) + batch * mean_context * kv_bytes_per_token(spec)
    return batch * copy_rate / step_bytes


def environment() -> dict[str, Any]:
    """Versions and the device the figures were measured on."""
    import triton

    env: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "triton": triton.__version__, "cuda": torch.version.cuda, "argv": sys.argv}
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:
        env["transformers"] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, capability=f"{props.major}.{props.minor}", sm_count=props.multi_processor_count,
                   memory_gib=round(props.total_memory / 2**30, 1))
        try:
            query = ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem", "--format=csv,noheader"]
            env["nvidia_smi"] = subprocess.run(query, capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            env["nvidia_smi"] = None
    return env


def random_prompts(lengths: Sequence[int], *, seed: int, vocab_size: int = 128000) -> list[list[int]]:
    """One random prompt per length, reproducible from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab_size, (n,), generator=g).tolist() for n in lengths]


@contextmanager
def collector_pauses(*, freeze: bool) -> Iterator[list[float]]:
    """Milliseconds of each full pass of the cyclic collector while inside (filled on exit).

    With ``freeze``, everything alive on entry is first left out of the collector's passes, as
    ``bitcase serve``'s engine process does once its engine is built (serving/engine_process.py),
    and put back on exit.
    """
    pauses: list[float] = []
    started: list[float] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                started.append(time.perf_counter())
            elif started:
                pauses.append(1e3 * (time.perf_counter() - started.pop()))

    if freeze:
        gc.collect()
        gc.freeze()
    gc.callbacks.append(watch)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(watch)
        if freeze:
            gc.unfreeze()


def free_cuda() -> None:
    """Return cached CUDA memory after a part dropped its engines or models."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
