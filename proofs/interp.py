"""Front end: symbolic evaluation of a restricted-Triton kernel body into the tile IR.

The kernel's Python AST is evaluated once per launch with constexprs folded (as Triton's code
generator folds them): integer tiles become Z3 terms, float tiles FNodes, loads/stores are
recorded as :class:`~proofs.tir.Access` sites, and ``for`` loops become :class:`~proofs.tir.Loop`
records (see :mod:`proofs.loops`). Anything outside the subset raises
:class:`~proofs.errors.Unsupported` with the operation and source line.
"""

from __future__ import annotations

import ast
import builtins
import operator
from typing import Any

import z3

from proofs import tiles
from proofs.contract import Contract
from proofs.errors import ContractError, Unsupported
from proofs.names import LaunchNames
from proofs.source import KernelSource
from proofs.tir import BoolVal, Dtype, FNode, IntVal, KernelIR, PtrVal

__all__ = ["Interp", "build_ir", "TLRef", "Method"]

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


class Interp:
    """Evaluates one kernel specialization for one launch (``run`` is "A" or "B")."""

    def __init__(self, src: KernelSource, contract: Contract, constexprs: dict[str, Any], run: str,
                 static: dict[str, Any] | None = None) -> None:
        self.src, self.contract, self.run = src, contract, run
        self.names = LaunchNames(run, contract, {**(static or {}), **constexprs})
        self.ir = KernelIR(name=src.name, run=run, constexprs=dict(constexprs))
        self.env: dict[str, Any] = {}
        self.loop_stack: list[int] = []
        self.recording = True
        self.next_loop_id = 1
        self.next_site = 1
        self.line = src.func.lineno

    # -- driver -----------------------------------------------------------------------------
    def bind_params(self) -> None:
        func = self.src.func
        defaults = dict(zip([a.arg for a in func.args.args][-len(func.args.defaults):] if func.args.defaults else [],
                            func.args.defaults))
        constexprs = self.ir.constexprs
        for arg in func.args.args:
            name = arg.arg
            if name in constexprs:
                self.env[name] = constexprs[name]
            elif name in self.contract.tensors:
                self.env[name] = PtrVal(name, z3.IntVal(0), (), 32)
            elif name in self.contract.params:
                spec = self.contract.params[name]
                if spec.dtype.startswith("float"):
                    self.env[name] = FNode("param", (), "float32", attrs=(name, spec.kind), line=func.lineno)
                else:
                    self.env[name] = IntVal(self.names.param(name), (), 64 if spec.dtype == "int64" else 32)
            elif name in defaults:
                self.env[name] = constexprs[name] = self.eval(defaults[name])
            else:
                kind = "constexpr" if name in self.src.constexpr_params else "argument"
                raise ContractError(f"kernel {self.src.name} {kind} {name!r} has no value: give it in the plan, "
                                    f"with --constexpr {name}=VALUE, or describe it in the contract "
                                    "([tensors] for pointers, [params] for scalars)")
        self.ir.pids = tuple(self.names.pid(k) for k in range(len(self.contract.grid)))
        self.ir.grid = tuple(self.names.expr(g) for g in self.contract.grid)

    def execute(self) -> KernelIR:
        self.bind_params()
        body = list(self.src.func.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # docstring
        if body and isinstance(body[-1], ast.Return) and body[-1].value is None:
            body = body[:-1]
        self.exec_block(body)
        return self.ir

    # -- statements -------------------------------------------------------------------------
    def exec_block(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.line = stmt.lineno
            self.exec_stmt(stmt)

    def exec_stmt(self, stmt: ast.stmt) -> None:
        from proofs.loops import exec_for

        if isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value)
            for target in stmt.targets:
                self.assign(target, value)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value))
        elif isinstance(stmt, ast.AugAssign):
            current = self.eval(stmt.target)
            self.assign(stmt.target, self.binop(type(stmt.op), current, self.eval(stmt.value)))
        elif isinstance(stmt, ast.Expr):
            if not (isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):
                self.eval(stmt.value)
        elif isinstance(stmt, ast.For):
            exec_for(self, stmt)
        elif isinstance(stmt, ast.If):
            cond = self.eval(stmt.test)
            if not is_const(cond):
                raise Unsupported("if on a runtime value", stmt.lineno, "only constexpr conditions are in the subset")
            self.exec_block(stmt.body if cond else stmt.orelse)
        elif isinstance(stmt, ast.Pass):
            pass
        elif isinstance(stmt, ast.Assert):
            cond = self.eval(stmt.test)
            if not is_const(cond):
                raise Unsupported("assert on a runtime value", stmt.lineno)
            if not cond:
                raise Unsupported("static assertion failure", stmt.lineno, ast.unparse(stmt.test))
        elif isinstance(stmt, ast.Return):
            raise Unsupported("early return", stmt.lineno, "return is only allowed as the last statement")
        else:
            raise Unsupported(type(stmt).__name__.lower() + " statement", stmt.lineno)

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, tuple):
            if len(target.elts) != len(value):
                raise Unsupported("tuple assignment", self.line, "length mismatch")
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        else:
            raise Unsupported("assignment target", self.line, ast.unparse(target))

    # -- expressions ------------------------------------------------------------------------
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


def build_ir(src: KernelSource, contract: Contract, constexprs: dict[str, Any], run: str,
             static: dict[str, Any] | None = None) -> tuple[KernelIR, LaunchNames]:
    """Evaluate ``src`` for launch ``run``; return its IR and symbols.

    ``static`` holds configuration values (e.g. the plan's static shape) that contract
    expressions may name besides the constexprs.
    """
    interp = Interp(src, contract, constexprs, run, static)
    return interp.execute(), interp.names
