"""Every attack on the store fails the verdict: `check` exits 1 naming the first bad row (SQLite and PostgreSQL).

Before the chain was part of the verdict, each of these left `bitcase check` passing (or turned
a FAIL into a PASS) while only `bitcase audit verify` noticed, if anything did.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.evidence_db.attacks import CASE, CPU, build_store, forge_review, invoke, raw_sql, trust_review_digest

CLAIM_COMMANDS = (("check",), ("status",), ("export",), ("trusted-base",), ("whatif", "--distrust", "suite.batch"))

# name -> (statements, (seq, words the first fault names))
EDITS = {
    "summary edited": (["UPDATE evidence_items SET summary = 'all good' WHERE seq = 2"], (2, "content was edited")),
    "status flipped": (["UPDATE evidence_items SET status = 'fail' WHERE seq = 1"], (1, "content was edited")),
    "row deleted": (["DELETE FROM subjects WHERE evidence_seq = 2", "DELETE FROM evidence_items WHERE seq = 2"],
                    (2, "no row at this chain position")),
    "rows reordered": (["UPDATE evidence_items SET seq = seq + 100 WHERE seq IN (1, 2)",
                        "UPDATE evidence_items SET seq = 2 WHERE seq = 101",
                        "UPDATE evidence_items SET seq = 1 WHERE seq = 102"], (1, "link to the previous row")),
    "review edited": (["UPDATE reviews SET rationale = 'rubber-stamped'"], (3, "content was edited")),
    "head rewound": (["UPDATE chain_heads SET seq = 2"], (2, "chain head does not match")),
}


@pytest.fixture
def case_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BITCASE_HOME", str(tmp_path / "home"))
    return tmp_path / "gate.toml"


def test_the_untouched_store_passes(store_url: str, case_path: Path) -> None:
    build_store(store_url, case_path)
    result = invoke("check", "--db", store_url, "--case", case_path, "--json")
    assert result.exit_code == 0, result.output
    chain = json.loads(result.stdout)["judged"]["chain"]
    assert chain["intact"] and chain["rows"] == 3 and chain["head"]["seq"] == 3


@pytest.mark.parametrize("attack", sorted(EDITS))
def test_an_edit_fails_every_claim_command(store_url: str, case_path: Path, attack: str) -> None:
    statements, (seq, words) = EDITS[attack]
    build_store(store_url, case_path)
    with raw_sql(store_url) as conn:
        for statement in statements:
            conn.execute(text(statement))
    for command in CLAIM_COMMANDS:
        result = invoke(*command, "--db", store_url, "--case", case_path)
        assert result.exit_code == 1, (command, result.output)
        assert f"first bad row seq {seq} " in result.stderr and words in result.stderr, (command, result.stderr)
    as_json = invoke("check", "--db", store_url, "--case", case_path, "--json")
    doc = json.loads(as_json.stdout)
    assert doc["passed"] is False and doc["judged"]["chain"]["first_bad"]["seq"] == seq
    report = invoke("report", "--db", store_url, "--case", case_path, "--out", case_path.parent / "out")
    assert report.exit_code == 1 and f"first bad row seq {seq} " in report.stderr
    assert not (case_path.parent / "out" / "report.html").exists()
    assert invoke("audit", "verify", "--db", store_url).exit_code == 1


@pytest.mark.parametrize("seq", [-5, 0, 4])
def test_a_forged_accepting_review_outside_the_chain_does_not_flip_check(store_url: str, case_path: Path,
                                                                        seq: int) -> None:
    from evidence_db.reviews import list_reviews
    from evidence_db.session import open_session

    build_store(store_url, case_path, reviewed=False)
    before = invoke("check", "--db", store_url, "--case", case_path)
    assert before.exit_code == 1 and "trusted item review is unreviewed" in before.stdout
    with raw_sql(store_url, bypass_checks=True) as conn:
        forge_review(conn, seq=seq, target_digest=trust_review_digest(case_path))
    after = invoke("check", "--db", store_url, "--case", case_path)
    assert after.exit_code == 1, after.output
    assert f"first bad row seq {seq} (review 'trusted.compiler'): stray row" in after.stderr
    verify = invoke("audit", "verify", "--db", store_url)
    assert verify.exit_code == 1 and f"seq {seq} (review 'trusted.compiler'): stray row" in verify.stdout
    with open_session(store_url) as session:
        assert list_reviews(session=session) == []  # no reader uses a row the chain does not cover


def test_the_schema_refuses_rows_at_seq_zero_or_below(store_url: str, case_path: Path) -> None:
    from sqlalchemy.exc import IntegrityError

    build_store(store_url, case_path, reviewed=False)
    with pytest.raises(IntegrityError, match="seq_positive"):
        with raw_sql(store_url) as conn:
            forge_review(conn, seq=-1, target_digest=trust_review_digest(case_path))
    with pytest.raises(IntegrityError, match="seq_positive"):
        with raw_sql(store_url) as conn:
            conn.execute(text("UPDATE evidence_items SET seq = 0 WHERE seq = 1"))


def test_a_stray_passing_item_does_not_discharge_a_missing_obligation(store_url: str, case_path: Path) -> None:
    from evidence_db.session import open_session
    from evidence_db.store import load_evidence

    build_store(store_url, case_path, with_suite=False)
    assert invoke("check", "--db", store_url, "--case", case_path).exit_code == 1
    with raw_sql(store_url, bypass_checks=True) as conn:  # a copy of the proof row, as a passing suite run
        conn.execute(text("INSERT INTO evidence_items (seq, record_id, schema_id, category, obligation, status, "
                          "summary, details, produced_at, deployment_id, producer_id, content_digest, "
                          "prev_chain_digest, chain_digest) SELECT -1, 'batch-forged', schema_id, 'test_result', "
                          "'suite.batch', 'pass', summary, details, produced_at, deployment_id, producer_id, "
                          "content_digest, prev_chain_digest, chain_digest FROM evidence_items WHERE seq = 1"))
    result = invoke("status", "--db", store_url, "--case", case_path, "--json")
    assert result.exit_code == 1 and "seq -1 (evidence 'batch-forged'): stray row" in result.stderr
    with open_session(store_url) as session:
        assert [v.item_id for v in load_evidence(session=session)] == ["proof-mm"]


def test_a_review_sharing_a_position_with_an_item_is_named(store_url: str, case_path: Path) -> None:
    build_store(store_url, case_path, reviewed=False)
    with raw_sql(store_url) as conn:
        forge_review(conn, seq=2, target_digest=trust_review_digest(case_path))
    result = invoke("check", "--db", store_url, "--case", case_path)
    assert result.exit_code == 1 and "first bad row seq 2" in result.stderr and "2 rows share" in result.stderr


def test_unrelated_evidence_under_another_d_does_not_flip_a_pinned_gate(store_url: str, case_path: Path) -> None:
    """The gate used to judge the newest D in the store: one JUnit ingest under another D turned PASS into FAIL."""
    build_store(store_url, case_path)
    junit = case_path.parent / "other.xml"
    junit.write_text('<testsuite name="t"><testcase classname="tests.other" name="test_gpu">'
                     '<failure message="boom"/></testcase></testsuite>')
    deployment = case_path.parent / "gpu.json"
    deployment.write_text(json.dumps({"fields": {"device": "cuda:0", "owner": "someone else"}}))
    assert invoke("check", "--db", store_url, "--case", case_path).exit_code == 0
    ingested = invoke("ingest", junit, "--deployment", deployment, "--obligation", "tests.*=suite.batch",
                      "--db", store_url)
    assert ingested.exit_code == 0, ingested.output
    pinned = invoke("check", "--db", store_url, "--case", case_path)
    assert pinned.exit_code == 0, pinned.output
    assert "pinned by the case" in pinned.stderr
    latest = invoke("check", "--db", store_url, "--case", case_path, "--config", "latest")
    assert latest.exit_code == 1 and "`latest`, the latest in the store" in latest.stderr  # the old default's flip
    unpinned = case_path.parent / "unpinned.toml"
    unpinned.write_text(CASE.replace('deployment = "', '# deployment = "'))
    refused = invoke("check", "--db", store_url, "--case", unpinned)
    assert refused.exit_code == 2 and "no deployment configuration D is pinned" in refused.stderr
    project = case_path.parent / "home" / "project.toml"
    project.parent.mkdir(parents=True, exist_ok=True)
    project.write_text(f'deployment = "{CPU.digest[:19]}"\n')
    by_project = invoke("check", "--db", store_url, "--case", unpinned)
    assert by_project.exit_code == 0 and f"pinned by the project file {project}" in by_project.stderr



def test_edited_fields_of_a_d_without_evidence_are_refused(store_url: str, case_path: Path) -> None:
    """No chained row hashes an unused D's fields, but its `when` conditions would still steer the case."""
    from evidence_db.session import open_session
    from evidence_db.store import ingest_records
    from tests.evidence_db.attacks import GPU, record

    build_store(store_url, case_path)
    with open_session(store_url, write=True) as session:
        ingest_records(session=session, records=[record("gpu-proof", "kernel.mm.contract", deployment=GPU)])
    with raw_sql(store_url) as conn:
        conn.execute(text("DELETE FROM subjects WHERE evidence_seq = 4"))
        conn.execute(text("DELETE FROM evidence_items WHERE seq = 4"))
        conn.execute(text("UPDATE chain_heads SET seq = 3, chain_digest = "
                          "(SELECT chain_digest FROM reviews WHERE seq = 3)"))  # a consistent truncation
        conn.execute(text("UPDATE deployments SET fields = :f WHERE digest = :d"),
                     {"f": json.dumps({"device": "cuda:0", "torch": "9.9"}), "d": GPU.digest})
    assert invoke("audit", "verify", "--db", store_url).exit_code == 0  # the chain alone cannot tell
    result = invoke("status", "--db", store_url, "--case", case_path, "--config", GPU.digest)
    assert result.exit_code == 1 and "do not hash to its digest" in result.stderr
