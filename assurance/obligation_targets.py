"""Which obligation ids a case offers producers, and a check of ids a user names against them.

``bitcase ingest --obligation GLOB=ID`` and ``--default-obligation ID`` name obligations by
hand; a typo would be stored without complaint and the obligation would silently stay
missing. :func:`check_targets` refuses ids the case does not define, with close matches.
Plan-generated obligations (``kernel.{key}.contract``) match as patterns.
"""

from __future__ import annotations

import difflib
import re
from typing import Iterable

from assurance.case_model import Case
from assurance.cli._common import BitcaseError
from assurance.generators import PlanItem, generate_nodes

__all__ = ["CaseObligations", "case_obligations", "check_targets"]

_SLOT = "zq0slot0qz"  # stands for every placeholder while a generator's obligations become patterns


class CaseObligations:
    """The obligation ids of a case's solutions, and patterns for the plan-generated ones."""

    def __init__(self, ids: Iterable[str], patterns: Iterable[str]) -> None:
        self.ids = frozenset(ids)
        self.patterns = tuple(sorted(set(patterns)))  # readable forms, e.g. "kernel.{key}.contract"
        self._regexes = tuple(re.compile(re.escape(p).replace(re.escape("{key}"), ".+")) for p in self.patterns)

    def __contains__(self, obligation: object) -> bool:
        return isinstance(obligation, str) and (
            obligation in self.ids or any(r.fullmatch(obligation) for r in self._regexes))

    def close_matches(self, obligation: str, *, num: int = 3) -> list[str]:
        """Up to ``num`` known ids (or patterns) that look like ``obligation``, closest first."""
        return difflib.get_close_matches(obligation, sorted(self.ids) + list(self.patterns), n=num, cutoff=0.6)


def case_obligations(case: Case) -> CaseObligations:
    """Every obligation a producer may name for ``case`` (expanded or not)."""
    ids = {o for node in case.nodes if node.kind == "solution" for o in node.obligations}
    patterns = set()
    if not case.is_expanded:
        slot = PlanItem(kernel=_SLOT, key=_SLOT, source_file=_SLOT, digest=_SLOT)
        for generator in case.generators:
            for node in generate_nodes(generator, [slot], file=case.location, ignore_match=True):
                patterns.update(o.replace(_SLOT, "{key}") for o in node.obligations if node.kind == "solution")
    return CaseObligations(ids, patterns)


def check_targets(case: Case, targets: Iterable[tuple[str, str]]) -> None:
    """Raise :class:`BitcaseError` for the first ``(where, obligation)`` the case does not define.

    >>> from assurance.case_model import Node
    >>> case = Case("c", "C", "G", (Node("G", "goal", "g", supported_by=("S",)),
    ...                               Node("S", "solution", "s", obligations=("tests.scheduler",))))
    >>> check_targets(case, [("--obligation", "tests.scheduler")])
    >>> check_targets(case, [("--obligation 'x*=tests.schedular'", "tests.schedular")])
    Traceback (most recent call last):
    ...
    assurance.cli._common.BitcaseError: --obligation 'x*=tests.schedular': case c has no obligation 'tests.schedular'
    """
    known = case_obligations(case)
    for where, obligation in targets:
        if obligation in known:
            continue
        close = known.close_matches(obligation)
        hint = (f"did you mean {' or '.join(repr(c) for c in close)}? " if close else "") + \
            "`bitcase case obligations` lists them; pass --any-obligation to store ids the case does not define"
        raise BitcaseError(f"{where}: case {case.id} has no obligation {obligation!r}", hint=hint)
