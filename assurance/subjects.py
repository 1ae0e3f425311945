"""Subjects: what evidence covers, and the digests those things have now.

A subject key is ``code:<posix path relative to the case's root>``, ``deployment`` or
``model``. The root (:func:`subject_root`) is the case file's directory unless the case says
``root = "…"`` (relative to the case file) or a command's ``--root DIR`` overrides it; the
bundled determinism case says ``root = "<bitcase>"``, bitcase's own source tree. Evidence records name subjects by URI (``code:kernels/matmul.py``,
``deployment:sha256:…``, ``model:sha256:…``) with the digest they had; the status rules
compare those with the current digests computed here, so editing a kernel makes its proof
stale at once.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from assurance.case_model import Case
from assurance.cli._common import BitcaseError
from evidence_db.canonical import file_digest

__all__ = ["project_root", "subject_root", "BITCASE_ROOT", "subject_key", "glob_regex", "SubjectMatcher", "code_digests", "SKIP_DIRS"]

BITCASE_ROOT = "<bitcase>"  # a case's `root` naming bitcase's own tree (the engine it ships)
SKIP_DIRS = frozenset({"__pycache__", ".git", ".venv", "node_modules", ".pytest_cache", ".hypothesis"})


def project_root() -> Path:
    """The directory holding the top-level packages (assurance/, engine/, kernels/, ...)."""
    return Path(__file__).resolve().parents[1]


def subject_root(case: Case) -> Path:
    """The directory ``code:`` subjects of ``case`` are relative to; exit 2 when it is not one.

    A case parsed from text (no file) keeps bitcase's own tree, as before roots existed.
    """
    if case.root == BITCASE_ROOT or (not case.root and case.path is None):
        return project_root()
    base = case.path.resolve().parent if case.path is not None else Path.cwd()
    root = (base / case.root).resolve() if case.root else base
    if not root.is_dir():
        raise BitcaseError(f"{case.location}: the subject root {root} (root = {case.root!r}) is not a directory",
                           hint="set `root` in [case] to the project directory, relative to the case file, "
                                "or pass --root DIR")
    return root


def subject_key(uri: str) -> str:
    """The key a subject URI is compared under.

    >>> subject_key("deployment:sha256:ab"), subject_key("code:kernels/a.py"), subject_key("model:sha256:cd")
    ('deployment', 'code:kernels/a.py', 'model')
    """
    scheme, _, _rest = uri.partition(":")
    return scheme if scheme in ("deployment", "model") else uri


@lru_cache(maxsize=1024)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A compiled regex for a subject glob: ``*`` and ``?`` stay within one path segment, ``**`` spans.

    >>> bool(glob_regex("code:kernels/*.py").match("code:kernels/a.py"))
    True
    >>> bool(glob_regex("code:kernels/*.py").match("code:kernels/sub/a.py"))
    False
    >>> bool(glob_regex("code:engine/**/*.py").match("code:engine/a.py"))
    True
    """
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class SubjectMatcher:
    """Whether a subject key is covered by any of a solution's subject globs (memoised)."""

    __slots__ = ("patterns", "_regexes", "_memo")

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        self._regexes = tuple(glob_regex(p) for p in self.patterns)
        self._memo: dict[str, bool] = {}

    def covers(self, key: str) -> bool:
        """Whether ``key`` matches one of the patterns."""
        hit = self._memo.get(key)
        if hit is None:
            hit = any(r.match(key) for r in self._regexes)
            self._memo[key] = hit
        return hit


def _static_prefix(path_glob: str) -> str:
    parts = []
    for part in path_glob.split("/")[:-1]:
        if any(ch in part for ch in "*?["):
            break
        parts.append(part)
    return "/".join(parts)


def code_digests(patterns: Iterable[str], *, root: Path | None = None) -> dict[str, str]:
    """``{"code:<path>": digest}`` for every file under ``root`` matching a ``code:`` glob."""
    root = (root or project_root()).resolve()
    code_patterns = sorted({p for p in patterns if p.startswith("code:")})
    digests: dict[str, str] = {}
    for prefix in sorted({_static_prefix(p[len("code:"):]) for p in code_patterns}):
        base = root / prefix if prefix else root
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
            rel_dir = Path(dirpath).relative_to(root).as_posix()
            for name in sorted(filenames):
                key = f"code:{name}" if rel_dir == "." else f"code:{rel_dir}/{name}"
                if key not in digests and any(glob_regex(p).match(key) for p in code_patterns):
                    digests[key] = file_digest(Path(dirpath) / name)
    return digests
