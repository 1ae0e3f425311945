"""`bitcase review add --key`: signed reviews are by the key's identity; unsigned ones are shown as unsigned."""

import json

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(autouse=True)
def keyring_env(tmp_path, monkeypatch):
    monkeypatch.setenv("BITCASE_KEYS", str(tmp_path / "keys"))
    for name in ("BITCASE_SIGNING_KEY", "BITCASE_TRUSTED_KEYS"):
        monkeypatch.delenv(name, raising=False)


def test_signed_and_unsigned_reviews(store, case_file):
    key_id = invoke("key", "generate", "--name", "Ada <ada@example.org>").stdout.strip()
    base = ("--decision", "accept", "--rationale", "checked", "--db", store, "--case", case_file)
    both = invoke("review", "add", "T.gpu", *base, "--key", key_id, "--by", "someone else")
    assert both.exit_code == 2 and "cannot be combined" in both.stderr
    assert invoke("review", "add", "T.gpu", *base).exit_code == 2  # neither --key nor --by
    signed = invoke("review", "add", "T.gpu", *base, "--key", key_id, "--json")
    assert signed.exit_code == 0, signed.output
    assert (json.loads(signed.stdout)["reviewer"], json.loads(signed.stdout)["signed_by"]) == (
        "Ada <ada@example.org>", key_id)
    assert invoke("review", "add", "proof-1", *base, "--by", "bob").exit_code == 0
    listed = json.loads(invoke("review", "list", "--db", store, "--case", case_file, "--json").stdout)
    assert [(r["reviewer"], r["signed_by"], r["trusted_as"]) for r in listed] == [
        ("Ada <ada@example.org>", key_id, None), ("bob", None, None)]
    table = invoke("review", "list", "--db", store, "--case", case_file).stdout
    assert "(key NOT trusted)" in table and "unsigned" in table
    assert invoke("key", "trust", key_id).exit_code == 0
    listed = json.loads(invoke("review", "list", "--db", store, "--case", case_file, "--json").stdout)
    assert listed[0]["trusted_as"] == "Ada <ada@example.org>"
    assert invoke("audit", "verify", "--db", store).exit_code == 0
