"""Attacks on signed bundles and signed reviews, on SQLite and PostgreSQL (docs/threat-model.md counts them)."""

from __future__ import annotations

import base64
import json
import re
from datetime import date, datetime, timezone
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from evidence_db.bundle import write_bundle
from evidence_db.bundle_sig import read_signature, signature_path
from evidence_db.canonical import canonical_json, sha256_digest
from evidence_db.checkpoint import checkpoint_problems, make_checkpoint, read_checkpoint, write_checkpoint
from evidence_db.chain import GENESIS_DIGEST, chain_link, content_digest_of_text, review_content
from evidence_db.errors import SignatureError
from evidence_db.ingest import SignaturePolicy, ingest_paths
from evidence_db.keyring import Keyring
from evidence_db.keys import SigningKey, generate_key
from evidence_db.prepare import Preparer
from evidence_db.reviews import add_review, list_reviews
from evidence_db.signatures import list_signers
from evidence_db.store import ingest_prepared, ingest_records
from evidence_db.verify import verify_chain
from tests.evidence_db.factories import record, records


@pytest.fixture
def ring(tmp_path: Path) -> Keyring:
    """A keyring whose trusted keys hold "ada" only."""
    keyring = Keyring(tmp_path / "keys", tmp_path / "keys" / "trusted_keys")
    keyring.generate("ada")
    keyring.trust(keyring.signing_key("ada").public)
    return keyring


@pytest.fixture
def ada(ring: Keyring) -> SigningKey:
    return ring.signing_key("ada")


MALLORY = generate_key("mallory")  # a key nobody trusts


def _signed(tmp_path: Path, key: SigningKey | None, count: int = 4, name: str = "b.jsonl") -> Path:
    path = tmp_path / name
    write_bundle(path, records(count), signer=key)
    return path


def _ingest(session: Session, path: Path, ring: Keyring, *, required: bool = False):
    (_, result), = ingest_paths(session=session, paths=[path], signed=SignaturePolicy(ring.trusted(), required))
    return result


def _sql(session: Session, *statements: str) -> None:
    for statement in statements:
        session.execute(text(statement))


def _faults(session: Session) -> list[tuple[int, str, str]]:
    return [(f.seq, f.kind, f.reason) for f in verify_chain(session=session).faults]


def test_signed_bundle_is_stored_with_its_signer(db_session: Session, tmp_path: Path, ring: Keyring,
                                                 ada: SigningKey) -> None:
    path = _signed(tmp_path, ada)
    assert _ingest(db_session, path, ring, required=True).signed_by == ada.key_id
    again = _ingest(db_session, path, ring, required=True)  # the same signed bundle again: a no-op
    assert (again.added, again.unchanged, again.signed_by) == (0, 4, ada.key_id)
    report = verify_chain(session=db_session)
    assert report.is_intact and (report.num_rows, report.head_seq) == (5, 5)  # 4 items, then the signature
    assert [(s.key_id, s.num_signatures, s.num_items) for s in list_signers(session=db_session)] == [(ada.key_id, 1, 4)]


def test_unsigned_bundles_stay_readable(db_session: Session, tmp_path: Path, ring: Keyring, ada: SigningKey) -> None:
    path = _signed(tmp_path, ada)
    write_bundle(path, records(3))  # rewritten unsigned: the stale .sig goes with it
    assert not signature_path(path).exists()
    assert _ingest(db_session, path, ring).signed_by is None


def test_attack_wrong_key_claims_a_trusted_identity(db_session: Session, tmp_path: Path, ring: Keyring,
                                                    ada: SigningKey) -> None:
    path = _signed(tmp_path, MALLORY)
    sig = json.loads(signature_path(path).read_text())
    statement = json.loads(base64.b64decode(sig["payload"]))
    statement["predicate"]["signer"]["public_key"] = ada.public.openssh  # claim to be ada, signed by mallory
    sig["payload"] = base64.b64encode(canonical_json(statement).encode()).decode()
    sig["signatures"][0]["keyid"] = ada.key_id
    signature_path(path).write_text(json.dumps(sig))
    with pytest.raises(SignatureError, match=f"signature by {re.escape(ada.key_id)} does not verify"):
        _ingest(db_session, path, ring)


def test_attack_stripped_signature(db_session: Session, tmp_path: Path, ring: Keyring, ada: SigningKey) -> None:
    path = _signed(tmp_path, ada)
    signature_path(path).unlink()
    with pytest.raises(SignatureError, match=r"b\.jsonl: the bundle is unsigned .*--require-signed refuses"):
        _ingest(db_session, path, ring, required=True)
    assert verify_chain(session=db_session).num_rows == 0  # nothing stored
    assert _ingest(db_session, path, ring).signed_by is None  # without the policy: stored, as unsigned


def test_attack_payload_edited_after_signing(db_session: Session, tmp_path: Path, ring: Keyring,
                                             ada: SigningKey) -> None:
    path = _signed(tmp_path, ada)
    path.write_text(path.read_text().replace('"status":"pass"', '"status":"fail"', 1))
    with pytest.raises(SignatureError, match="bytes are not the ones signed"):
        _ingest(db_session, path, ring)


