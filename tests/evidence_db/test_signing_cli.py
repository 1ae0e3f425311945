"""`bitcase key`, `ingest --require-signed`, `audit head` and `audit verify --expect-head`: output and exit codes."""

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
from evidence_db.keys import generate_key
from tests.evidence_db.factories import records

runner = CliRunner()


@pytest.fixture(autouse=True)
def keyring_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A keyring of this test's own; no signing key configured."""
    monkeypatch.setenv("BITCASE_KEYS", str(tmp_path / "keys"))
    for name in ("BITCASE_SIGNING_KEY", "BITCASE_TRUSTED_KEYS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "keys"


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def test_key_generate_list_trust(tmp_path: Path) -> None:
    made = invoke("key", "generate", "--name", "Ada <ada@example.org>", "--json")
    assert made.exit_code == 0, made.output
    key = json.loads(made.stdout)
    assert "PRIVATE" not in made.output and Path(key["public_key_file"]).is_file() and not key["trusted"]
    listed = json.loads(invoke("key", "list", "--json").stdout)["keys"]
    assert [(k["key_id"], k["can_sign"], k["trusted_as"]) for k in listed] == [(key["key_id"], True, None)]
    other = tmp_path / "bob.pub"
    other.write_text(generate_key("Bob").public.line() + "\n")
    for spec in (key["key_id"], other):
        assert invoke("key", "trust", spec).exit_code == 0
    table = invoke("key", "list").stdout
    assert f"{key['key_id']}\tsigning, trusted\tAda <ada@example.org>" in table and "\ttrusted\tBob" in table
    bad = tmp_path / "bad.pub"
    bad.write_text("ssh-rsa AAAAB3 someone\n")
    result = invoke("key", "trust", bad)
    assert result.exit_code == 2 and "bad.pub" in result.stderr
    assert invoke("key", "generate", "--name", " ").exit_code == 2


def _keys() -> tuple[str, str]:
    """A trusted signing key "ada" and an untrusted one "mallory"; their ids."""
    ada = json.loads(invoke("key", "generate", "--name", "ada", "--trust", "--json").stdout)["key_id"]
    mallory = json.loads(invoke("key", "generate", "--name", "mallory", "--json").stdout)["key_id"]
    return ada, mallory


def test_ingest_require_signed(store_url: str, tmp_path: Path) -> None:
    ada, mallory = _keys()
    ring = keyring_from_env()
    signed, forged, unsigned = tmp_path / "s.jsonl", tmp_path / "f.jsonl", tmp_path / "u.jsonl"
    write_bundle(signed, records(3), signer=ring.signing_key(ada))
    write_bundle(forged, records(2, start=5), signer=ring.signing_key(mallory))
    write_bundle(unsigned, records(1, start=9))
    for path, needle in ((unsigned, "u.jsonl: the bundle is unsigned"), (forged, f"f.jsonl: signed by key {mallory}")):
        result = invoke("ingest", signed, path, "--db", store_url, "--require-signed")
        assert result.exit_code == 2 and needle in result.stderr, result.output
    result = invoke("ingest", signed, forged, "--db", store_url, "--json")  # without the policy: both stored
    assert result.exit_code == 0, result.output
    files = json.loads(result.stdout)["files"]
    assert [(f["added"], f["signed_by"], f["trusted_as"]) for f in files] == [(3, ada, "ada"), (2, mallory, None)]
    assert "(key not trusted)" in result.stderr
    verified = invoke("audit", "verify", "--db", store_url)
    assert verified.exit_code == 0 and f"by {mallory} (key NOT trusted), 2 items" in verified.stdout
    signed.write_text(signed.read_text().replace('"pass"', '"fail"', 1))
    edited = invoke("ingest", signed, "--db", store_url)
    assert edited.exit_code == 2 and "edited after signing" in edited.stderr


def test_audit_head_and_expect_head(store_url: str, tmp_path: Path) -> None:
    ada, _ = _keys()
    write_bundle(tmp_path / "b.jsonl", records(4))
    invoke("ingest", tmp_path / "b.jsonl", "--db", store_url)
    head = tmp_path / "head.json"
    assert invoke("audit", "head", "--db", store_url, "--out", head).exit_code == 2  # no key: refused
    made = invoke("audit", "head", "--db", store_url, "--out", head, "--key", ada, "--json")
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["seq"] == 4
    assert invoke("audit", "verify", "--db", store_url, "--expect-head", head).exit_code == 0
    engine = create_store_engine(store_url)
    with engine.begin() as conn:  # truncate: drop the newest item and set the head back
        conn.execute(text("DELETE FROM subjects WHERE evidence_seq = 4"))
        conn.execute(text("DELETE FROM evidence_items WHERE seq = 4"))
        conn.execute(text("UPDATE chain_heads SET seq = 3, chain_digest = "
                          "(SELECT chain_digest FROM evidence_items WHERE seq = 3)"))
    engine.dispose()
    assert invoke("audit", "verify", "--db", store_url).exit_code == 0  # the chain alone cannot tell
    result = invoke("audit", "verify", "--db", store_url, "--expect-head", head, "--json")
    assert result.exit_code == 1
    assert "truncation" in json.loads(result.stdout)["checkpoint"]["problems"][0]
    (tmp_path / "junk.json").write_text("{}")
    junk = invoke("audit", "verify", "--db", store_url, "--expect-head", tmp_path / "junk.json")
    assert junk.exit_code == 2 and "not a bitcase chain-head checkpoint" in junk.stderr
