"""A hostile writer of the store: raw SQL behind bitcase's back, and a small case to gate on.

The store these tests build passes `bitcase check` (SOLUTIONS discharged, the trusted item
reviewed) unless a test leaves something out; each attack then edits rows as someone with
write access to the database would, knowing the digest algorithm.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from sqlalchemy import Connection, insert
from typer.testing import CliRunner

from evidence_db.bundle import Deployment, EvidenceRecord, Producer
from evidence_db.canonical import canonical_json
from evidence_db.chain import GENESIS_DIGEST, chain_link, content_digest_of_text, review_content
from evidence_db.engine import create_store_engine
from evidence_db.models import Review

PRODUCER = Producer("bitcase test", "1", "pytest", "host", "cpu", "2026-10-31T00:00:00Z", "2026-10-31T00:00:01Z")
CPU = Deployment({"device": "cpu", "torch": "2.13.0"})
GPU = Deployment({"device": "cuda:0", "torch": "2.13.0"})

CASE = f"""
[case]
id = "gate"
title = "A case to gate on"
top = "G.top"
deployment = "{CPU.digest}"

[[node]]
id = "G.top"
kind = "goal"
text = "The top claim"
supported_by = ["S.split"]

[[node]]
id = "S.split"
kind = "strategy"
text = "Argue over the parts"
supported_by = ["kernel.mm.contract", "suite.batch", "trusted.compiler"]

[[node]]
id = "kernel.mm.contract"
kind = "solution"
text = "Matmul contract proof"
requires = ["kernel_proof"]

[[node]]
id = "suite.batch"
kind = "solution"
text = "Batch suite"
any_of = ["test_result"]

[[node]]
id = "trusted.compiler"
kind = "solution"
text = "The compiler keeps operation order"
trusted = true
rationale = "Pinned versions are part of D"
"""

runner = CliRunner()


def invoke(*args: object):
    """Run the real `bitcase` CLI."""
    from assurance.cli.main import app

    return runner.invoke(app, [str(a) for a in args])


def record(item: str, obligation: str, category: str = "kernel_proof", status: str = "pass",
           deployment: Deployment = CPU) -> EvidenceRecord:
    """One evidence record under ``deployment``."""
    return EvidenceRecord(id=item, category=category, obligation=obligation, status=status,
                          summary=f"{item} {status}", producer=PRODUCER, deployment=deployment)


def trust_review_digest(case_path: Path) -> str:
    """The digest a review of trusted.compiler pins."""
    from assurance.case_loader import load_case
    from assurance.reviews import trust_digest

    return trust_digest(load_case(case_path).node("trusted.compiler"))


def build_store(url: str, case_path: Path, *, reviewed: bool = True, with_suite: bool = True) -> None:
    """Seq 1 the proof, 2 the suite run, 3 the accepting review (each optional but the proof)."""
    from evidence_db.reviews import add_review
    from evidence_db.session import open_session
    from evidence_db.store import ingest_records

    case_path.write_text(CASE)
    items = [record("proof-mm", "kernel.mm.contract")]
    if with_suite:
        items.append(record("batch-1", "suite.batch", "test_result"))
    with open_session(url, write=True) as session:
        ingest_records(session=session, records=items)
        if reviewed:
            add_review(session=session, target="trusted.compiler", target_digest=trust_review_digest(case_path),
                       decision="accept", reviewer="auditor", rationale="pinned compiler", expires=None)


@contextmanager
def raw_sql(url: str, *, bypass_checks: bool = False) -> Iterator[Connection]:
    """One committed transaction of raw SQL; ``bypass_checks`` first defeats the ``seq >= 1`` constraints."""
    engine = create_store_engine(url)
    try:
        with engine.begin() as conn:
            if bypass_checks and conn.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA ignore_check_constraints = ON")
            elif bypass_checks:
                for table in ("evidence_items", "reviews"):
                    conn.exec_driver_sql(f"ALTER TABLE {table} DROP CONSTRAINT ck_{table}_seq_positive")
            yield conn
    finally:
        engine.dispose()


def forge_review(conn: Connection, *, seq: int, target_digest: str, decision: str = "accept") -> None:
    """Insert a well-formed review (correct content digest, a plausible link) at ``seq``."""
    created = datetime(2026, 11, 1, tzinfo=timezone.utc)
    content = review_content(target="trusted.compiler", target_digest=target_digest, decision=decision,
                             reviewer="mallory", rationale="looks fine", expires=None, created_at=created)
    digest = content_digest_of_text(canonical_json(content))
    conn.execute(insert(Review).values(
        seq=seq, target="trusted.compiler", target_digest=target_digest, decision=decision, reviewer="mallory",
        rationale="looks fine", expires=None, created_at=created, content_digest=digest,
        prev_chain_digest=GENESIS_DIGEST, chain_digest=chain_link(GENESIS_DIGEST, seq, "review", digest)))
