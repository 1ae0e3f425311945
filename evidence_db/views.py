"""Read-only views of stored evidence, deployments and reviews.

The assurance graph, the report and the CLI work on these plain frozen dataclasses, never on
ORM rows, so status rules are pure functions that test without a database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

__all__ = ["SubjectView", "EvidenceView", "DeploymentView", "ReviewView"]


@dataclass(frozen=True, slots=True)
class SubjectView:
    uri: str
    sha256: str


@dataclass(frozen=True, slots=True)
class EvidenceView:
    """One stored evidence item as the status rules see it."""

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
