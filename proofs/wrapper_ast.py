"""Reading a kernel's launch wrapper: the launch site, its local definitions and its asserts."""

from __future__ import annotations

import ast
import copy

from proofs.source import KernelSource

__all__ = ["launch_site", "local_defs", "wrapper_asserts", "resolve"]


def launch_site(src: KernelSource) -> tuple[ast.FunctionDef, ast.Call] | None:
    for fn in src.module.body:
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == src.name:
                    return fn, node
    return None


class _Subst(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, ast.expr]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return copy.deepcopy(self.mapping[node.id]) if node.id in self.mapping else node


def local_defs(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    out = {}
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out[stmt.targets[0].id] = stmt.value
    return out


def _body_asserts(stmts: list[ast.stmt], subst: dict) -> list[tuple[int, ast.expr, dict]]:
    """Asserts of a function body; ``for`` loops over literal tuples are unrolled."""
    out = []
    for stmt in stmts:
        if isinstance(stmt, ast.Assert):
            out.append((stmt.lineno, stmt.test, subst))
        elif isinstance(stmt, ast.If):
            out += _body_asserts(stmt.body, subst) + _body_asserts(stmt.orelse, subst)
        elif isinstance(stmt, ast.For) and isinstance(stmt.iter, (ast.Tuple, ast.List)):
            for item in stmt.iter.elts:
                binding = {}
                if isinstance(stmt.target, ast.Name):
                    binding[stmt.target.id] = item
                elif isinstance(stmt.target, ast.Tuple) and isinstance(item, ast.Tuple) \
                        and len(item.elts) == len(stmt.target.elts):
                    binding = {t.id: v for t, v in zip(stmt.target.elts, item.elts) if isinstance(t, ast.Name)}
                out += _body_asserts(stmt.body, {**subst, **binding})
    return out


def _early_returns(fn: ast.FunctionDef, call: ast.Call) -> list[tuple[int, ast.expr]]:
    """``if COND: return`` before the launch: the launch happens only when COND is false."""
    out = []
    for stmt in fn.body:
        if any(node is call for node in ast.walk(stmt)):
            break
        if isinstance(stmt, ast.If) and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return) \
                and not stmt.orelse:
            out.append((stmt.lineno, ast.UnaryOp(ast.Not(), stmt.test)))
    return out


def wrapper_asserts(src: KernelSource, fn: ast.FunctionDef, call: ast.Call) -> list[tuple[int, ast.expr, dict]]:
    """(line, test, substitution) of asserts in ``fn`` and in module functions it calls directly."""
    funcs = {f.name: f for f in src.module.body if isinstance(f, ast.FunctionDef)}
    own = local_defs(fn)
    out = _body_asserts(fn.body, own) + [(line, test, own) for line, test in _early_returns(fn, call)]
    for node in ast.walk(fn):
        callee = funcs.get(node.func.id) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
        if callee is None or callee is fn:
            continue
        params = {p.arg: arg for p, arg in zip(callee.args.args, node.args)}
        out += _body_asserts(callee.body, {**local_defs(callee), **params})
    return out


def resolve(expr: ast.expr, subst: dict[str, ast.expr], rounds: int = 6) -> ast.expr:
    for _ in range(rounds):
        new = _Subst(subst).visit(copy.deepcopy(expr))
        if ast.dump(new) == ast.dump(expr):
            break
        expr = new
    return expr
