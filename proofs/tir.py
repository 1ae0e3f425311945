"""Tile-level IR built by the front end: integer tiles as Z3 terms, float tiles as a DAG.

An integer tile of shape ``(d0, d1, …)`` is one Z3 term over the canonical axis variables
``AX[0], AX[1], …`` (element ``(i0, i1, …)`` is the term with ``AX[k] := ik``); a size-1 axis
never occurs in the term. Float tiles are :class:`FNode` objects compared by identity; their
operands are mapped to element indices by the op (broadcast, view, reduce, dot).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import z3

from proofs.z3state import on_new_context

__all__ = ["AX", "IntVal", "BoolVal", "PtrVal", "FNode", "Loop", "Access", "KernelIR", "Dtype",
           "FLOAT_DTYPES", "INT_DTYPES", "lanes_subst"]

AX: list[z3.ArithRef] = []
FLOAT_DTYPES = ("float32", "bfloat16", "float16", "float64", "float8e4nv", "float8e5")
INT_DTYPES = ("int32", "int64", "int16", "int8", "uint8", "uint32", "int1")
_uids = itertools.count(1)


@on_new_context
def _fresh_names() -> None:
    global _uids
    AX[:] = [z3.Int(f"ax{k}") for k in range(4)]  # in place: importers hold this list
    _uids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Dtype:
    """A Triton element type named as in torch (``float32``, ``bfloat16``, ``int32`` …)."""

    name: str

    @property
    def is_float(self) -> bool:
        return self.name in FLOAT_DTYPES

    @property
    def element_ty(self) -> "Dtype":  # ``ptr.dtype.element_ty`` in kernels
        return self


@dataclass(frozen=True, slots=True)
class IntVal:
    """An integer tile: Z3 term over AX, shape, bit width; ``nonneg`` is a syntactic hint."""

    term: z3.ArithRef
    shape: tuple[int, ...] = ()
    width: int = 32
    nonneg: bool = False


@dataclass(frozen=True, slots=True)
class BoolVal:
    """A boolean tile computed from integers (masks, guards)."""

    term: z3.BoolRef
    shape: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PtrVal:
    """A pointer tile: a tensor argument plus an element-offset tile."""

    tensor: str
    offset: z3.ArithRef
    shape: tuple[int, ...] = ()
    width: int = 32


@dataclass(eq=False, slots=True)
class FNode:
    """A float (or float-derived boolean, dtype ``int1``) tile in the value DAG.

    ``op`` is one of: const, param, fromint, boolint, unary, binary, cmp, select, fselect, cast,
    reduce, dot, view, load, carried, loopres, atomic. ``attrs`` holds the structural attributes
    compared between the two launches; ``data`` holds Z3 terms (offsets, masks, conditions).
    """

    op: str
    shape: tuple[int, ...]
    dtype: str
    args: tuple["FNode", ...] = ()
    attrs: tuple = ()
    data: dict[str, Any] = field(default_factory=dict)
    line: int = 0
    uid: int = field(default_factory=lambda: next(_uids))

    def __repr__(self) -> str:
        return f"FNode#{self.uid}({self.op}{list(self.attrs)!r} {self.dtype}{list(self.shape)} @L{self.line})"


@dataclass(eq=False, slots=True)
class Loop:
    """A ``for`` loop: bounds as scalar terms, the iteration variable and its carried state."""

    loop_id: int
    line: int
    it: z3.ArithRef  # 0-based iteration index of this run
    lo: z3.ArithRef
    hi: z3.ArithRef
    step: z3.ArithRef
    step_const: int | None
    parent: int | None  # enclosing loop id
    init: dict[str, Any] = field(default_factory=dict)  # carried float name -> FNode
    next: dict[str, Any] = field(default_factory=dict)
    carried: dict[str, FNode] = field(default_factory=dict)
    opaque_ints: list[str] = field(default_factory=list)

    @property
    def trip(self) -> z3.ArithRef:
        """Trip count ``max(0, cdiv(hi - lo, step))`` for a positive step."""
        span = self.hi - self.lo
        return z3.If(span > 0, (span + self.step - 1) / self.step, 0)

    def in_range(self, it: z3.ArithRef | None = None) -> z3.BoolRef:
        """``it`` is a valid iteration: ``0 <= it`` and ``lo + it*step < hi``."""
        it = self.it if it is None else it
        return z3.And(it >= 0, self.lo + it * self.step < self.hi)


@dataclass(eq=False, slots=True)
class Access:
    """One load or store site: tensor, offset/mask terms over AX, enclosing loops, value."""

    kind: str  # load | store | atomic
    tensor: str
    offset: z3.ArithRef
    mask: z3.BoolRef | None
    shape: tuple[int, ...]
    line: int
    loops: tuple[int, ...]
    value: Any = None  # stored FNode / IntVal
    has_other: bool = True
    site: int = 0


@dataclass(eq=False, slots=True)
class KernelIR:
    """Everything the passes need about one specialization of a kernel in one launch."""

    name: str
    run: str  # "A" or "B"
    constexprs: dict[str, Any]
    accesses: list[Access] = field(default_factory=list)
    loops: dict[int, Loop] = field(default_factory=dict)
    widths: dict[int, tuple[int, int]] = field(default_factory=dict)  # term id -> (bits, line)
    hints: list[tuple[z3.ArithRef, int, int, tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)
    grid: tuple[z3.ArithRef, ...] = ()
    pids: tuple[z3.ArithRef, ...] = ()
    notes: list[str] = field(default_factory=list)
    # Programmatic dependent launch: accesses recorded before the first grid-dependency wait
    # (None: the kernel never waits) and that wait's line (proofs/pdl.py).
    pdl_wait: int | None = None
    pdl_line: int = 0
    keep: list = field(default_factory=list)  # keeps terms in ``widths`` alive (ids stay unique)

    @property
    def stores(self) -> list[Access]:
        return [a for a in self.accesses if a.kind in ("store", "atomic")]


def lanes_subst(term: z3.ExprRef, shape: tuple[int, ...], lanes: tuple[z3.ArithRef, ...]) -> z3.ExprRef:
    """Instantiate a tile term at element ``lanes`` (size-1 axes are not in the term)."""
    pairs = [(AX[k], lanes[k]) for k, n in enumerate(shape) if n != 1]
    return z3.substitute(term, *pairs) if pairs else term
