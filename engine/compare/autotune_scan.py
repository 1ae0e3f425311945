"""No runtime autotuning on the inference path: a static scan plus a loaded-object probe.

The static scan parses every Python file of ``kernels/`` and ``engine/`` (it never imports them)
and reports any use of Triton's run-time configuration choosers: ``autotune``, ``heuristics``,
``Config`` (only meaningful to the autotuner), ``Autotuner`` / ``Heuristics``, whether reached as
``triton.autotune``, imported by name, or through ``triton.runtime.autotuner``. The probe imports
the kernel modules and checks that no module-level object is an ``Autotuner`` or ``Heuristics``
instance, which catches a wrapper applied by other means (for example ``autotune(...)(fn)`` on a
renamed import).
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AutotuneFinding", "scan_sources", "probe_modules", "FORBIDDEN_NAMES"]

FORBIDDEN_NAMES = frozenset({"autotune", "heuristics", "Config", "Autotuner", "Heuristics"})
_FORBIDDEN_MODULES = ("triton.runtime.autotuner",)


@dataclass(frozen=True, slots=True)
class AutotuneFinding:
    """One forbidden use: where and what."""

    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _triton_aliases(tree: ast.AST) -> set[str]:
    aliases = {"triton"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "triton" or a.name.startswith("triton."):
                    aliases.add(a.asname or a.name.split(".")[0])
    return aliases


def _findings_in(tree: ast.AST, rel: str) -> list[AutotuneFinding]:
    aliases = _triton_aliases(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "triton":
            for a in node.names:
                if a.name in FORBIDDEN_NAMES or node.module in _FORBIDDEN_MODULES:
                    out.append(AutotuneFinding(rel, node.lineno, f"from {node.module} import {a.name}"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in _FORBIDDEN_MODULES:
                    out.append(AutotuneFinding(rel, node.lineno, f"import {a.name}"))
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_NAMES:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in aliases:
                out.append(AutotuneFinding(rel, node.lineno, f"{ast.unparse(node)}"))
    return out


def scan_sources(root: Path, dirs: tuple[str, ...] = ("kernels", "engine")) -> tuple[list[AutotuneFinding], int]:
    """(findings, number of files scanned) over every ``*.py`` under ``dirs`` of ``root``."""
    findings: list[AutotuneFinding] = []
    num_files = 0
    for top in dirs:
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
            except SyntaxError as exc:
                findings.append(AutotuneFinding(rel, exc.lineno or 0, f"cannot parse: {exc.msg}"))
                continue
            num_files += 1
            findings.extend(_findings_in(tree, rel))
    return findings, num_files


def probe_modules(modules: tuple[str, ...]) -> list[str]:
    """Module-level objects of ``modules`` that are Triton autotuner or heuristics wrappers.

    Matched by the defining module of the object's class (``triton.runtime.autotuner``), so the
    probe needs no import of the autotuner itself.
    """
    found = []
    for name in modules:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            cls = type(value)
            if cls.__module__ in _FORBIDDEN_MODULES or cls.__name__ in ("Autotuner", "Heuristics"):
                found.append(f"{name}.{attr} is a {cls.__module__}.{cls.__name__}")
    return found
