"""Front end: symbolic evaluation of a restricted-Triton kernel body into the tile IR.

The kernel's Python AST is evaluated once per launch with constexprs folded (as Triton's code
generator folds them): integer tiles become Z3 terms, float tiles FNodes, loads/stores are
recorded as :class:`~proofs.tir.Access` sites, and ``for`` loops become :class:`~proofs.tir.Loop`
records (see :mod:`proofs.loops`). Anything outside the subset raises
:class:`~proofs.errors.Unsupported` with the operation and source line.
"""

from __future__ import annotations

import ast
from typing import Any

import z3

from proofs.contract import Contract
from proofs.errors import ContractError, Unsupported
from proofs.interp_expr import ExprEval, Method, TLRef, is_const
from proofs.names import LaunchNames
from proofs.source import KernelSource
from proofs.tir import FNode, IntVal, KernelIR, PtrVal

__all__ = ["Interp", "build_ir", "TLRef", "Method"]


class Interp(ExprEval):
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
        nonneg = self._nonnegative_params()
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
                    self.env[name] = IntVal(self.names.param(name), (), 64 if spec.dtype == "int64" else 32,
                                            name in nonneg)
            elif name in defaults:
                self.env[name] = constexprs[name] = self.eval(defaults[name])
            else:
                kind = "constexpr" if name in self.src.constexpr_params else "argument"
                raise ContractError(f"kernel {self.src.name} {kind} {name!r} has no value: give it in the plan, "
                                    f"with --constexpr {name}=VALUE, or describe it in the contract "
                                    "([tensors] for pointers, [params] for scalars)")
        self.ir.pids = tuple(self.names.pid(k) for k in range(len(self.contract.grid)))
        self.ir.grid = tuple(self.names.expr(g) for g in self.contract.grid)

    def _nonnegative_params(self) -> set[str]:
        """Integer arguments the contract's premises make non-negative: their ``//`` and ``%``
        are floor division and modulo (equal to C's under the premise, and simpler for Z3)."""
        solver = z3.Solver()
        solver.set("rlimit", 200_000)
        solver.add(*[self.names.expr(t) for t in self.contract.assume])
        out = set()
        for name, spec in self.contract.params.items():
            if not spec.dtype.startswith("float") and solver.check(self.names.param(name) < 0) == z3.unsat:
                out.add(name)
        return out

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

def build_ir(src: KernelSource, contract: Contract, constexprs: dict[str, Any], run: str,
             static: dict[str, Any] | None = None) -> tuple[KernelIR, LaunchNames]:
    """Evaluate ``src`` for launch ``run``; return its IR and symbols.

    ``static`` holds configuration values (e.g. the plan's static shape) that contract
    expressions may name besides the constexprs.
    """
    interp = Interp(src, contract, constexprs, run, static)
    return interp.execute(), interp.names
