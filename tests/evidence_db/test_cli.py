"""`bitcase db`, `bitcase ingest` and `bitcase audit verify`: output streams and exit codes 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sqlalchemy import text
from typer.testing import CliRunner

from evidence_db.engine import create_store_engine
from evidence_db.migrate import head_revision
from tests.evidence_db.conftest import count_rows
from tests.evidence_db.factories import bundle, record_dict
from tests.evidence_db.test_junit import MAPPING, REPORT

runner = CliRunner()


def test_db_upgrade_current_and_check(cli: typer.Typer, empty_url: str) -> None:
    missing = runner.invoke(cli, ["db", "current", "--db", empty_url, "--json"])
    assert missing.exit_code == 1
    assert json.loads(missing.stdout) == {"store": empty_url, "current": None, "head": head_revision(),
                                          "is_current": False}
    assert "bitcase db upgrade" in missing.stderr
    if empty_url.startswith("sqlite:///"):
        assert not Path(empty_url.removeprefix("sqlite:///")).exists()  # asking does not create the file
    upgraded = runner.invoke(cli, ["db", "upgrade", "--db", empty_url])
    assert upgraded.exit_code == 0 and upgraded.stdout == ""
    current = runner.invoke(cli, ["db", "current", "--db", empty_url])
    assert (current.exit_code, current.stdout) == (0, f"{head_revision()} (head)\n")
    checked = runner.invoke(cli, ["db", "check", "--db", empty_url, "--json"])
    assert (checked.exit_code, json.loads(checked.stdout)) == (0, {"drift": []})


def test_db_check_reports_drift(cli: typer.Typer, store_url: str) -> None:
    engine = create_store_engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_reviews_target"))
    engine.dispose()
    result = runner.invoke(cli, ["db", "check", "--db", store_url])
    assert result.exit_code == 1 and "add_index" in result.stdout


def test_ingest_then_verify(cli: typer.Typer, store_url: str, tmp_path: Path) -> None:
    path = bundle(tmp_path / "b.jsonl", 3)
    first = runner.invoke(cli, ["ingest", str(path), "--db", store_url, "--json"])
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["added"] == 3
    assert "3 added, 0 unchanged" in first.stderr
    again = runner.invoke(cli, ["ingest", str(tmp_path), "--db", store_url, "--json"])
    assert json.loads(again.stdout)["files"] == [{"path": str(path), "added": 0, "unchanged": 3, "signed_by": None,
                                                  "trusted_as": None}]
    verified = runner.invoke(cli, ["audit", "verify", "--db", store_url])
    assert verified.exit_code == 0
    assert verified.stdout.startswith("hash chain intact: 3 rows, head seq 3 sha256:")


def test_audit_verify_names_the_first_bad_row(cli: typer.Typer, store_url: str, tmp_path: Path) -> None:
    runner.invoke(cli, ["ingest", str(bundle(tmp_path / "b.jsonl", 4)), "--db", store_url])
    engine = create_store_engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE evidence_items SET status = 'fail' WHERE seq = 2"))
    engine.dispose()
    result = runner.invoke(cli, ["audit", "verify", "--db", store_url])
    assert result.exit_code == 1
    assert result.stdout.startswith("hash chain BROKEN: first bad row seq 2 (evidence 'proof:matmul:1')")
    as_json = json.loads(runner.invoke(cli, ["audit", "verify", "--db", store_url, "--json"]).stdout)
    assert (as_json["intact"], as_json["first_bad"]["seq"], as_json["head"]["seq"]) == (False, 2, 4)


def test_a_bad_record_writes_nothing(cli: typer.Typer, store_url: str, tmp_path: Path) -> None:
    good = bundle(tmp_path / "a.jsonl", 5)
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps(record_dict(10)) + "\n" + json.dumps(record_dict(11, status="passed")) + "\n")
    result = runner.invoke(cli, ["ingest", str(good), str(bad), "--db", store_url, "--json"])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"{bad}:2 (id 'proof:matmul:11'): field `status`" in " ".join(result.stderr.split())
    assert "hint: use one of: pass" in result.stderr
    assert count_rows(store_url, "evidence_items") == 0
    assert count_rows(store_url, "deployments") == 0


def test_conflicting_record_is_an_input_error(cli: typer.Typer, store_url: str, tmp_path: Path) -> None:
    runner.invoke(cli, ["ingest", str(bundle(tmp_path / "a.jsonl", 2)), "--db", store_url])
    changed = tmp_path / "changed.jsonl"
    changed.write_text(json.dumps(record_dict(1, summary="different")) + "\n")
    result = runner.invoke(cli, ["ingest", str(changed), "--db", store_url])
    assert result.exit_code == 2
    assert "already stored with different content" in result.stderr


def test_ingest_usage_errors(cli: typer.Typer, db_path: Path, tmp_path: Path) -> None:
    missing_store = runner.invoke(cli, ["ingest", str(bundle(tmp_path / "a.jsonl", 1)), "--db",
                                        str(tmp_path / "none.db")])
    assert missing_store.exit_code == 2 and "create it with `bitcase db upgrade" in missing_store.stderr
    report = tmp_path / "r.xml"
    report.write_text(REPORT.replace("bitcase.deployment", "something.else"))
    no_deployment = runner.invoke(cli, ["ingest", str(report), "--db", str(db_path)])
    assert no_deployment.exit_code == 2 and "--deployment FILE.json" in no_deployment.stderr
    bad_mapping = runner.invoke(cli, ["ingest", str(report), "--db", str(db_path), "--obligation", "nope"])
    assert bad_mapping.exit_code == 2 and "TESTID_GLOB=OBLIGATION" in bad_mapping.stderr
    no_file = runner.invoke(cli, ["ingest", str(tmp_path / "nothing.jsonl"), "--db", str(db_path)])
    assert no_file.exit_code == 2 and "no such file" in no_file.stderr
    assert runner.invoke(cli, ["ingest", "--db", str(db_path)]).exit_code == 2  # no PATH


def test_ingest_junit_with_options(cli: typer.Typer, store_url: str, tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    report.write_text(REPORT.replace("bitcase.deployment", "something.else"))
    deployment = tmp_path / "d.json"
    deployment.write_text(json.dumps({"fields": {"gpu": "none"}}))
    args = ["ingest", str(report), "--db", store_url, "--deployment", str(deployment), "--json", "--any-obligation"]
    for glob, obligation in MAPPING:
        args += ["--obligation", f"{glob}={obligation}"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["added"] == 5


def test_verify_on_a_missing_store_is_a_usage_error(cli: typer.Typer, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["audit", "verify", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 2 and "no evidence store at" in result.stderr


def test_ingest_from_standard_input(cli: typer.Typer, store_url: str, tmp_path: Path) -> None:
    lines = bundle(tmp_path / "b.jsonl", 2).read_text()
    result = runner.invoke(cli, ["ingest", "-", "--db", store_url, "--json"], input=lines)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["files"] == [{"path": "-", "added": 2, "unchanged": 0, "signed_by": None,
                                                   "trusted_as": None}]
    bad = runner.invoke(cli, ["ingest", "-", "--db", store_url], input=lines + "{oops\n")
    assert bad.exit_code == 2 and "<stdin>:3" in bad.stderr


def test_upgrade_to_an_unknown_revision_is_a_usage_error(cli: typer.Typer, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["db", "upgrade", "--db", str(tmp_path / "x.db"), "--revision", "zzz"])
    assert result.exit_code == 2
    assert "cannot migrate" in result.stderr and "Can't locate revision" in result.stderr


def test_a_file_that_is_not_a_database(cli: typer.Typer, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(bytes(range(256)) * 20)
    for args in (["db", "current"], ["db", "upgrade"], ["audit", "verify"], ["ingest", str(garbage)]):
        result = runner.invoke(cli, [*args, "--db", str(garbage)])
        assert result.exit_code == 2, (args, result.stderr)
        assert "file is not a database" in result.stderr
