"""Check a contract's premises against the launch wrapper's asserts (host glue).

The wrapper is the module function that launches the kernel (``kernel[grid](...)``); its
asserts, and those of module functions it calls, are translated where possible: a launch
argument's expression (``x.stride(0)``) becomes the kernel parameter it is passed as,
``c["K"]`` (``c = entry.constexpr_dict()``) the configuration value, and ``t.shape[k]``,
``t.stride(k)``, ``t.is_contiguous()`` of a tensor passed as a pointer argument the contract's
layout of that tensor. A premise implied (Z3) by the translated asserts is reported as checked,
naming the assert lines; the rest stay trusted. Premises naming the selected element (groups,
symbols, tensor contents) define the claim rather than the host's duty and are listed as such.
"""

from __future__ import annotations

import ast
from typing import Any

import z3

from proofs.contract import Contract
from proofs.names import LaunchNames
from proofs.source import KernelSource
from proofs.wrapper_ast import launch_site, local_defs, resolve, wrapper_asserts
from proofs.z3state import fresh_context

__all__ = ["checked_premises", "SELECTION", "EXTENTS"]

SELECTION = "selects the element the claim is about"
EXTENTS = "every tensor's element extent is below 2**31 (32-bit offsets)"
_MAX_INDEX = {"MAX_INDEX": 2**31 - 1}


class _Translator:
    """Wrapper expressions → Z3 terms of launch A (None when not translatable)."""

    def __init__(self, src: KernelSource, contract: Contract, names: LaunchNames, args: dict[str, str],
                 constants: dict[str, Any]) -> None:
        self.contract, self.names, self.args, self.constants = contract, names, args, constants
        self.extents: set[str] = set()  # tensors whose largest offset the wrapper bounds
        self.globals = {**_MAX_INDEX, **{k: v for k, v in src.globals.items() if isinstance(v, int)}}

    def term(self, e: ast.expr) -> Any:
        text = ast.unparse(e)
        if text in self.args:
            return self._param(self.args[text])
        if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return z3.IntVal(e.value)
        if isinstance(e, ast.Name) and e.id in self.globals:
            return z3.IntVal(self.globals[e.id])
        if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, str):
            value = self.constants.get(e.slice.value)
            return z3.IntVal(int(value)) if isinstance(value, (int, bool)) else None
        if isinstance(e, ast.BinOp):
            a, b = self.term(e.left), self.term(e.right)
            if a is None or b is None:
                return None
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a / b, ast.Mod: lambda: a % b}
            return ops[type(e.op)]() if type(e.op) in ops else None
        if isinstance(e, ast.Call) and ast.unparse(e.func) == "max_offset" and len(e.args) == 1:
            return self.max_offset(e.args[0])
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "stride" and e.args:
            return self._layout(e.func.value, "strides", e.args[0])
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
            return self._layout(e.value.value, "shape", e.slice)
        return None

    def _param(self, name: str) -> Any:
        if name in self.contract.params and not self.contract.params[name].dtype.startswith("float"):
            return self.names.param(name)
        return None

    def _tensor(self, e: ast.expr):
        name = self.args.get(ast.unparse(e))
        return self.contract.tensors.get(name) if name else None

    def _layout(self, tensor: ast.expr, field: str, index: ast.expr) -> Any:
        spec = self._tensor(tensor)
        if spec is None or not isinstance(index, ast.Constant) or not isinstance(index.value, int):
            return None
        dims = getattr(spec, field)
        k = index.value
        return self.names.expr(dims[k]) if -len(dims) <= k < len(dims) else None

    def max_offset(self, e: ast.expr) -> Any:
        """``max_offset(t)`` (kernels/tensors.py): the largest element offset, Σ (dim - 1) * stride."""
        spec = self._tensor(e)
        if spec is None:
            return None
        self.extents.add(spec.name)
        return z3.Sum([(self.names.expr(d) - 1) * self.names.expr(s) for d, s in zip(spec.shape, spec.strides)])

    def fact(self, e: ast.expr) -> list[z3.BoolRef]:
        """Facts an assert of ``e`` establishes (conjuncts that translate; others dropped)."""
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            inner = self.fact(e.operand)
            return [z3.Not(z3.And(*inner))] if len(inner) == 1 else []
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.left, ast.Call) \
                and ast.unparse(e.left.func) == "max" and isinstance(e.ops[0], (ast.Lt, ast.LtE)):
            return [f for arg in e.left.args for f in self.fact(ast.Compare(arg, e.ops, e.comparators))]
        if isinstance(e, ast.BoolOp) and isinstance(e.op, ast.And):
            return [f for v in e.values for f in self.fact(v)]
        if isinstance(e, ast.BoolOp) and isinstance(e.op, ast.Or):
            parts = [self.fact(v) for v in e.values]
            return [z3.Or(*[z3.And(*p) for p in parts])] if all(parts) else []
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "is_contiguous":
            spec = self._tensor(e.func.value)
            if spec is None:
                return []
            dims = [self.names.expr(d) for d in spec.shape]
            strides = [self.names.expr(s) for s in spec.strides]
            out, expected = [], z3.IntVal(1)
            for k in range(len(dims) - 1, -1, -1):
                out.append(strides[k] == expected)
                expected = expected * dims[k]
            return out
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            left, right = e.left, e.comparators[0]
            if isinstance(left, ast.Call) and ast.unparse(left.func) == "tuple" and left.args:
                left = left.args[0]
            if isinstance(left, ast.Attribute) and left.attr == "shape" and isinstance(right, ast.Tuple) \
                    and isinstance(e.ops[0], ast.Eq):
                return [f for k, r in enumerate(right.elts) for f in self.fact(ast.Compare(
                    ast.Subscript(left, ast.Constant(k)), [ast.Eq()], [r]))]
            a, b = self.term(left), self.term(right)
            if a is None or b is None:
                return []
            ops = {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b, ast.Eq: a == b, ast.NotEq: a != b}
            return [ops[type(e.ops[0])]] if type(e.ops[0]) in ops else []
        return []


