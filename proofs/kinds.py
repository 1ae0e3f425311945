"""The float value lattice of the forward value analysis: sets of eight value classes.

A value's abstraction is a frozenset of classes: NaN, -inf, finite negative, -0, +0, 1,
finite positive other than 1, +inf. Signed zeros are kept apart because ``(-0) + (+0) = +0``
breaks identity steps. Transfer functions are computed once by evaluating float32
representatives of every class (including denormals, values near overflow and 1 ± ulp), so
underflow to zero, overflow to infinity and rounding to 1 are all covered.
"""

from __future__ import annotations

import itertools
import math
import warnings
from functools import lru_cache

import numpy as np

__all__ = ["NAN", "NINF", "NEG", "NZERO", "PZERO", "ONE", "POS", "PINF", "FINITE", "TOP",
           "EXACT", "classify", "unary", "binary", "compare", "closure", "exact_value", "show"]

NAN, NINF, NEG, NZERO, PZERO, ONE, POS, PINF = "nan", "-inf", "neg", "-0", "+0", "one", "pos", "+inf"
ALL = (NAN, NINF, NEG, NZERO, PZERO, ONE, POS, PINF)
TOP = frozenset(ALL)
FINITE = frozenset((NEG, NZERO, PZERO, ONE, POS))
EXACT = {NINF: -math.inf, NZERO: -0.0, PZERO: 0.0, ONE: 1.0, PINF: math.inf}
_F = np.float32
_REPS = {
    NAN: [_F("nan")],
    NINF: [_F("-inf")],
    NEG: [_F(-3.0e38), _F(-2.0), _F(-1.0000001), _F(-1.0), _F(-0.99999994), _F(-0.5), _F(-1e-38), _F(-1e-45)],
    NZERO: [_F(-0.0)],
    PZERO: [_F(0.0)],
    ONE: [_F(1.0)],
    POS: [_F(1e-45), _F(1e-38), _F(0.5), _F(0.99999994), _F(1.0000001), _F(2.0), _F(3.0e38)],
    PINF: [_F("inf")],
}


def classify(x: float) -> str:
    """The class of one float value."""
    x = float(x)
    if math.isnan(x):
        return NAN
    if math.isinf(x):
        return NINF if x < 0 else PINF
    if x == 0.0:
        return NZERO if math.copysign(1.0, x) < 0 else PZERO
    if x == 1.0:
        return ONE
    return NEG if x < 0 else POS


def exact_value(kinds: frozenset) -> float | None:
    """The single value a class set denotes, if it denotes exactly one (e.g. {+0} -> 0.0)."""
    if len(kinds) == 1:
        (k,) = kinds
        return EXACT.get(k)
    return None


def show(kinds: frozenset) -> str:
    return "{" + ",".join(k for k in ALL if k in kinds) + "}"


_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: _F(1.0) / np.sqrt(x), "neg": np.negative, "abs": np.abs,
    "sigmoid": lambda x: _F(1.0) / (_F(1.0) + np.exp(-x)), "cos": np.cos, "sin": np.sin,
    "tanh": np.tanh, "erf": None,
}
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "max": np.fmax, "min": np.fmin,  # tl.maximum/minimum default: NaN only if both are NaN
}
_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


def _finite_only(result: set, operands: tuple, no_overflow: bool) -> frozenset:
    # Premise "no overflow": arithmetic on finite operands yields finite results.
    if no_overflow and all(k in FINITE for k in operands):
        result -= {NINF, PINF, NAN}
    return frozenset(result)


def _classes(values: np.ndarray) -> frozenset:
    """Classes of every value of a float32 array (vectorised :func:`classify`)."""
    v = np.asarray(values, dtype=np.float32).ravel()
    nan, inf = np.isnan(v), np.isinf(v)
    zero, neg = v == 0, np.signbit(v)
    finite = ~nan & ~inf & ~zero
    out = set()
    for cls, mask in ((NAN, nan), (NINF, inf & neg), (PINF, inf & ~neg), (NZERO, zero & neg), (PZERO, zero & ~neg),
                      (ONE, finite & (v == 1)), (NEG, finite & neg), (POS, finite & ~neg & (v != 1))):
        if mask.any():
            out.add(cls)
    return frozenset(out)


_ARRAYS = {k: np.array(vs, dtype=np.float32) for k, vs in _REPS.items()}


@lru_cache(maxsize=None)
def _unary_table(op: str) -> dict:
    fn = _UNARY.get(op)
    out = {}
    for k in ALL:
        if fn is None:
            out[k] = TOP
            continue
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out[k] = _classes(fn(_ARRAYS[k]))
    return out


@lru_cache(maxsize=None)
def _binary_table(op: str) -> dict:
    fn = _BINARY[op]
    out = {}
    for a, b in itertools.product(ALL, ALL):
        with np.errstate(all="ignore"):
            out[a, b] = _classes(fn(_ARRAYS[a][:, None], _ARRAYS[b][None, :]))
    return out


def unary(op: str, x: frozenset, *, no_overflow: bool = False) -> frozenset:
    """Classes of ``op(x)``."""
    table = _unary_table(op)
    res: set = set()
    for k in x:
        res |= _finite_only(set(table[k]), (k,), no_overflow)
    return frozenset(res)


def binary(op: str, x: frozenset, y: frozenset, *, no_overflow: bool = False) -> frozenset:
    """Classes of ``x op y`` (op in add, sub, mul, div, max, min)."""
    table = _binary_table(op)
    res: set = set()
    for a in x:
        for b in y:
            if op == "div" and no_overflow and b in (NZERO, PZERO):
                res |= table[a, b]  # division by zero is never excused by the premise
                continue
            res |= _finite_only(set(table[a, b]), (a, b), no_overflow)
    return frozenset(res)


def compare(op: str, x: frozenset, y: frozenset) -> frozenset:
    """Possible truth values of ``x op y`` as a subset of {True, False}."""
    fn = _CMP[op]
    out = set()
    for a in x:
        for b in y:
            out.update(bool(t) for t in np.unique(fn(_ARRAYS[a][:, None], _ARRAYS[b][None, :])))
    return frozenset(out)


def closure(op: str, lanes: frozenset, *, no_overflow: bool = False) -> frozenset:
    """Classes of a reduction ``op`` over any non-empty multiset of lanes drawn from ``lanes``."""
    acc = frozenset(lanes)
    while True:
        nxt = acc | binary(op, acc, lanes, no_overflow=no_overflow)
        if nxt == acc:
            return acc
        acc = nxt
