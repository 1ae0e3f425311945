"""Arithmetic on front-end values: integer tiles as Z3 terms, float tiles as FNodes.

Broadcasting follows Triton (numpy rules, ranks aligned on the right). Integer ``//`` and
``%`` on runtime values are C division and remainder (``arith.divsi``/``remsi``); on
constexprs they are Python's, exactly as Triton folds them.
"""

from __future__ import annotations

import z3

from proofs.errors import Unsupported
from proofs.names import tdiv, trem
from proofs.tir import AX, BoolVal, FNode, IntVal, PtrVal

__all__ = ["broadcast_shapes", "align", "int_term", "as_fnode", "int_binop", "float_binop",
           "compare", "promote", "expand", "WIDTHS"]

WIDTHS = {"int1": 1, "int8": 8, "uint8": 8, "int16": 16, "int32": 32, "uint32": 32, "int64": 64}
_FLOAT_RANK = {"float8e4nv": 0, "float8e5": 0, "bfloat16": 1, "float16": 1, "float32": 2, "float64": 3}


def broadcast_shapes(a: tuple, b: tuple, line: int) -> tuple:
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise Unsupported("broadcast", line, f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _shift(term: z3.ExprRef, by: int, rank: int) -> z3.ExprRef:
    if by == 0:
        return term
    return z3.substitute(term, *[(AX[k], AX[k + by]) for k in range(rank)])


def align(v, rank: int):
    """Prepend size-1 axes so ``v`` has ``rank`` axes (integer terms re-indexed)."""
    shape = getattr(v, "shape", ())
    by = rank - len(shape)
    if by <= 0:
        return v
    new_shape = (1,) * by + tuple(shape)
    if isinstance(v, IntVal):
        return IntVal(_shift(v.term, by, len(shape)), new_shape, v.width, v.nonneg)
    if isinstance(v, BoolVal):
        return BoolVal(_shift(v.term, by, len(shape)), new_shape)
    if isinstance(v, PtrVal):
        return PtrVal(v.tensor, _shift(v.offset, by, len(shape)), new_shape, v.width)
    if isinstance(v, FNode):
        return FNode("view", new_shape, v.dtype, (v,), attrs=(tuple([None] * by + list(range(len(shape)))),), line=v.line)
    return v


def expand(v, axis: int, line: int):
    """``v[:, None]``-style: insert a size-1 axis at ``axis``."""
    shape = tuple(v.shape)
    new_shape = shape[:axis] + (1,) + shape[axis:]
    if isinstance(v, FNode):
        amap = tuple(list(range(axis)) + [None] + list(range(axis, len(shape))))
        return FNode("view", new_shape, v.dtype, (v,), attrs=(amap,), line=line)
    pairs = [(AX[k], AX[k + 1]) for k in range(axis, len(shape))]
    sub = (lambda t: z3.substitute(t, *pairs)) if pairs else (lambda t: t)
    if isinstance(v, IntVal):
        return IntVal(sub(v.term), new_shape, v.width, v.nonneg)
    if isinstance(v, BoolVal):
        return BoolVal(sub(v.term), new_shape)
    if isinstance(v, PtrVal):
        return PtrVal(v.tensor, sub(v.offset), new_shape, v.width)
    raise Unsupported("indexing", line, f"cannot add an axis to {type(v).__name__}")


def int_term(v, line: int) -> IntVal:
    if isinstance(v, bool):
        return IntVal(z3.IntVal(int(v)), (), 32, True)
    if isinstance(v, int):
        return IntVal(z3.IntVal(v), (), 32 if -2**31 <= v < 2**31 else 64, v >= 0)
    if isinstance(v, IntVal):
        return v
    if isinstance(v, BoolVal):
        return IntVal(z3.If(v.term, 1, 0), v.shape, 1, True)
    raise Unsupported("integer arithmetic", line, f"operand of type {type(v).__name__}")


def promote(a: str, b: str) -> str:
    if a == b:
        return a
    ra, rb = _FLOAT_RANK.get(a, -1), _FLOAT_RANK.get(b, -1)
    if ra == rb:
        return "float32"
    return a if ra > rb else b


def as_fnode(v, dtype: str, line: int) -> FNode:
    """Turn a Python number or integer tile into a float tile of ``dtype``."""
    if isinstance(v, FNode):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return FNode("const", (), dtype, attrs=(float(v),), line=line)
    if isinstance(v, IntVal):
        return FNode("fromint", v.shape, dtype, data={"term": v.term}, line=line)
    if isinstance(v, BoolVal):
        return FNode("boolint", v.shape, "int1", data={"term": v.term}, line=line)
    raise Unsupported("float arithmetic", line, f"operand of type {type(v).__name__}")


def _record(ir, v: IntVal, line: int) -> IntVal:
    if ir is not None and v.width == 32:
        ir.widths[v.term.get_id()] = (32, line)
        ir.keep.append(v.term)
    return v


def int_binop(op: str, a, b, line: int, ir=None):
    """Integer/pointer/boolean binary operation on tiles (or a tile and a constexpr)."""
    if isinstance(a, PtrVal) or isinstance(b, PtrVal):
        if op not in ("add", "sub") or isinstance(b, PtrVal) and op == "add" and isinstance(a, PtrVal):
            raise Unsupported("pointer arithmetic", line, f"{op} on pointers")
        p, q = (a, b) if isinstance(a, PtrVal) else (b, a)
        q = int_term(q, line)
        shape = broadcast_shapes(p.shape, q.shape, line)
        p, q = align(p, len(shape)), align(q, len(shape))
        off = p.offset + q.term if op == "add" else p.offset - q.term
        res = _record(ir, IntVal(off, shape, max(p.width, q.width)), line)
        return PtrVal(p.tensor, res.term, shape, res.width)
    if op in ("and", "or", "xor") and (isinstance(a, BoolVal) or isinstance(b, BoolVal)):
        a = a if isinstance(a, BoolVal) else BoolVal(z3.BoolVal(bool(a)))
        b = b if isinstance(b, BoolVal) else BoolVal(z3.BoolVal(bool(b)))
        shape = broadcast_shapes(a.shape, b.shape, line)
        a, b = align(a, len(shape)), align(b, len(shape))
        fn = {"and": z3.And, "or": z3.Or, "xor": z3.Xor}[op]
        return BoolVal(fn(a.term, b.term), shape)
    a, b = int_term(a, line), int_term(b, line)
    shape = broadcast_shapes(a.shape, b.shape, line)
    a, b = align(a, len(shape)), align(b, len(shape))
    width = max(a.width, b.width, 32)
    x, y = a.term, b.term
    if op in ("floordiv", "mod") and z3.is_int_value(z3.simplify(y)) and z3.simplify(y).as_long() == 0:
        raise Unsupported(f"integer {op} by zero", line, "undefined behaviour in the compiled kernel")
    nonneg_b_const = z3.is_int_value(y) and y.as_long() > 0
    if op == "add":
        t, nn = x + y, a.nonneg and b.nonneg
    elif op == "sub":
        t, nn = x - y, False
    elif op == "mul":
        t, nn = x * y, a.nonneg and b.nonneg
    elif op == "floordiv":
        t = x / y if a.nonneg and nonneg_b_const else tdiv(x, y)
        nn = a.nonneg and b.nonneg
    elif op == "mod":
        t = x % y if a.nonneg and nonneg_b_const else trem(x, y)
        nn = a.nonneg and b.nonneg
    elif op in ("min", "max"):
        t = z3.If(x <= y, x, y) if op == "min" else z3.If(x >= y, x, y)
        nn = a.nonneg and b.nonneg if op == "min" else a.nonneg or b.nonneg
    else:
        raise Unsupported(f"integer operator {op}", line)
    return _record(ir, IntVal(t, shape, width, nn), line)


def compare(op: str, a, b, line: int):
    """Comparison: integer operands give a BoolVal, float operands an FNode of dtype int1."""
    if isinstance(a, FNode) or isinstance(b, FNode) or isinstance(a, float) or isinstance(b, float):
        return float_binop(op, a, b, line, cmp=True)
    a, b = int_term(a, line), int_term(b, line)
    shape = broadcast_shapes(a.shape, b.shape, line)
    a, b = align(a, len(shape)), align(b, len(shape))
    x, y = a.term, b.term
    fn = {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}
    return BoolVal(fn[op], shape)


def float_binop(op: str, a, b, line: int, cmp: bool = False) -> FNode:
    """Float binary op (add, sub, mul, div, max, min) or comparison on float tiles."""
    dtype = None
    for v in (a, b):
        if isinstance(v, FNode) and v.dtype != "int1":
            dtype = v.dtype if dtype is None else promote(dtype, v.dtype)
    dtype = dtype or "float32"
    a, b = as_fnode(a, dtype, line), as_fnode(b, dtype, line)
    shape = broadcast_shapes(a.shape, b.shape, line)
    a, b = align(a, len(shape)), align(b, len(shape))
    if cmp:
        return FNode("cmp", shape, "int1", (a, b), attrs=(op,), line=line)
    if op in ("and", "or"):
        return FNode("binary", shape, "int1", (a, b), attrs=(op,), line=line)
    return FNode("binary", shape, dtype, (a, b), attrs=(op,), line=line)
