"""Z3 symbols of one launch, and contract expressions compiled to Z3 terms.

Each launch ("A" or "B") gets its own program ids, ``batch`` parameters, group indices and
integer-tensor contents (uninterpreted functions of the logical index); ``same`` parameters,
constexprs and contract symbols are shared by both launches.
"""

from __future__ import annotations

import ast
from typing import Any

import z3

from proofs.contract import Contract
from proofs.errors import ContractError

__all__ = ["LaunchNames", "tdiv", "trem", "cdiv_term"]


def tdiv(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """C (truncating) division, as Triton's ``//`` on integers."""
    if z3.is_int_value(b) and b.as_long() > 0:
        return z3.If(a >= 0, a / b, -((-a) / b))
    return z3.If(b > 0, z3.If(a >= 0, a / b, -((-a) / b)), z3.If(a >= 0, -(a / -b), (-a) / -b))


def trem(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """C remainder (sign of the dividend), as Triton's ``%`` on integers."""
    return a - b * tdiv(a, b)


def cdiv_term(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return tdiv(a + b - 1, b)


class LaunchNames:
    """Symbols of launch ``run`` under ``contract`` with constexpr values ``constexprs``."""

    def __init__(self, run: str, contract: Contract, constexprs: dict[str, Any]) -> None:
        self.run = run
        self.contract = contract
        self.constexprs = constexprs
        self._ufs: dict[str, z3.FuncDeclRef] = {}
        self._exprs: dict[str, Any] = {}
        self._binding: set[str] = set()

    def var(self, name: str, shared: bool = False) -> z3.ArithRef:
        return z3.Int(name if shared else f"{name}@{self.run}")

    def param(self, name: str) -> z3.ArithRef:
        spec = self.contract.params[name]
        return self.var(name, shared=spec.kind == "same")

    def pid(self, axis: int) -> z3.ArithRef:
        return self.var(f"pid{axis}")

    def group(self, name: str) -> z3.ArithRef:
        return self.var(name)

    def symbol(self, name: str) -> z3.ArithRef:
        return self.var(name, shared=True)

    def uf(self, tensor: str) -> z3.FuncDeclRef:
        """Contents of an integer tensor in this launch, as a function of its logical index."""
        if tensor not in self._ufs:
            rank = len(self.contract.tensors[tensor].shape)
            self._ufs[tensor] = z3.Function(f"{tensor}@{self.run}", *([z3.IntSort()] * (rank + 1)))
        return self._ufs[tensor]

    def bound(self, name: str) -> z3.ArithRef:
        """The placeholder of a bound index variable in ``each`` premises."""
        return z3.Int(f"_each_{name}")

    def each(self, tensor: str) -> list[tuple[tuple[str, ...], tuple, z3.BoolRef]]:
        """(tensors, bound index placeholders, premise) of every ``each`` premise naming ``tensor``."""
        key = f"@each:{tensor}"
        if key not in self._exprs:
            out = []
            for e in self.contract.each:
                if tensor in e.tensors:
                    self._binding = set(e.index)
                    try:
                        holds = z3.And(*[self.expr(h) for h in e.holds])
                        cond = z3.BoolVal(True) if e.where == "True" else self.expr(e.where)
                    finally:
                        self._binding = set()
                    out.append((e.tensors, tuple(self.bound(n) for n in e.index), z3.Implies(cond, holds)))
            self._exprs[key] = out
        return self._exprs[key]

    def resolve(self, name: str) -> z3.ArithRef | int:
        if name in getattr(self, "_binding", ()):
            return self.bound(name)
        if name in self.constexprs and isinstance(self.constexprs[name], (int, bool)):
            return int(self.constexprs[name])
        if name in self.contract.params:
            return self.param(name)
        if name in self.contract.groups:
            return self.group(name)
        if name in self.contract.symbols:
            return self.symbol(name)
        raise ContractError(f"{self.contract.path or '<contract>'}: unknown name {name!r} in an expression; "
                            "names are params, constexprs, groups and symbols")

    def expr(self, text: str | int) -> Any:
        """Compile a contract expression (Python syntax) to a Z3 term of this launch."""
        if isinstance(text, int):
            return z3.IntVal(text)
        hit = None if getattr(self, "_binding", None) else self._exprs.get(text)
        if hit is None:
            try:
                tree = ast.parse(text, mode="eval").body
            except SyntaxError:
                raise ContractError(f"{self.contract.path or '<contract>'}: cannot parse expression {text!r}") from None
            hit = _Compiler(self, text).visit(tree)
            if not getattr(self, "_binding", None):
                self._exprs[text] = hit
        return hit


class _Compiler(ast.NodeVisitor):
    def __init__(self, names: LaunchNames, text: str) -> None:
        self.names, self.text = names, text

    def fail(self, what: str) -> ContractError:
        return ContractError(f"{self.names.contract.path or '<contract>'}: in {self.text!r}: {what}")

    def generic_visit(self, node: ast.AST) -> Any:
        raise self.fail(f"unsupported syntax {type(node).__name__}")

    def visit_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise self.fail(f"only integer literals are allowed, got {node.value!r}")
        return z3.IntVal(node.value)

    def visit_Name(self, node: ast.Name) -> Any:
        value = self.names.resolve(node.id)
        return z3.IntVal(value) if isinstance(value, int) else value

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        a, b = self.visit(node.left), self.visit(node.right)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a / b, ast.Mod: lambda: a % b,
               ast.Pow: lambda: z3.IntVal(int(z3.simplify(a).as_long() ** z3.simplify(b).as_long()))}
        if type(node.op) not in ops:
            raise self.fail(f"operator {type(node.op).__name__} is not supported")
        return ops[type(node.op)]()

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.Not):
            return z3.Not(v)
        raise self.fail("unsupported unary operator")

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        vals = [self.visit(v) for v in node.values]
        return z3.And(*vals) if isinstance(node.op, ast.And) else z3.Or(*vals)

    def visit_Compare(self, node: ast.Compare) -> Any:
        ops = {ast.Lt: lambda x, y: x < y, ast.LtE: lambda x, y: x <= y, ast.Gt: lambda x, y: x > y,
               ast.GtE: lambda x, y: x >= y, ast.Eq: lambda x, y: x == y, ast.NotEq: lambda x, y: x != y}
        left, parts = self.visit(node.left), []
        for op, comp in zip(node.ops, node.comparators):
            right = self.visit(comp)
            parts.append(ops[type(op)](left, right))
            left = right
        return z3.And(*parts) if len(parts) > 1 else parts[0]

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        return z3.If(self.visit(node.test), self.visit(node.body), self.visit(node.orelse))

    def visit_Call(self, node: ast.Call) -> Any:
        fname = ast.unparse(node.func)
        args = [self.visit(a) for a in node.args]
        if fname == "cdiv" and len(args) == 2:
            return (args[0] + args[1] - 1) / args[1]
        if fname in ("min", "max") and len(args) == 2:
            a, b = args
            return z3.If(a <= b, a, b) if fname == "min" else z3.If(a >= b, a, b)
        raise self.fail(f"unknown function {fname}; use cdiv, min or max")

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        tensor = ast.unparse(node.value)
        spec = self.names.contract.tensors.get(tensor)
        if spec is None or spec.is_float:
            raise self.fail(f"{tensor} is not an integer tensor of the contract")
        idx = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(idx) != len(spec.shape):
            raise self.fail(f"{tensor} has {len(spec.shape)} dimension(s)")
        return self.names.uf(tensor)(*[self.visit(i) for i in idx])
