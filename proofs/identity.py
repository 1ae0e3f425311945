"""Exact identity transitions: an extra loop iteration must leave the carried state unchanged.

The body is simplified symbolically on the demanded elements of one launch, with each carried
variable a symbol of known value classes (a symbol whose classes denote one value, like
``{-inf}`` or ``{+0}``, is that constant). Only exact IEEE facts are used: ``max(x, -inf) = x``
and ``x * 1 = x`` for non-NaN ``x``, ``x - x = +0`` and ``exp(+0) = 1`` for finite ``x``,
``x + (+0) = x`` only when ``x`` cannot be ``-0``, ``x + (-0) = x``; a reduction of equal
constants is that constant; plus the trusted axiom that ``tl.dot`` with an all-``+0`` left
operand and a finite right operand returns its accumulator unchanged. The iteration is an
identity when every demanded carried variable simplifies to itself.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import z3

from proofs import kinds as K
from proofs.tir import FNode, lanes_subst

__all__ = ["Sym", "SConst", "Simplifier", "live_load"]


@dataclass(frozen=True, slots=True)
class Sym:
    """The entry value of carried variable ``name`` at element ``lanes``."""

    name: str
    lanes: tuple
    classes: frozenset

    def same(self, other: object) -> bool:
        return isinstance(other, Sym) and other.name == self.name and \
            all(a.eq(b) for a, b in zip(self.lanes, other.lanes))


@dataclass(frozen=True, slots=True)
class SConst:
    value: float

    @property
    def classes(self) -> frozenset:
        return frozenset({K.classify(self.value)})


_F32 = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt, "neg": np.negative,
        "abs": np.abs, "rsqrt": lambda x: np.float32(1) / np.sqrt(x)}
_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.fmax, "min": np.fmin}


def _f32(fn, *args: float) -> SConst:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return SConst(float(fn(*[np.float32(a) for a in args])))


def _is(v, value: float) -> bool:
    return isinstance(v, SConst) and (math.isnan(v.value) if math.isnan(value) else
                                      v.value == value and math.copysign(1, v.value) == math.copysign(1, value))


class Simplifier:
    """Simplifies one launch's loop body with the carried state of ``loop`` as symbols."""

    def __init__(self, values, run: str, loop_id: int, state: dict[str, frozenset]) -> None:
        self.values, self.run, self.loop_id, self.state = values, run, loop_id, state
        self.ctx = values.ctx
        self._memo: dict = {}
        self.loads: list[tuple[FNode, tuple]] = []  # loads whose values the simplification could not drop

    def simp(self, n: FNode, lanes: tuple):
        key = (n.uid, tuple(x.get_id() for x in lanes), self.ctx.key)
        if key not in self._memo:
            self._memo[key] = self._simp(n, lanes)
        return self._memo[key]

    def _classes(self, v, n: FNode, lanes: tuple) -> frozenset:
        return v.classes if v is not None else self.values.kinds(n, lanes, self.run)

    def _simp(self, n: FNode, lanes: tuple):
        from proofs.walk import arg_lanes, bound_var

        op = n.op
        if op == "const":
            return SConst(n.attrs[0])
        if op == "load":
            self.loads.append((n, lanes))
            return None
        if op == "carried" and n.data["loop"] == self.loop_id:
            classes = self.state.get(n.attrs[0], K.TOP)
            exact = K.exact_value(classes)
            return SConst(exact) if exact is not None else Sym(n.attrs[0], lanes, classes)
        if op == "view":
            return self.simp(n.args[0], arg_lanes(n, lanes, 0))
        if op == "select":
            cond = lanes_subst(n.data["cond"], n.shape, lanes)
            if self.ctx.valid(cond):
                return self.simp(n.args[0], arg_lanes(n, lanes, 0))
            if self.ctx.valid(z3.Not(cond)):
                return self.simp(n.args[1], arg_lanes(n, lanes, 1))
            return None
        if op == "fselect":
            truth = self._truth(n.args[0], arg_lanes(n, lanes, 0))
            if len(truth) == 1:
                idx = 1 if True in truth else 2
                return self.simp(n.args[idx], arg_lanes(n, lanes, idx))
            return None
        if op == "unary":
            x = self.simp(n.args[0], lanes)
            if isinstance(x, SConst) and n.attrs[0] in _F32:
                return _f32(_F32[n.attrs[0]], x.value)
            return None
        if op == "cast":
            x = self.simp(n.args[0], arg_lanes(n, lanes, 0))
            exact = isinstance(x, SConst) and (x.value in (0.0, 1.0) or math.isinf(x.value) or math.isnan(x.value))
            return x if exact else None
        if op == "binary":
            la, lb = arg_lanes(n, lanes, 0), arg_lanes(n, lanes, 1)
            a, b = self.simp(n.args[0], la), self.simp(n.args[1], lb)
            return self._binary(n.attrs[0], a, b, self._classes(a, n.args[0], la), self._classes(b, n.args[1], lb))
        if op == "reduce" and n.attrs[1] is not None:
            k, rng = bound_var(f"i{n.uid}", n.args[0].shape[n.attrs[1]])
            with self.ctx.assume(rng):
                x = self.simp(n.args[0], arg_lanes(n, lanes, 0, k))
            if isinstance(x, SConst) and (n.attrs[0] != "sum" or x.value == 0.0 or math.isnan(x.value)):
                return x  # a reduction of one repeated constant (sums only of zeros)
            return None
        if op == "dot":
            k, rng = bound_var(f"i{n.uid}", n.args[0].shape[1])
            with self.ctx.assume(rng):
                a = self.simp(n.args[0], arg_lanes(n, lanes, 0, k))
                b_classes = self.values.kinds(n.args[1], arg_lanes(n, lanes, 1, k), self.run)
            if _is(a, math.nan):
                return SConst(math.nan)
            if _is(a, 0.0) and b_classes <= K.FINITE and len(n.args) == 3:
                return self.simp(n.args[2], lanes)  # trusted: dot(+0, finite, acc) == acc
            return None
        return None

    def _truth(self, c: FNode, lanes: tuple) -> frozenset:
        from proofs.walk import arg_lanes

        if c.op != "cmp":
            return self.values.truth(c, lanes, self.run)
        la, lb = arg_lanes(c, lanes, 0), arg_lanes(c, lanes, 1)
        a, b = self.simp(c.args[0], la), self.simp(c.args[1], lb)
        return K.compare(c.attrs[0], self._classes(a, c.args[0], la), self._classes(b, c.args[1], lb))

    def _binary(self, op: str, a, b, ca: frozenset, cb: frozenset):
        if isinstance(a, SConst) and isinstance(b, SConst):
            return _f32(_BIN[op], a.value, b.value)
        if op in ("add", "sub", "mul", "div") and (_is(a, math.nan) or _is(b, math.nan)):
            return SConst(math.nan)
        no_nan_a, no_nan_b = K.NAN not in ca, K.NAN not in cb
        if op == "add":
            for x, y, cx, ok in ((a, b, ca, no_nan_a), (b, a, cb, no_nan_b)):
                if x is not None and ok and (_is(y, -0.0) or _is(y, 0.0) and K.NZERO not in cx):
                    return x
        if op == "sub":
            if a is not None and no_nan_a and _is(b, 0.0):
                return a
            if isinstance(a, Sym) and a.same(b) and ca <= K.FINITE:
                return SConst(0.0)
            if _is(a, -math.inf) and not cb & {K.NINF, K.NAN}:
                return SConst(-math.inf)
        if op == "mul":
            for x, y, cx, ok in ((a, b, ca, no_nan_a), (b, a, cb, no_nan_b)):
                if x is not None and ok and _is(y, 1.0):
                    return x
                if _is(y, 0.0) and cx <= {K.PZERO, K.ONE, K.POS}:
                    return SConst(0.0)
        if op == "div" and a is not None and no_nan_a and _is(b, 1.0):
            return a
        if op in ("max", "min"):
            neutral = -math.inf if op == "max" else math.inf
            for x, y, ok in ((a, b, no_nan_a), (b, a, no_nan_b)):
                if x is not None and ok and _is(y, neutral):
                    return x
            if isinstance(a, Sym) and a.same(b):
                return a
        return None


def live_load(simp: Simplifier) -> tuple[FNode, tuple] | None:
    """A load the failed simplification kept whose mask may be on at its element: the extra
    iteration then folds live input data into the carried state (a real change, not imprecision)."""
    for node, lanes in simp.loads:
        mask = node.data["mask"]
        if mask is None or simp.ctx.possible(lanes_subst(mask, node.shape, lanes)):
            return node, lanes
    return None
