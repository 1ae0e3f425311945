"""Find a @triton.jit kernel in a Python file without importing it.

The front end reads source text only, so verifying a kernel never executes user code and
needs neither torch nor triton. Module-level literal constants (``BLOCK = 64`` or
``LOG2E: tl.constexpr = tl.constexpr(1.44)``) are made available to the kernel body.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from evidence_db.canonical import sha256_digest
from proofs.errors import KernelSourceError

__all__ = ["KernelSource", "load_kernel", "split_target"]


@dataclass(frozen=True, slots=True)
class KernelSource:
    """A kernel's function AST plus what the front end needs from its module."""

    path: Path
    name: str
    func: ast.FunctionDef
    module: ast.Module
    digest: str  # sha256 of the file bytes
    globals: dict[str, object] = field(default_factory=dict)
    tl_aliases: frozenset[str] = frozenset({"tl"})

    @property
    def params(self) -> list[ast.arg]:
        return list(self.func.args.args)

    @property
    def constexpr_params(self) -> list[str]:
        return [a.arg for a in self.params if _is_constexpr_annotation(a.annotation)]


def split_target(target: str) -> tuple[Path, str]:
    """``path/to/file.py::kernel`` -> (path, kernel)."""
    if "::" not in target:
        raise KernelSourceError(f"target {target!r} is not FILE.py::KERNEL")
    path, name = target.rsplit("::", 1)
    return Path(path), name


def _is_constexpr_annotation(node: ast.expr | None) -> bool:
    if node is None:
        return False
    text = ast.unparse(node)
    return text.endswith("constexpr")


def _is_jit(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    text = ast.unparse(target)
    return text in ("triton.jit", "jit", "triton.jit()")


def _literal_globals(module: ast.Module) -> dict[str, object]:
    out: dict[str, object] = {}
    for stmt in module.body:
        targets, value = [], None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        if value is None:
            continue
        if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("constexpr") and value.args:
            value = value.args[0]
        try:
            literal = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError):
            continue
        for t in targets:
            if isinstance(t, ast.Name):
                out[t.id] = literal
    return out


def _tl_aliases(module: ast.Module) -> frozenset[str]:
    names = set()
    for stmt in ast.walk(module):
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name == "triton.language":
                    names.add(a.asname or "triton.language")
        elif isinstance(stmt, ast.ImportFrom) and stmt.module == "triton":
            for a in stmt.names:
                if a.name == "language":
                    names.add(a.asname or "language")
    return frozenset(names or {"tl"})


def load_kernel(path: Path, name: str) -> KernelSource:
    """Parse ``path`` and return the @triton.jit function ``name`` in it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KernelSourceError(f"cannot read kernel file {path}: {exc.strerror}") from None
    try:
        module = ast.parse(data.decode("utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise KernelSourceError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    found = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if not found:
        jits = [n.name for n in module.body if isinstance(n, ast.FunctionDef) and any(map(_is_jit, n.decorator_list))]
        raise KernelSourceError(f"no function {name!r} in {path}; @triton.jit functions there: "
                                f"{', '.join(jits) or 'none'}")
    func = found[0]
    if not any(map(_is_jit, func.decorator_list)):
        raise KernelSourceError(f"{path}:{func.lineno}: {name} is not decorated with @triton.jit")
    return KernelSource(path=path, name=name, func=func, module=module, digest=sha256_digest(data),
                        globals=_literal_globals(module), tl_aliases=_tl_aliases(module))
