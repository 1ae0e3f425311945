"""Evidence bundle format v2: the records producers emit and ``bitcase ingest`` reads.

Producers never touch the database; they build :class:`EvidenceRecord` objects and write
them with :func:`write_bundle` (JSONL, one record per line, written atomically). The
format is documented in ``docs/evidence-format.md``; its JSON Schema ships as
``evidence_db/schema/evidence-v2.json``. v2 differs from v1 only in the canonical JSON its
digests are computed over (RFC 8785 instead of Python's sorted ``json``); ingest still reads
v1 records (``SCHEMA_VERSIONS``), each hashed by its own version's rule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from evidence_db.atomic import atomic_file
from evidence_db.canonical import canonical_json, digest_of, digest_of_v1

if TYPE_CHECKING:
    from evidence_db.keys import SigningKey

__all__ = [
    "SCHEMA_ID",
    "SCHEMA_ID_V1",
    "SCHEMA_VERSIONS",
    "CATEGORIES",
    "STATUSES",
    "Producer",
    "Deployment",
    "Subject",
    "EvidenceRecord",
    "write_bundle",
    "utc_now",
]

SCHEMA_ID = "bitcase.evidence/v2"
SCHEMA_ID_V1 = "bitcase.evidence/v1"
SCHEMA_VERSIONS = {SCHEMA_ID_V1: 1, SCHEMA_ID: 2}  # schema id -> canonical JSON version of its digests
CATEGORIES = ("kernel_proof", "trusted_contract_translation", "runtime_config_check", "test_result")
STATUSES = ("pass", "fail", "error", "inconclusive")


def utc_now() -> str:
    """Current UTC time as an ISO 8601 string with a ``Z`` suffix."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Producer:
    """The tool run that produced a record."""

    tool: str  # e.g. "bitcase verify"
    version: str
    command: str
    host: str
    accelerator: str  # "cpu" or the GPU model name
    started_at: str
    finished_at: str


@dataclass(frozen=True, slots=True)
class Deployment:
    """A deployment configuration D: its fields and their digest."""

    fields: dict[str, Any]
    digest: str = ""

    def __post_init__(self) -> None:
        expected = digest_of(self.fields)
        if not self.digest:
            object.__setattr__(self, "digest", expected)
        elif self.digest != expected:
            was_v1 = self.digest == digest_of_v1(self.fields)
            raise ValueError(f"deployment digest {self.digest} does not match its fields ({expected})"
                             + (" (it is their schema v1 digest, from before RFC 8785)" if was_v1 else ""))


@dataclass(frozen=True, slots=True)
class Subject:
    """Something an evidence item covers: a URI and the sha256 digest it had."""

    uri: str  # "code:kernels/matmul.py", "deployment:sha256:…", "model:sha256:…"
    sha256: str


@dataclass(frozen=True, slots=True)
class EvidenceRecord:
    """One evidence item, exactly one category, naming the D it was produced under."""

    id: str  # stable key chosen by the producer; same id + different content is an error
    category: str
    obligation: str
    status: str
    summary: str
    producer: Producer
    deployment: Deployment
    subjects: tuple[Subject, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    produced_at: str = field(default_factory=utc_now)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"category {self.category!r} is not one of {CATEGORIES}")
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")
        if not self.id or not self.obligation:
            raise ValueError("evidence records need a non-empty id and obligation")

    def to_json_dict(self) -> dict[str, Any]:
        """The record as the JSON object written to a bundle."""
        d = asdict(self)
        d["subjects"] = [asdict(s) for s in self.subjects]
        return {"schema": SCHEMA_ID, **d}

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> "EvidenceRecord":
        """The record a v2 bundle line holds (the inverse of :meth:`to_json_dict`; the schema key is dropped).

        v1 records are read by ingest only (their digests follow the v1 rule): :class:`ValueError`.
        """
        if d.get("schema") != SCHEMA_ID:
            raise ValueError(f"record schema {d.get('schema')!r} is not {SCHEMA_ID}; ingest the bundle instead")
        return cls(id=d["id"], category=d["category"], obligation=d["obligation"], status=d["status"],
                   summary=d["summary"], producer=Producer(**d["producer"]),
                   deployment=Deployment(fields=d["deployment"]["fields"], digest=d["deployment"]["digest"]),
                   subjects=tuple(Subject(**s) for s in d["subjects"]), details=d["details"],
                   produced_at=d["produced_at"])

    def content_digest(self) -> str:
        """Digest of the record's content (what makes a re-ingest a no-op)."""
        return digest_of(self.to_json_dict())


def write_bundle(path: Path, records: Iterable[EvidenceRecord], *, signer: SigningKey | None = None) -> int:
    """Write records as JSONL atomically (temp file + rename); return how many were written.

    With ``signer``, also write the detached signature ``<path>.sig`` (``evidence_db.bundle_sig``);
    without, remove a ``.sig`` left from an earlier signed bundle at ``path`` (it would not match).
    """
    from evidence_db.bundle_sig import signature_path, write_signature

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    signature_path(path).unlink(missing_ok=True)  # first: a crash must not leave an old signature beside new records
    digests: list[str] = []
    count = 0
    with atomic_file(path) as f:
        for record in records:
            f.write(canonical_json(record.to_json_dict()) + "\n")
            if signer is not None:
                digests.append(record.content_digest())
            count += 1
    if signer is not None:
        write_signature(path, digests, signer)
    return count