def test_attack_statement_edited_to_match_the_edited_bundle(db_session: Session, tmp_path: Path, ring: Keyring,
                                                            ada: SigningKey) -> None:
    path = _signed(tmp_path, ada)
    path.write_text(path.read_text().replace('"status":"pass"', '"status":"fail"', 1))
    sig = json.loads(signature_path(path).read_text())
    statement = json.loads(base64.b64decode(sig["payload"]))
    statement["subject"][0]["digest"]["sha256"] = sha256_digest(path.read_bytes()).removeprefix("sha256:")
    sig["payload"] = base64.b64encode(canonical_json(statement).encode()).decode()
    signature_path(path).write_text(json.dumps(sig))
    with pytest.raises(SignatureError, match="does not verify"):
        _ingest(db_session, path, ring)


def test_attack_records_swapped_under_a_valid_signature(db_session: Session, tmp_path: Path, ada: SigningKey) -> None:
    signature = read_signature(_signed(tmp_path, ada))  # then other records are fed in (a file changed mid-read)
    prepare = Preparer()
    others = [prepare(r.to_json_dict(), f"record {i}") for i, r in enumerate(records(4, start=10))]
    with pytest.raises(SignatureError, match="not the ones signed"):
        ingest_prepared(session=db_session, records=others, signature=signature)


def test_attack_resigned_by_an_untrusted_key(db_session: Session, tmp_path: Path, ring: Keyring) -> None:
    path = tmp_path / "b.jsonl"
    write_bundle(path, [record(0, status="fail", summary="forged")], signer=MALLORY)
    with pytest.raises(SignatureError, match=rf"b\.jsonl: signed by key {re.escape(MALLORY.key_id)} .*not trusted"):
        _ingest(db_session, path, ring, required=True)
    assert _ingest(db_session, path, ring).signed_by == MALLORY.key_id  # stored, and shown as untrusted:
    assert ring.trusted().name_of(MALLORY.key_id) is None


def test_attack_signature_row_deleted(db_session: Session, tmp_path: Path, ring: Keyring, ada: SigningKey) -> None:
    _ingest(db_session, _signed(tmp_path, ada), ring)
    _sql(db_session, "DELETE FROM signed_evidence", "DELETE FROM bundle_signatures")
    assert _faults(db_session)[0][:2] == (5, "missing")


def test_attack_signature_unlinked_or_moved(db_session: Session, tmp_path: Path, ring: Keyring,
                                            ada: SigningKey) -> None:
    _ingest(db_session, _signed(tmp_path, ada), ring)
    ingest_records(session=db_session, records=records(1, start=9))  # seq 6, unsigned
    _sql(db_session, "UPDATE signed_evidence SET evidence_seq = 6 WHERE evidence_seq = 4")
    (seq, kind, reason), = _faults(db_session)
    assert (seq, kind) == (5, "signature") and "not the ones" in reason


def test_attack_signature_envelope_swapped(db_session: Session, tmp_path: Path, ring: Keyring,
                                           ada: SigningKey) -> None:
    _ingest(db_session, _signed(tmp_path, ada), ring)
    other = read_signature(_signed(tmp_path, ada, count=2, name="c.jsonl")).envelope.to_json()
    db_session.execute(text("UPDATE bundle_signatures SET envelope = :e"), {"e": canonical_json(other)})
    faults = _faults(db_session)
    assert faults[0][:2] == (5, "signature") and "content was edited" in faults[0][2]


def _rewrite(session: Session, new_records: list, *, keep_signature: bool) -> None:
    """The forger's full rewrite: drop every row, re-append with bitcase's own code (a consistent chain),
    optionally putting the old signature row back, correctly chained, over the new rows."""
    old = session.execute(text("SELECT key_id, public_key, envelope, num_records, records_digest, content_digest "
                               "FROM bundle_signatures")).all()
    _sql(session, "DELETE FROM signed_evidence", "DELETE FROM bundle_signatures", "DELETE FROM reviews",
         "DELETE FROM subjects", "DELETE FROM evidence_items",
         f"UPDATE chain_heads SET seq = 0, chain_digest = '{GENESIS_DIGEST}'")
    ingest_records(session=session, records=new_records)
    if keep_signature:
        head_seq, head_digest = session.execute(text("SELECT seq, chain_digest FROM chain_heads")).one()
        for row in old:
            head_seq, prev = head_seq + 1, head_digest
            head_digest = chain_link(prev, head_seq, "signature", row.content_digest)
            session.execute(text("INSERT INTO bundle_signatures VALUES (:s, :k, :p, :e, :n, :r, :c, :prev, :chain)"),
                            {"s": head_seq, "k": row.key_id, "p": row.public_key, "e": row.envelope,
                             "n": row.num_records, "r": row.records_digest, "c": row.content_digest,
                             "prev": prev, "chain": head_digest})
            _sql(session, f"INSERT INTO signed_evidence SELECT {head_seq}, seq FROM evidence_items")
        session.execute(text("UPDATE chain_heads SET seq = :s, chain_digest = :d"), {"s": head_seq, "d": head_digest})


