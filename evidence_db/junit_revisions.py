"""Re-mapping a JUnit report: new records that supersede the stored ones, never an overwrite.

A JUnit record id is ``junit:<report tag>:<test id>``. When the same report is ingested again
with another mapping (a corrected ``--obligation``, another ``--deployment``), its records
differ from the stored ones. With ``remap`` each differing test case is stored as revision
``n`` of its record, id ``junit:<report tag>~<n>:<test id>``, whose ``details.supersedes``
names the revision it replaces. Both stay in the store and in the hash chain; the status
rules count only records no other record supersedes (rule R2a in docs/status-rules.md).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Iterable, Iterator

from sqlalchemy import select
from sqlalchemy.orm import Session

from evidence_db.errors import BundleError
from evidence_db.models import EvidenceItem
from evidence_db.prepare import Preparer

__all__ = ["SUPERSEDES_KEY", "StoredRevisions", "stored_revisions", "superseded_record_ids", "revised",
           "parse_junit_id"]

SUPERSEDES_KEY = "supersedes"  # details key: the record id a re-mapped record replaces
_ID = re.compile(r"junit:(?P<tag>[0-9a-f]{16})(?:~(?P<rev>[1-9][0-9]*))?:(?P<test>.*)", re.DOTALL)

# test key (the id after the report tag) -> stored (revision, record id, content digest), oldest first
StoredRevisions = dict[str, list[tuple[int, str, str]]]


def parse_junit_id(record_id: str) -> tuple[str, int, str] | None:
    """``(report tag, revision, test key)`` of a JUnit record id, else None.

    >>> parse_junit_id("junit:0123456789abcdef~2:tests.t.test_x")
    ('0123456789abcdef', 2, 'tests.t.test_x')
    >>> parse_junit_id("junit:0123456789abcdef:tests.t.test_x")
    ('0123456789abcdef', 0, 'tests.t.test_x')
    >>> parse_junit_id("proof-1") is None
    True
    """
    match = _ID.fullmatch(record_id)
    if match is None:
        return None
    return match["tag"], int(match["rev"] or 0), match["test"]


def stored_revisions(*, session: Session, report_tag: str) -> StoredRevisions:
    """Every stored record of the report with this tag, by test key, oldest revision first."""
    rows = session.execute(select(EvidenceItem.record_id, EvidenceItem.content_digest)
                           .where(EvidenceItem.record_id.like(f"junit:{report_tag}%"))  # a hex tag: no wildcards
                           .order_by(EvidenceItem.seq))
    found: StoredRevisions = {}
    for record_id, digest in rows:
        parsed = parse_junit_id(record_id)
        if parsed is not None and parsed[0] == report_tag:
            found.setdefault(parsed[2], []).append((parsed[1], record_id, digest))
    for revisions in found.values():
        revisions.sort()
    return found


def superseded_record_ids(*, session: Session) -> set[str]:
    """Ids of stored records that a re-mapped record (under any D) supersedes."""
    rows = session.execute(select(EvidenceItem.record_id, EvidenceItem.details)
                           .where(EvidenceItem.record_id.like("junit:%~%")).order_by(EvidenceItem.seq))
    found = set()
    for record_id, details in rows:
        target = details.get(SUPERSEDES_KEY) if isinstance(details, dict) else None
        if isinstance(target, str) and parse_junit_id(record_id) is not None:
            found.add(target)
    return found


def _revision(record: dict[str, Any], tag: str, test_key: str, rev: int, supersedes: str | None) -> dict[str, Any]:
    out = dict(record)
    out["id"] = f"junit:{tag}~{rev}:{test_key}" if rev else f"junit:{tag}:{test_key}"
    if supersedes is not None:
        out["details"] = {**copy.deepcopy(record.get("details", {})), SUPERSEDES_KEY: supersedes}
    return out


def revised(records: Iterable[tuple[str, dict[str, Any]]], stored: StoredRevisions, *, remap: bool
            ) -> Iterator[tuple[str, dict[str, Any]]]:
    """The report's records as they are to be appended, given what the store holds of it.

    A test case equal to its newest stored revision comes out as that revision (a no-op on
    ingest); one that differs raises :class:`BundleError` unless ``remap``, and then comes out
    as the next revision, superseding the newest.
    """
    digest_of = Preparer()
    for where, record in records:
        parsed = parse_junit_id(record["id"])
        history = stored.get(parsed[2]) if parsed is not None else None
        if not history:
            yield where, record
            continue
        tag, _, test_key = parsed
        rev, latest_id, latest_digest = history[-1]
        previous = history[-2][1] if len(history) > 1 else None
        same = _revision(record, tag, test_key, rev, previous if rev else None)
        if digest_of(same, where).content_digest == latest_digest:
            yield where, same
            continue
        if not remap:
            raise BundleError(f"this report was ingested before and test case {test_key!r} now differs "
                              f"(obligation {record['obligation']!r}; stored as {latest_id!r})", where=where,
                              hint="pass --remap to store the new mapping as records that supersede the stored "
                                   "ones (both are kept)")
        yield where, _revision(record, tag, test_key, rev + 1, latest_id)
