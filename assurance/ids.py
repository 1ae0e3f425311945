"""Identifiers of the assurance case: node ids, obligation ids and the categories of evidence.

Node ids end up as Graphviz node ids and SARIF logical locations, so they are restricted to a
DOT-safe alphabet (no ``:``, which DOT reads as a port separator; no spaces or quotes) and must
not be a DOT keyword. Obligation ids are what producers write into evidence records; they use
the same alphabet so one id can serve as both.
"""

from __future__ import annotations

import re
from typing import NewType

from evidence_db.bundle import CATEGORIES

__all__ = [
    "NodeId",
    "NODE_KINDS",
    "SUPPORT_KINDS",
    "CONTEXT_KINDS",
    "CATEGORIES",
    "ID_PATTERN",
    "is_dot_safe",
    "dot_safety_problem",
]

NodeId = NewType("NodeId", str)

# GSN core element types. Goals, strategies and solutions carry the argument (supported_by);
# contexts, assumptions and justifications only frame it (in_context_of).
NODE_KINDS = ("goal", "strategy", "solution", "context", "assumption", "justification")
SUPPORT_KINDS = ("goal", "strategy", "solution")
CONTEXT_KINDS = ("context", "assumption", "justification")

ID_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")
_DOT_KEYWORDS = frozenset({"node", "edge", "graph", "digraph", "subgraph", "strict"})
MAX_ID_CHARS = 200


def dot_safety_problem(value: str) -> str | None:
    """Why ``value`` cannot be a node or obligation id, or ``None`` when it can.

    >>> dot_safety_problem("kernel.matmul_n64.contract") is None
    True
    >>> dot_safety_problem("code:kernels/a.py")
    "contains ':' (allowed: letters, digits, '_', '.', '-'; start with a letter)"
    """
    if not value:
        return "is empty"
    if len(value) > MAX_ID_CHARS:
        return f"is longer than {MAX_ID_CHARS} characters"
    if value.lower() in _DOT_KEYWORDS:
        return f"is the DOT keyword {value.lower()!r}"
    if not ID_PATTERN.match(value):
        bad = next((c for c in value if not (c.isascii() and (c.isalnum() or c in "_.-"))), None)
        shown = f"contains {bad!r}" if bad is not None else "does not start with a letter"
        return f"{shown} (allowed: letters, digits, '_', '.', '-'; start with a letter)"
    return None


def is_dot_safe(value: str) -> bool:
    """Whether ``value`` is a valid node or obligation id.

    >>> is_dot_safe("G.determinism"), is_dot_safe("a b")
    (True, False)
    """
    return dot_safety_problem(value) is None
