"""Evidence records and bundles for the store's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evidence_db.bundle import Deployment, EvidenceRecord, Producer, Subject, write_bundle
from evidence_db.canonical import sha256_digest

PRODUCER = Producer(tool="bitcase verify", version="0.1.0", command="bitcase verify --all", host="ci-1",
                    accelerator="cpu", started_at="2025-06-01T10:00:00.000000Z",
                    finished_at="2025-06-01T10:05:00.000000Z")
DEPLOYMENT = Deployment({"gpu": "none", "torch": "2.13.0", "page_size": 16,
                         "kernel_plan": {"digest": sha256_digest(b"plan"), "entries": [{"kernel": "matmul"}]}})
OTHER_DEPLOYMENT = Deployment({"gpu": "NVIDIA H200", "torch": "2.13.0", "page_size": 16})


def record(index: int = 0, **changes: Any) -> EvidenceRecord:
    """A valid evidence record; ``changes`` override its fields."""
    fields: dict[str, Any] = {
        "id": f"proof:matmul:{index}", "category": "kernel_proof", "obligation": "G_kernel_matmul",
        "status": "pass", "summary": f"matmul invariance #{index}", "producer": PRODUCER,
        "deployment": DEPLOYMENT,
        "subjects": (Subject("code:kernels/matmul.py", sha256_digest(b"matmul")),
                     Subject("plan:default", sha256_digest(b"plan"))),
        "details": {"index": index, "solver_s": 0.25, "config": {"BLOCK_M": 64}},
        "produced_at": "2025-06-01T10:04:00.000000Z",
    }
    fields.update(changes)
    return EvidenceRecord(**fields)


def records(count: int, start: int = 0, **changes: Any) -> list[EvidenceRecord]:
    """``count`` distinct valid records."""
    return [record(i, **changes) for i in range(start, start + count)]


def bundle(path: Path, count: int, start: int = 0) -> Path:
    """Write a JSONL bundle of ``count`` records; return its path."""
    write_bundle(path, records(count, start))
    return path


def record_dict(index: int = 0, **changes: Any) -> dict[str, Any]:
    """A valid record as the JSON object of a bundle line, with top-level ``changes``."""
    value = record(index).to_json_dict()
    value.update(changes)
    return value
