"""Errors the verifier raises while reading a kernel or a contract.

Neither is a verdict by itself: the driver turns :class:`Unsupported` into an UNKNOWN result
that names the operation and source line, and :class:`ContractError` into a usage error.
"""

from __future__ import annotations

__all__ = ["Unsupported", "ContractError", "KernelSourceError"]


class Unsupported(Exception):
    """The kernel uses something outside the verified subset (never a silent pass)."""

    def __init__(self, operation: str, line: int, detail: str = "") -> None:
        self.operation = operation
        self.line = line
        self.detail = detail
        super().__init__(f"unsupported {operation} at line {line}" + (f": {detail}" if detail else ""))


class ContractError(ValueError):
    """A contract file is malformed or does not match the kernel it describes."""


class KernelSourceError(ValueError):
    """The kernel source cannot be found or is not a @triton.jit function."""
