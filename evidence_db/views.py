"""Read-only views of stored evidence, deployments and reviews.

The assurance graph, the report and the CLI work on these plain dataclasses (frozen, except the
evidence view; treat all as read-only), never on ORM rows, so status rules are pure functions
that test without a database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

__all__ = ["SubjectView", "EvidenceView", "DetailsFilter", "DeploymentView", "ReviewView", "IngestResult", "ChainFault",
           "ChainReport"]


@dataclass(frozen=True, slots=True)
class SubjectView:
    uri: str
    sha256: str


@dataclass(slots=True)
class EvidenceView:
    """One stored evidence item as the status rules see it. Read-only by convention.

    Not frozen, unlike the other views: a frozen dataclass sets each of its 13 fields through
    ``object.__setattr__``, which made building the 100,000 views of a status read about 0.25 s
    slower. Its ``details`` dict kept it mutable (and unhashable) in any case.
    """

    item_id: str  # the producer's stable record id
    category: str  # one of evidence_db.bundle.CATEGORIES
    obligation: str
    status: str  # pass | fail | error | inconclusive
    summary: str
    deployment_digest: str
    produced_at: str  # ISO 8601 UTC
    content_digest: str
    producer_tool: str
    producer_version: str
    subjects: tuple[SubjectView, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    seq: int = 0  # position in the store's hash chain (ingest order)


@dataclass(frozen=True, slots=True)
class DetailsFilter:
    """Which items a read decodes ``details`` for; the others get ``{}``.

    An item qualifies when its status is one of ``statuses`` or its stored details contain a key
    named in ``keys`` (matched on the stored JSON text, so a value that merely spells the key,
    or the key in a nested object, also qualifies: never fewer items, sometimes a few more).
    """

    statuses: frozenset[str] = frozenset()
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if any(not key or '"' in key or "\\" in key for key in self.keys):
            raise ValueError(f"DetailsFilter keys must be non-empty and free of quotes and backslashes: {self.keys!r}")


@dataclass(frozen=True, slots=True)
class DeploymentView:
    digest: str
    fields: dict[str, Any]
    first_seen: str


@dataclass(frozen=True, slots=True)
class ReviewView:
    """An audit review, pinned to the digest of what was reviewed."""

    target: str  # a case node id (trusted item) or an evidence item id
    target_digest: str  # digest of the target when it was reviewed
    decision: str  # accept | reject | needs-work
    reviewer: str
    rationale: str
    created_at: str
    expires: date | None = None
    seq: int = 0
    signer_key_id: str | None = None  # the key that signed it (its signature verified when stored); None: unsigned


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What one ingest did: records appended, records already stored with identical content, and the signer."""

    added: int
    unchanged: int
    signed_by: str | None = None  # key id of a signed bundle's signature, verified; None: unsigned

    def __add__(self, other: IngestResult) -> IngestResult:
        return IngestResult(self.added + other.added, self.unchanged + other.unchanged,
                            self.signed_by or other.signed_by)


@dataclass(frozen=True, slots=True)
class ChainFault:
    """One place where the stored hash chain does not verify."""

    seq: int  # chain position of the bad (or missing) row
    kind: str  # "evidence" | "review" | "signature" | "missing" | "head"
    key: str  # the evidence record id, the review target or the signing key id; "" for a missing row
    reason: str


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The result of recomputing the hash chain over every evidence item and review."""

    num_rows: int  # rows checked
    head_seq: int  # what the chain head says
    head_digest: str
    faults: tuple[ChainFault, ...] = ()  # in seq order, capped

    @property
    def is_intact(self) -> bool:
        return not self.faults

    @property
    def first_bad(self) -> ChainFault | None:
        return self.faults[0] if self.faults else None
