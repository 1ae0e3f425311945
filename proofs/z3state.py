"""Each verification runs in its own Z3 context, so its verdict does not depend on earlier ones.

Z3 numbers terms in the order a context first sees them, and its search heuristics follow that
numbering: in one shared context a query's outcome within the resource limit could depend on
which kernels the same process verified before (a refutation came back "unknown" after other
verifier work). A verification therefore runs with a new context as z3py's main context, and
the previous one is restored afterwards (so terms a caller made before stay usable). Modules
that memoise per-term analyses by term id (ids are per context) or hold Z3 constants register a
reset, run on entry and on exit.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import z3

__all__ = ["on_new_context", "fresh_context"]

_RESETS: list[Callable[[], None]] = []


def on_new_context(reset: Callable[[], None]) -> Callable[[], None]:
    """Register ``reset`` (clears a term cache or rebuilds module constants); run it once now."""
    _RESETS.append(reset)
    reset()
    return reset


def _reset_all() -> None:
    for reset in _RESETS:
        reset()


@contextmanager
def fresh_context() -> Iterator[None]:
    """Make a new Z3 context the main one for the duration; restore the previous one after."""
    saved = z3.main_ctx()
    z3.z3._main_ctx = z3.Context()  # z3py keeps its default context in this module global
    _reset_all()
    try:
        yield
    finally:
        z3.z3._main_ctx = saved
        _reset_all()
