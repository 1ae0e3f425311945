"""Chain-head checkpoints: truncation and full rewrites, with and without one (SQLite and PostgreSQL)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from evidence_db.canonical import canonical_json
from evidence_db.checkpoint import checkpoint_problems, make_checkpoint, read_checkpoint, write_checkpoint
from evidence_db.chain import GENESIS_DIGEST
from evidence_db.keyring import Keyring
from evidence_db.keys import generate_key
from evidence_db.store import ingest_records
from evidence_db.verify import verify_chain
from tests.evidence_db.factories import record, records


@pytest.fixture
def ring(tmp_path: Path) -> Keyring:
    keyring = Keyring(tmp_path / "keys", tmp_path / "keys" / "trusted_keys")
    keyring.trust(keyring.generate("auditor").public)
    return keyring


def _checkpoint(session: Session, ring: Keyring, path: Path, key=None) -> Path:
    write_checkpoint(path, make_checkpoint(session=session, key=key or ring.signing_key("auditor")))
    return path


def _problems(session: Session, ring: Keyring, path: Path) -> list[str]:
    return checkpoint_problems(session=session, checkpoint=read_checkpoint(path), trusted=ring.trusted())


def _truncate(session: Session, keep: int) -> None:
    """Delete the rows after ``keep`` and set the head back: a consistent, shorter chain."""
    session.execute(text(f"DELETE FROM subjects WHERE evidence_seq > {keep}"))
    session.execute(text(f"DELETE FROM evidence_items WHERE seq > {keep}"))
    digest = session.execute(text(f"SELECT chain_digest FROM evidence_items WHERE seq = {keep}")).scalar_one()
    session.execute(text("UPDATE chain_heads SET seq = :s, chain_digest = :d"), {"s": keep, "d": digest})


def test_the_store_extends_its_checkpoint(db_session: Session, ring: Keyring, tmp_path: Path) -> None:
    ingest_records(session=db_session, records=records(3))
    path = _checkpoint(db_session, ring, tmp_path / "head.json")
    ingest_records(session=db_session, records=records(2, start=3))  # growth is fine
    assert _problems(db_session, ring, path) == []


def test_attack_truncation(db_session: Session, ring: Keyring, tmp_path: Path) -> None:
    ingest_records(session=db_session, records=records(5))
    path = _checkpoint(db_session, ring, tmp_path / "head.json")
    _truncate(db_session, 3)
    assert verify_chain(session=db_session).is_intact  # without the checkpoint: undetectable
    (problem,) = _problems(db_session, ring, path)
    assert "ends at seq 3" in problem and "vouches for seq 5" in problem and "truncation" in problem


def test_attack_full_rewrite(db_session: Session, ring: Keyring, tmp_path: Path) -> None:
    ingest_records(session=db_session, records=records(4))
    path = _checkpoint(db_session, ring, tmp_path / "head.json")
    for table in ("subjects", "evidence_items"):
        db_session.execute(text(f"DELETE FROM {table}"))
    db_session.execute(text(f"UPDATE chain_heads SET seq = 0, chain_digest = '{GENESIS_DIGEST}'"))
    ingest_records(session=db_session, records=[record(0, status="fail"), *records(4, start=1)])  # with bitcase itself
    assert verify_chain(session=db_session).is_intact  # without the checkpoint: undetectable
    (problem,) = _problems(db_session, ring, path)
    assert "chain digest at seq 4" in problem and "rewritten" in problem


def test_attack_checkpoint_edited(db_session: Session, ring: Keyring, tmp_path: Path) -> None:
    ingest_records(session=db_session, records=records(5))
    path = _checkpoint(db_session, ring, tmp_path / "head.json")
    _truncate(db_session, 3)
    envelope = json.loads(path.read_text())
    body = json.loads(base64.b64decode(envelope["payload"]))
    body["seq"], body["chain_digest"] = 3, db_session.execute(text("SELECT chain_digest FROM chain_heads")).scalar()
    envelope["payload"] = base64.b64encode(canonical_json(body).encode()).decode()  # made to fit the truncated store
    path.write_text(json.dumps(envelope))
    (problem,) = _problems(db_session, ring, path)
    assert "does not verify" in problem


def test_attack_checkpoint_by_an_untrusted_key(db_session: Session, ring: Keyring, tmp_path: Path) -> None:
    ingest_records(session=db_session, records=records(2))
    path = _checkpoint(db_session, ring, tmp_path / "head.json", key=generate_key("mallory"))
    (problem,) = _problems(db_session, ring, path)
    assert "not trusted" in problem


def test_attack_checkpoint_of_another_store(db_session: Session, ring: Keyring, tmp_path: Path) -> None:
    ingest_records(session=db_session, records=records(2))
    path = _checkpoint(db_session, ring, tmp_path / "head.json")
    db_session.execute(text("UPDATE store_identity SET store_id = :s"),
                       {"s": "00000000-0000-4000-8000-000000000000"})
    (problem,) = _problems(db_session, ring, path)
    assert "is of store" in problem
