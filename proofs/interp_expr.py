"""Expression evaluation of the front end: names, attributes, calls, operators, indexing.

Constexpr-only operations run in Python (as Triton folds them); anything involving a tile goes
through :mod:`proofs.tiles` and :mod:`proofs.tlcalls`.
"""

from __future__ import annotations

import ast
import builtins
import operator
from typing import Any

import z3

from proofs import tiles
from proofs.errors import Unsupported
from proofs.tir import BoolVal, Dtype, FNode, IntVal, PtrVal

__all__ = ["ExprEval", "TLRef", "Method", "is_const"]

_PY_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
              ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
              ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_OPNAMES = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
            ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor"}
_CMPNAMES = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PY_CMPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not}


class TLRef:
    """A name inside ``triton.language`` (``tl.load``, ``tl.float32``, ``tl.math`` …)."""

    def __init__(self, path: str) -> None:
        self.path = path


class Method:
    """A bound tile method such as ``x.to``."""

    def __init__(self, obj: Any, name: str) -> None:
        self.obj, self.name = obj, name


def is_const(v: Any) -> bool:
    return isinstance(v, (int, float, bool, str, Dtype, tuple)) or v is None


class ExprEval:
    """Mixin of :class:`proofs.interp.Interp`: the ``eval_*`` methods, one per expression node."""

    def eval(self, node: ast.expr) -> Any:
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            raise Unsupported(type(node).__name__ + " expression", getattr(node, "lineno", self.line),
                              ast.unparse(node))
        return method(node)

    def eval_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def eval_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.eval(e) for e in node.elts)

    eval_List = eval_Tuple

    def eval_Name(self, node: ast.Name) -> Any:
        name = node.id
        if name in self.env:
            return self.env[name]
        if name in self.src.globals:
            return self.src.globals[name]
        if name in self.src.tl_aliases:
            return TLRef("")
        if name in ("range", "min", "max", "float", "int", "len", "abs", "bool"):
            return getattr(builtins, name)
        if name == "triton":
            return TLRef("@triton")
        raise Unsupported("name", node.lineno, f"{name!r} is not defined in the kernel or its module")

    def eval_Attribute(self, node: ast.Attribute) -> Any:
        base = self.eval(node.value)
        attr = node.attr
        if isinstance(base, TLRef):
            if base.path == "@triton":
                if attr == "language":
                    return TLRef("")
                return TLRef("@triton." + attr)
            path = f"{base.path}.{attr}" if base.path else attr
            from proofs.tlcalls import DTYPES
            if path in DTYPES:
                return Dtype(DTYPES[path])
            return TLRef(path)
        if attr == "dtype":
            if isinstance(base, PtrVal):
                return Dtype(self.contract.tensors[base.tensor].dtype)
            if isinstance(base, FNode):
                return Dtype(base.dtype)
            if isinstance(base, IntVal):
                return Dtype("int64" if base.width == 64 else "int32")
        if isinstance(base, Dtype) and attr == "element_ty":
            return base
        if attr == "shape" and hasattr(base, "shape"):
            return tuple(base.shape)
        if attr == "T" and isinstance(base, FNode):
            from proofs.tlcalls import trans
            return trans(self, base)
        if isinstance(base, (FNode, IntVal, BoolVal, PtrVal)):
            return Method(base, attr)
        raise Unsupported("attribute", node.lineno, ast.unparse(node))

    def eval_Call(self, node: ast.Call) -> Any:
        from proofs.tlcalls import call_builtin, call_method, call_tl

        func = self.eval(node.func)
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
        if isinstance(func, TLRef):
            return call_tl(self, func.path, args, kwargs, node)
        if isinstance(func, Method):
            return call_method(self, func, args, kwargs, node)
        if func in (builtins.min, builtins.max, builtins.float, builtins.int, builtins.len, builtins.abs,
                    builtins.bool):
            return call_builtin(self, func, args, node)
        raise Unsupported("call", node.lineno, f"{ast.unparse(node.func)} (helper calls are outside the subset)")

    def eval_Subscript(self, node: ast.Subscript) -> Any:
        base = self.eval(node.value)
        if isinstance(base, tuple):
            idx = self.eval(node.slice)
            if isinstance(idx, int):
                return base[idx]
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if not all(isinstance(i, ast.Slice) and i.lower is i.upper is i.step is None
                   or isinstance(i, ast.Constant) and i.value is None for i in items):
            raise Unsupported("indexing", node.lineno, f"{ast.unparse(node)}: only [:, None]-style axis insertion")
        axis, value = 0, base
        for i in items:
            if isinstance(i, ast.Constant):
                value = tiles.expand(value, axis, node.lineno)
            axis += 1
        return value

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.eval(node.operand)
        if is_const(v):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                    ast.Invert: operator.invert}[type(node.op)](v)
        if isinstance(node.op, ast.USub):
            if isinstance(v, FNode):
                return FNode("unary", v.shape, v.dtype, (v,), attrs=("neg",), line=node.lineno)
            return tiles.int_binop("sub", 0, v, node.lineno, self.ir)
        if isinstance(node.op, (ast.Not, ast.Invert)):
            if isinstance(v, BoolVal):
                return BoolVal(z3.Not(v.term), v.shape)
            if isinstance(v, FNode) and v.dtype == "int1":
                return FNode("unary", v.shape, "int1", (v,), attrs=("not",), line=node.lineno)
        raise Unsupported("unary operator", node.lineno, ast.unparse(node))

    def eval_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(type(node.op), self.eval(node.left), self.eval(node.right))

    def binop(self, op: type, a: Any, b: Any) -> Any:
        if is_const(a) and is_const(b):
            return _PY_BINOPS[op](a, b)
        name = _OPNAMES.get(op)
        if name is None:
            raise Unsupported("binary operator " + op.__name__, self.line)
        floats = any(isinstance(v, FNode) or isinstance(v, float) for v in (a, b))
        if floats or name == "div":
            if name in ("floordiv", "mod", "xor"):
                raise Unsupported(f"float {name}", self.line)
            return tiles.float_binop(name, a, b, self.line)
        return tiles.int_binop(name, a, b, self.line, self.ir)

    def eval_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise Unsupported("chained comparison", node.lineno)
        a, b = self.eval(node.left), self.eval(node.comparators[0])
        if is_const(a) and is_const(b):
            return _PY_CMPS[type(node.ops[0])](a, b)
        if type(node.ops[0]) not in _CMPNAMES:
            raise Unsupported("comparison", node.lineno, ast.unparse(node))
        return tiles.compare(_CMPNAMES[type(node.ops[0])], a, b, node.lineno)

    def eval_BoolOp(self, node: ast.BoolOp) -> Any:
        vals = [self.eval(v) for v in node.values]
        if not all(is_const(v) for v in vals):
            raise Unsupported("and/or on runtime values", node.lineno, "use & and | on masks")
        return all(vals) if isinstance(node.op, ast.And) else any(vals)

    def eval_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.eval(node.test)
        if not is_const(cond):
            raise Unsupported("conditional expression on a runtime value", node.lineno, "use tl.where")
        return self.eval(node.body if cond else node.orelse)
