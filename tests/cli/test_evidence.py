"""`bitcase evidence list|show`: filters, order, --json, signer and reviews, exit codes 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from assurance.cli.main import app
from evidence_db.bundle import write_bundle
from evidence_db.engine import create_store_engine
from evidence_db.keyring import keyring_from_env
from evidence_db.migrate import ensure_store
from tests.evidence_db.factories import OTHER_DEPLOYMENT, records

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three signed kernel proofs (one failed), two unsigned test results under another D, one review."""
    monkeypatch.setenv("BITCASE_KEYS", str(tmp_path / "keys"))
    for name in ("BITCASE_SIGNING_KEY", "BITCASE_TRUSTED_KEYS"):
        monkeypatch.delenv(name, raising=False)
    db = tmp_path / "store.db"
    ensure_store(f"sqlite:///{db}")
    ada = json.loads(invoke("key", "generate", "--name", "ada", "--trust", "--json").stdout)["key_id"]
    proofs = records(3)
    proofs[1] = records(1, start=1, status="fail")[0]
    write_bundle(tmp_path / "proofs.jsonl", proofs, signer=keyring_from_env().signing_key(ada))
    write_bundle(tmp_path / "tests.jsonl",
                 records(2, start=7, category="test_result", obligation="T_unit", deployment=OTHER_DEPLOYMENT))
    assert invoke("ingest", tmp_path / "proofs.jsonl", tmp_path / "tests.jsonl", "--db", db).exit_code == 0
    reviewed = invoke("review", "add", "proof:matmul:0", "--decision", "accept", "--rationale", "read the proof",
                      "--by", "ada", "--db", db)
    assert reviewed.exit_code == 0, reviewed.output
    return db


def test_list_sorts_and_filters(store: Path) -> None:
    result = invoke("evidence", "list", "--db", store)
    assert result.exit_code == 0, result.output
    ids = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert ids == ["proof:matmul:0", "proof:matmul:1", "proof:matmul:2", "proof:matmul:7", "proof:matmul:8"]
    assert "hash chain intact" in result.stderr and "5 of 5 stored item(s) match" in result.stderr
    failed = invoke("evidence", "list", "--db", store, "--status", "fail").stdout.splitlines()
    assert [line.split("\t")[:2] for line in failed] == [["proof:matmul:1", "fail"]]
    tests = invoke("evidence", "list", "--db", store, "--category", "test_result", "--obligation", "T_*")
    assert len(tests.stdout.splitlines()) == 2
    limited = invoke("evidence", "list", "--db", store, "--limit", "2")
    assert len(limited.stdout.splitlines()) == 2 and "first 2 shown" in limited.stderr


def test_list_by_config_and_json(store: Path) -> None:
    digest = OTHER_DEPLOYMENT.digest
    result = invoke("evidence", "list", "--db", store, "--config", digest[7:19], "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [i["id"] for i in doc["items"]] == ["proof:matmul:7", "proof:matmul:8"] and doc["matched"] == 2
    assert {i["deployment_digest"] for i in doc["items"]} == {digest} and doc["items"][0]["signer"] is None
    signed = json.loads(invoke("evidence", "list", "--db", store, "--obligation", "G_kernel_matmul", "--json").stdout)
    assert all(i["signer"]["trusted_as"] == "ada" for i in signed["items"])
    unknown = invoke("evidence", "list", "--db", store, "--config", "ffffffff")
    assert unknown.exit_code == 2 and "no deployment configuration matches ffffffff" in unknown.stderr
    bad = invoke("evidence", "list", "--db", store, "--status", "passed")
    assert bad.exit_code == 2 and "'pass', 'fail'" in bad.stderr


def test_show_prints_the_whole_item(store: Path) -> None:
    result = invoke("evidence", "show", "proof:matmul:0", "--db", store)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for needle in ("id:\tproof:matmul:0", "result:\tpass", "chain seq:\t1", "content:\tsha256:",
                   "subject:\tcode:kernels/matmul.py\tsha256:", "(trusted as ada)",
                   "accept by ada on", "current: read the proof", '"BLOCK_M": 64'):
        assert needle in out, (needle, out)
    doc = json.loads(invoke("evidence", "show", "proof:matmul:0", "--db", store, "--json").stdout)
    assert doc["seq"] == 1 and doc["details"]["config"] == {"BLOCK_M": 64}
    assert doc["reviews"][0]["pinned_to_current"] is True and doc["signer"]["signed_as"] == "ada"
    plain = invoke("evidence", "show", "proof:matmul:7", "--db", store).stdout
    assert "signed:\tunsigned" in plain and "review:\tnone" in plain


def test_show_unknown_id_exits_2_with_close_matches(store: Path) -> None:
    result = invoke("evidence", "show", "proof:matmul:", "--db", store)
    assert result.exit_code == 2
    assert "no evidence item 'proof:matmul:'" in result.stderr and "did you mean proof:matmul:0" in result.stderr
    result = invoke("evidence", "show", "proof:matmol:2", "--db", store)
    assert result.exit_code == 2 and "proof:matmul:2" in result.stderr


def test_a_broken_chain_shows_nothing_and_exits_1(store: Path) -> None:
    engine = create_store_engine(f"sqlite:///{store}")
    with engine.begin() as conn:  # an edit behind bitcase's back
        conn.execute(text("UPDATE evidence_items SET status = 'pass' WHERE seq = 2"))
    engine.dispose()
    for args in (("list",), ("show", "proof:matmul:0")):
        result = invoke("evidence", *args, "--db", store)
        assert result.exit_code == 1 and result.stdout == "", result.output
        assert "hash chain BROKEN: first bad row seq 2" in result.stderr
    doc = json.loads(invoke("evidence", "list", "--db", store, "--json").stdout)
    assert doc["items"] is None and doc["chain"]["intact"] is False


def test_review_hint_points_at_evidence_show(store: Path) -> None:
    result = invoke("review", "add", "nope", "--decision", "accept", "--rationale", "x", "--by", "a", "--db", store)
    assert result.exit_code == 2 and "`bitcase evidence show ID`" in result.stderr
