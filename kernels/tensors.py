"""Small tensor helpers shared by the launch wrappers and the CPU path."""

from __future__ import annotations

from typing import Any

import torch

from kernels.plan import PlanEntry

__all__ = ["MAX_INDEX", "dtype_name", "torch_dtype", "max_offset", "constexpr_kwargs", "launch_kwargs"]

# Kernels index with 32-bit integer arithmetic: every element offset a launch can form must fit.
MAX_INDEX = 2**31 - 1

_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
_DTYPES = {name: dtype for dtype, name in _NAMES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    """``"float32"`` or ``"bfloat16"``; any other dtype is a clear error."""
    try:
        return _NAMES[dtype]
    except KeyError:
        raise TypeError(f"unsupported dtype {dtype}: kernels take float32 or bfloat16") from None


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype spelled ``name`` (``"float32"`` or ``"bfloat16"``)."""
    return _DTYPES[name]


def max_offset(t: torch.Tensor) -> int:
    """Largest element offset (from the data pointer) a kernel can reach in ``t``."""
    if t.numel() == 0:
        return 0
    return sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))


_KWARGS: dict[int, tuple[PlanEntry, dict[str, Any]]] = {}  # id(entry) -> (entry, its kwargs)


def constexpr_kwargs(entry: PlanEntry) -> dict[str, Any]:
    """The entry's constexprs as Triton keyword arguments (dtype names become ``tl`` dtypes)."""
    known = _KWARGS.get(id(entry))  # built once per entry: every launch pays a copy, not a rebuild
    if known is None or known[0] is not entry:
        import triton.language as tl

        kwargs = entry.constexpr_dict()
        for name, value in kwargs.items():
            if name.endswith("DTYPE"):
                kwargs[name] = getattr(tl, value)
        known = _KWARGS[id(entry)] = (entry, kwargs)
    return dict(known[1])


def launch_kwargs(entry: PlanEntry, *, early: bool = True) -> dict[str, Any]:
    """Everything a launch of ``entry`` passes by keyword: its constexprs, warps and stages, and
    ``launch_pdl`` where the entry's kernel waits for the previous launch itself (PDL; not under
    the Triton interpreter, which runs the entry with PDL off). ``early=False`` leaves
    ``launch_pdl`` out: the launch starts after the previous one ends, as any launch does, and its
    wait returns at once (for a caller whose previous launch wrote what the kernel reads before its
    wait)."""
    kwargs = constexpr_kwargs(entry)
    if kwargs.get("PDL") and early:
        from triton import knobs

        if knobs.runtime.interpret:  # one launch after another, and no PTX to run the wait: vacuous there
            kwargs["PDL"] = False
        else:
            kwargs["launch_pdl"] = True
    return {**kwargs, "num_warps": entry.num_warps, "num_stages": entry.num_stages}