def test_attack_full_rewrite_keeping_the_signature(db_session: Session, tmp_path: Path, ring: Keyring,
                                                   ada: SigningKey) -> None:
    _ingest(db_session, _signed(tmp_path, ada), ring)
    _rewrite(db_session, [record(0, status="fail"), *records(3, start=1)], keep_signature=True)
    (seq, kind, reason), = _faults(db_session)  # the chain is consistent; the signature is not
    assert (seq, kind) == (5, "signature") and "not the ones" in reason


def _checkpoint(session: Session, key: SigningKey, path: Path):
    write_checkpoint(path, make_checkpoint(session=session, key=key))
    return read_checkpoint(path)


def test_attack_full_rewrite_dropping_the_signature_needs_a_checkpoint(db_session: Session, tmp_path: Path,
                                                                       ring: Keyring, ada: SigningKey) -> None:
    _ingest(db_session, _signed(tmp_path, ada), ring)
    checkpoint = _checkpoint(db_session, ada, tmp_path / "head.json")
    _rewrite(db_session, [record(0, status="fail"), *records(4, start=1)], keep_signature=False)
    assert verify_chain(session=db_session).is_intact  # undetectable from the store alone…
    assert list_signers(session=db_session) == []  # …but the signature is gone, and the checkpoint sees it:
    (problem,) = checkpoint_problems(session=db_session, checkpoint=checkpoint, trusted=ring.trusted())
    assert "rewritten" in problem


def _signed_review(session: Session, key: SigningKey) -> None:
    add_review(session=session, target="T_triton", target_digest=sha256_digest(b"t"), decision="accept",
               reviewer=key.name, rationale="inspected", expires=date(2030, 1, 1), signer=key)


def test_signed_review_verifies_and_names_its_key(db_session: Session, ada: SigningKey) -> None:
    _signed_review(db_session, ada)
    assert verify_chain(session=db_session).is_intact
    assert [(r.reviewer, r.signer_key_id) for r in list_reviews(session=db_session)] == [("ada", ada.key_id)]


def test_attack_review_signature_stripped(db_session: Session, ada: SigningKey) -> None:
    _signed_review(db_session, ada)
    _sql(db_session, "UPDATE reviews SET signature = NULL, signer_public_key = NULL")
    assert "lost part of its signature" in _faults(db_session)[0][2]


def _rechain_last_review(session: Session, *, decision: str, signer_key_id: str | None) -> None:
    """Edit the newest row (a review) and recompute its digests and the head: a consistent chain."""
    row = session.execute(text("SELECT seq, target, target_digest, reviewer, rationale, prev_chain_digest "
                               "FROM reviews ORDER BY seq DESC")).first()
    created = list_reviews(session=session)[-1]
    content = review_content(target=row.target, target_digest=row.target_digest, decision=decision,
                             reviewer=row.reviewer, rationale=row.rationale, expires=date(2030, 1, 1),
                             created_at=_parse(created.created_at), signer_key_id=signer_key_id)
    digest = content_digest_of_text(canonical_json(content))
    chain = chain_link(row.prev_chain_digest, row.seq, "review", digest)
    session.execute(text("UPDATE reviews SET decision = :d, content_digest = :c, chain_digest = :h, "
                         "signer_key_id = :k WHERE seq = :s"),
                    {"d": decision, "c": digest, "h": chain, "k": signer_key_id, "s": row.seq})
    if signer_key_id is None:
        _sql(session, f"UPDATE reviews SET signature = NULL, signer_public_key = NULL WHERE seq = {row.seq}")
    session.execute(text("UPDATE chain_heads SET chain_digest = :h"), {"h": chain})


def _parse(iso: str) -> datetime:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def test_attack_signed_review_rewritten(db_session: Session, ada: SigningKey) -> None:
    _signed_review(db_session, ada)
    _rechain_last_review(db_session, decision="reject", signer_key_id=ada.key_id)
    (seq, kind, reason), = _faults(db_session)
    assert (seq, kind) == (1, "review") and "does not verify" in reason


def test_attack_signed_review_rewritten_as_unsigned_needs_a_checkpoint(db_session: Session, tmp_path: Path,
                                                                       ring: Keyring, ada: SigningKey) -> None:
    _signed_review(db_session, ada)
    checkpoint = _checkpoint(db_session, ada, tmp_path / "head.json")
    _rechain_last_review(db_session, decision="reject", signer_key_id=None)
    assert verify_chain(session=db_session).is_intact  # undetectable from the store alone
    assert list_reviews(session=db_session)[0].signer_key_id is None  # shown as unsigned; the checkpoint sees it:
    (problem,) = checkpoint_problems(session=db_session, checkpoint=checkpoint, trusted=ring.trusted())
    assert "rewritten" in problem