def _selection_names(contract: Contract) -> set[str]:
    return set(contract.groups) | set(contract.symbols)


def checked_premises(src: KernelSource, contract: Contract, constexprs: dict[str, Any] | None = None,
                     static: dict[str, Any] | None = None) -> dict[str, str]:
    """For each ``assume`` premise: how it is established (a wrapper assert, or the selection)."""
    with fresh_context():  # like a verification, independent of earlier solver work in the process
        return _checked_premises(src, contract, constexprs, static)


def _checked_premises(src: KernelSource, contract: Contract, constexprs: dict[str, Any] | None,
                      static: dict[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    selection = _selection_names(contract)
    tensors = {n for n, t in contract.tensors.items() if not t.is_float}
    for text in contract.assume:
        used = {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
        if used & selection or any(f"{t}[" in text for t in tensors):
            out[text] = SELECTION
    site = launch_site(src)
    if site is None:
        return out
    fn, call = site
    constants = {**(static or {}), **(constexprs or {})}
    names = LaunchNames("A", contract, constants)
    params = [a.arg for a in src.func.args.args]
    subst = local_defs(fn)
    args = {ast.unparse(resolve(arg, subst)): p for p, arg in zip(params, call.args)}
    args.update({ast.unparse(resolve(k.value, subst)): k.arg for k in call.keywords if k.arg in params})
    facts: list[tuple[int, z3.BoolRef]] = []
    tr = _Translator(src, contract, names, args, constants)
    for spec in contract.tensors.values():  # tensor dimensions are never negative
        facts += [(0, names.expr(d) >= 0) for d in spec.shape]
    extent_lines = []
    for line, test, local in wrapper_asserts(src, fn, call):
        before = set(tr.extents)
        try:
            facts += [(line, f) for f in tr.fact(resolve(test, local))]
        except (ValueError, TypeError, KeyError, z3.Z3Exception):
            continue
        if tr.extents != before:
            extent_lines.append(line)
    if contract.i32_extents and tr.extents:
        missing = sorted(set(contract.tensors) - tr.extents)
        out[EXTENTS] = ("wrapper check" + ("s" if len(extent_lines) > 1 else "") + " at line " +
                        ", ".join(map(str, extent_lines)) + (f" (not for {', '.join(missing)})" if missing else ""))
    solver, tracked = _fact_solver(facts)
    for text in contract.assume:
        if text in out:
            continue
        lines = [n for n in _implied_by(solver, tracked, names.expr(text)) if n]
        if lines:
            out[text] = "wrapper check" + ("s" if len(lines) > 1 else "") + " at line " + \
                        ", ".join(str(n) for n in lines)
    return out


def _implied_by(solver: z3.Solver, lines: dict[str, int], goal: z3.BoolRef) -> list[int]:
    """Lines of the facts (tracked in ``solver``) that imply ``goal``, or [] if they do not."""
    solver.push()
    try:
        solver.add(z3.Not(goal))
        if solver.check() != z3.unsat:
            return []
        return sorted({lines[str(t)] for t in solver.unsat_core()})
    finally:
        solver.pop()


def _fact_solver(facts: list[tuple[int, z3.BoolRef]]) -> tuple[z3.Solver, dict[str, int]]:
    solver = z3.Solver()
    solver.set("rlimit", 1_000_000)
    lines = {}
    for i, (line, f) in enumerate(facts):
        t = z3.Bool(f"assert{i}")
        lines[str(t)] = line
        solver.assert_and_track(f, t)
    return solver, lines
