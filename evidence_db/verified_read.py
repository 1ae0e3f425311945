"""Reading the store only through its verified hash chain: what every claim rests on.

:func:`read_verified` walks the whole chain once (:class:`evidence_db.verify.ChainWalk`),
recomputing every row's digests, and builds the evidence and review views from the rows that
walk read, so a verdict never uses a row the chain does not cover or one that fails it, and
verifying costs no second read. Rows outside the chain (``seq`` below 1, beyond the head) are
never read into views; when any fault is found the caller gets the report and must not
evaluate (the claim commands fail naming the first bad row).

Why not verify incrementally from a checkpoint? A checkpoint of ``(seq, chain digest)``
commits to the stored digests, not to the columns a reader uses: whoever can write the store
can edit a summary below the checkpoint and leave every digest as it was, and only
recomputing that row's content digest notices. A checkpoint kept in the same store can, in
addition, simply be rewritten. So every read that a claim rests on recomputes every row.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from time import perf_counter
from typing import Any

from sqlalchemy.orm import Session

from evidence_db.chain import iso_utc
from evidence_db.verify import ChainWalk
from evidence_db.errors import StoreDamaged
from evidence_db.views import ChainReport, DetailsFilter, EvidenceView, ReviewView

__all__ = ["VerifiedStore", "read_verified", "chain_summary"]


@dataclass(frozen=True, slots=True)
class VerifiedStore:
    """The store as its verified chain shows it; use the views only when ``chain.is_intact``."""

    chain: ChainReport
    verified_at: str  # ISO 8601 UTC, when the walk ran
    seconds: float  # how long reading and verifying took
    evidence: list[EvidenceView] = field(default_factory=list)  # chain order
    elsewhere: dict[str, int] = field(default_factory=dict)  # items per obligation under other D
    reviews: list[ReviewView] = field(default_factory=list)  # chain order

    def chain_json(self) -> dict[str, Any]:
        """The verification result as the claim commands put it in ``--json``."""
        first = self.chain.first_bad
        return {"intact": self.chain.is_intact, "rows": self.chain.num_rows,
                "head": {"seq": self.chain.head_seq, "digest": self.chain.head_digest},
                "verified_at": self.verified_at, "seconds": round(self.seconds, 3),
                "first_bad": None if first is None else {"seq": first.seq, "kind": first.kind, "key": first.key,
                                                         "reason": first.reason},
                "num_faults": len(self.chain.faults)}


def chain_summary(chain: dict[str, Any]) -> str:
    """One line on the chain check, for stderr and the report."""
    if chain["intact"]:
        return (f"hash chain intact: {chain['rows']} rows, head seq {chain['head']['seq']} {chain['head']['digest']} "
                f"(verified {chain['verified_at']} in {chain['seconds']:.2f} s)")
    first = chain["first_bad"]
    label = f"{first['kind']} {first['key']!r}" if first["key"] else first["kind"]
    return (f"hash chain BROKEN: first bad row seq {first['seq']} ({label}): {first['reason']} "
            f"[{chain['num_faults']} fault(s); `bitcase audit verify` lists them]")


def _wants_details(with_details: bool | DetailsFilter) -> Any:
    """A predicate ``(status, details text) -> bool`` saying whose details to decode."""
    if isinstance(with_details, bool):
        return lambda _status, _text: with_details
    statuses = with_details.statuses
    if not with_details.keys:
        return lambda status, _text: status in statuses
    # Keys hold no quotes or backslashes (DetailsFilter checks), so this finds exactly '"key"'.
    search = re.compile("|".join(f'"{re.escape(key)}"' for key in with_details.keys)).search
    return lambda status, text: status in statuses or search(text) is not None


def _details(loads: Any, text: str, row: Any, unreadable: list[Any]) -> dict[str, Any]:
    """Decoded details; ``{}`` (and the row noted in ``unreadable``) when they are not a JSON object."""
    try:
        value = loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        unreadable.append(row)
        return {}
    return value


def read_verified(*, session: Session, deployment_digest: str | None = None,
                  with_details: bool | DetailsFilter = True) -> VerifiedStore:
    """Verify the whole chain and return the views its rows give (see the module docstring).

    With ``deployment_digest`` only that D's items become views and ``elsewhere`` counts the
    others per obligation (what :func:`evidence_db.store.count_elsewhere` gives);
    ``with_details`` chooses whose ``details`` are decoded, as for
    :func:`evidence_db.store.load_evidence`.
    """
    started, moment = perf_counter(), datetime.now(timezone.utc)
    walk = ChainWalk(session)
    wants = _wants_details(with_details)
    evidence: list[EvidenceView] = []
    reviews: list[ReviewView] = []
    elsewhere: Counter[str] = Counter()
    loads = json.loads
    unreadable: list[Any] = []  # reported after the walk: a chain fault, if any, explains them better
    for window in walk.windows():
        reviews.extend(window.reviews)
        add = evidence.append
        for row, details, subjects, producer, deployment in window.evidence:
            digest = deployment[1] if deployment else ""
            if deployment_digest is not None and digest != deployment_digest:
                elsewhere[row[3]] += 1
                continue
            status = row[4]
            add(EvidenceView(row[1], row[2], row[3], status, row[5], digest, row[6], row[10],
                             producer[1] if producer else "", producer[2] if producer else "", subjects[2],
                             _details(loads, details, row, unreadable) if details and wants(status, details) else {},
                             row[0]))
    report = walk.report()
    if report.is_intact and unreadable:  # digests that agree with unreadable details: a chain rewritten whole
        row = unreadable[0]
        raise StoreDamaged(f"evidence item {row[1]!r} (chain seq {row[0]}): its stored details are not a JSON "
                           "object, which no bitcase ingest writes, yet the chain agrees with them: the chain "
                           "was rewritten outside bitcase",
                           hint="compare the chain head with one recorded outside the store; restore from a backup")
    return VerifiedStore(chain=report, verified_at=iso_utc(moment), seconds=perf_counter() - started,
                         evidence=evidence, elsewhere=dict(elsewhere), reviews=reviews)
