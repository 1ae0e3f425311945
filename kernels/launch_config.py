"""The launch configuration type and the helpers every configuration function shares.

Torch- and Triton-free, like kernels/configs.py, which re-exports what callers need.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["DTYPES", "KERNELS", "LaunchConfig"]

DTYPES = ("float32", "bfloat16")
KERNELS = ("embedding", "rms_norm", "matmul", "matmul_split", "matmul_combine", "matmul_combine_norm", "matmul_silu",
           "rope_store_kv", "silu_mul", "gelu_tanh_mul", "logit_softcap", "paged_attention", "attention_combine",
           "attention_prefill")
# Plans of these dtypes (the GPU's) launch every kernel with programmatic dependent launch: the
# kernel's grid may start while the previous launch finishes, and waits (``gdc_wait``) before its
# first memory access, so it overlaps only its launch and prologue. float32 plans (the CPU path,
# the Triton interpreter, which has no grid-dependency instructions) launch without it.
PDL_DTYPES = ("bfloat16",)
_KEY_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")  # no ':' or spaces: safe as a DOT id


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """One kernel specialisation: its constexprs, launch options and the static shape behind them."""

    kernel: str
    key: str
    constexprs: tuple[tuple[str, Any], ...]  # sorted by name; dtype-valued ones spelled "float32"/"bfloat16"
    num_warps: int
    num_stages: int
    static: tuple[tuple[str, Any], ...]  # sorted by name; the shape values the choice was made from

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(f"unknown kernel {self.kernel!r}; known kernels: {', '.join(KERNELS)}")
        if not _KEY_RE.match(self.key) or not self.key.startswith(self.kernel + "."):
            raise ValueError(f"key {self.key!r} must look like '{self.kernel}.<lowercase_words>'")
        for name, pairs in (("constexprs", self.constexprs), ("static", self.static)):
            names = [n for n, _ in pairs]
            if names != sorted(set(names)):
                raise ValueError(f"{self.key}: {name} names must be unique and sorted, got {names}")
        if self.num_warps not in (1, 2, 4, 8, 16) or self.num_stages < 1:
            raise ValueError(f"{self.key}: bad launch options num_warps={self.num_warps} "
                             f"num_stages={self.num_stages}")

    def constexpr_dict(self) -> dict[str, Any]:
        """The constexprs as a dict (the kernel's keyword arguments)."""
        return dict(self.constexprs)

    def static_dict(self) -> dict[str, Any]:
        """The static shape values as a dict."""
        return dict(self.static)

    def launch_options(self) -> dict[str, Any]:
        """Constexprs plus num_warps/num_stages: everything that selects the compiled variant."""
        return {**self.constexpr_dict(), "num_warps": self.num_warps, "num_stages": self.num_stages}


def _make(kernel: str, key_suffix: str, constexprs: Mapping[str, Any], num_warps: int, num_stages: int,
          static: Mapping[str, Any]) -> LaunchConfig:
    """A configuration; PDL (programmatic dependent launch) is added where ``static``'s dtype is in
    PDL_DTYPES (only then: float32 entries keep their constexprs and digests)."""
    if static.get("dtype") in PDL_DTYPES:
        constexprs = {**constexprs, "PDL": True}
    return LaunchConfig(kernel=kernel, key=f"{kernel}.{key_suffix}",
                        constexprs=tuple(sorted(constexprs.items())), num_warps=num_warps,
                        num_stages=num_stages, static=tuple(sorted(static.items())))


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _as_float32(value: float) -> float:
    """Round to float32: float constexprs are used at fp32, so 1/sqrt(d) and d**-0.5 agree."""
    return struct.unpack("f", struct.pack("f", float(value)))[0]


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {DTYPES}")


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def _unchecked(check_finite: bool) -> str:
    """Key suffix of a kernel built without the run-time finiteness check."""
    return "" if check_finite else "_unchecked"


def _row_warps(block: int, max_warps: int) -> int:
    """Warps for a one-row-per-program kernel: about 256 elements per warp."""
    return max(1, min(max_warps, block // 256))

