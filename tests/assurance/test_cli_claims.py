"""`bitcase init|status|check|trusted-base|whatif|export` on a real SQLite store."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app
from assurance.reviews import trust_digest
from assurance.case_loader import parse_case
from evidence_db.bundle import Deployment, EvidenceRecord, Producer
from tests.assurance.conftest import MINI_CASE

runner = CliRunner()
PRODUCER = Producer("bitcase test", "1", "pytest", "host", "cpu", "2026-10-31T00:00:00Z", "2026-10-31T00:00:01Z")
CPU = Deployment({"device": "cpu", "torch": "2.13.0"})
GPU = Deployment({"device": "cuda:0", "torch": "2.13.0"})


def invoke(*args, **kw):
    return runner.invoke(app, [str(a) for a in args], **kw)


def record(item, obligation, category="kernel_proof", status="pass", deployment=CPU, details=None):
    return EvidenceRecord(id=item, category=category, obligation=obligation, status=status, summary=f"{item} {status}",
                          producer=PRODUCER, deployment=deployment, details=details or {})


def ingest(db, records):
    from evidence_db.session import open_session
    from evidence_db.store import ingest_records

    with open_session(str(db), write=True) as session:
        ingest_records(session=session, records=records)


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory):
    from evidence_db.migrate import ensure_store

    path = tmp_path_factory.mktemp("store") / "empty.db"
    ensure_store(f"sqlite:///{path}")
    return path


@pytest.fixture
def store(empty_store, tmp_path):
    path = tmp_path / "bitcase.db"
    shutil.copyfile(empty_store, path)
    ingest(path, [record("proof-mm", "kernel.mm.contract"),
                  record("batch-1", "suite.batch", "test_result")])
    return path


def pinned(case_text, digest):
    """The case with its gate pinned to ``digest`` in the [case] table."""
    return case_text.replace('top = "G.top"', f'top = "G.top"\ndeployment = "{digest}"', 1)


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("BITCASE_HOME", str(tmp_path / "home"))  # no project file unless a test writes one
    return tmp_path / "home"


@pytest.fixture
def case_file(tmp_path):
    path = tmp_path / "mini.toml"
    path.write_text(pinned(MINI_CASE, CPU.digest))
    return path


def test_status_json_under_the_pinned_deployment(store, case_file):
    result = invoke("status", "--db", store, "--case", case_file, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["deployment_digest"] == CPU.digest and doc["tops"] == [{"id": "G.top", "status": "supported-under-trust"}]
    statuses = {n["id"]: n["status"] for n in doc["nodes"]}
    assert statuses["kernel.mm.contract"] == "verified" and statuses["suite.batch"] == "tested"
    assert f"pinned by the case ({case_file}, [case] deployment)" in result.stderr
    assert doc["judged"]["deployment"] == {"digest": CPU.digest,
                                           "chosen_because": f"pinned by the case ({case_file}, [case] deployment)"}
    assert doc["judged"]["chain"]["intact"] is True and doc["judged"]["chain"]["head"]["seq"] == 2
    assert "hash chain intact: 2 rows" in result.stderr


def test_status_tree_for_people(store, case_file):
    result = invoke("status", "--db", store, "--case", case_file)
    assert result.exit_code == 0, result.output
    assert "[supported-under-trust] G.top" in result.stdout and "[verified] kernel.mm.contract" in result.stdout
    assert "nodes:" in result.stderr


def test_config_selects_a_deployment_by_prefix(store, case_file):
    ingest(store, [record("proof-gpu", "kernel.mm.contract", deployment=GPU)])
    latest = invoke("status", "--db", store, "--case", case_file, "--json", "--config", "latest")
    assert json.loads(latest.stdout)["deployment_digest"] == GPU.digest
    assert "--config: `latest`, the latest in the store" in latest.stderr
    chosen = invoke("status", "--db", store, "--case", case_file, "--json", "--config", CPU.digest[7:19])
    assert json.loads(chosen.stdout)["deployment_digest"] == CPU.digest
    unknown = invoke("status", "--db", store, "--case", case_file, "--config", "ffffffff")
    assert unknown.exit_code == 2 and "no deployment configuration matches" in unknown.stderr


def test_status_exits_1_when_the_claim_is_not_supported(store, case_file):
    ingest(store, [record("batch-2", "suite.batch", "test_result", "fail")])
    result = invoke("status", "--db", store, "--case", case_file)
    assert result.exit_code == 1 and "[defeated] G.top" in result.stdout
    assert "counterexample batch-2" in result.stdout


def test_check_gates_on_reviews_and_failures(store, case_file):
    result = invoke("check", "--db", store, "--case", case_file)
    assert result.exit_code == 1 and result.stdout.splitlines() == [
        "trusted.compiler\ttrusted-unreviewed\ttrusted item review is unreviewed"]
    waiving = invoke("check", "--db", store, "--case", case_file, "--accept-unreviewed", "--json")
    assert waiving.exit_code == 0, waiving.output
    assert json.loads(waiving.stdout)["waived"] == [
        {"goal": "G.top", "node": "trusted.compiler", "status": "trusted-unreviewed",
         "message": "trusted item review is unreviewed"}]
    assert "waived by --accept-unreviewed: trusted.compiler" in invoke(
        "check", "--db", store, "--case", case_file, "--accept-unreviewed").stderr
    ingest(store, [record("batch-2", "suite.batch", "test_result", "fail", details={"first_mismatch": 17})])
    failed = invoke("check", "--db", store, "--case", case_file, "--accept-unreviewed", "--json")
    doc = json.loads(failed.stdout)
    assert failed.exit_code == 1 and doc["passed"] is False
    assert [(f["node"], f["status"]) for f in doc["findings"]] == [("G.top", "defeated"), ("suite.batch", "failed")]


def test_check_passes_with_an_accepted_review(store, case_file):
    from evidence_db.reviews import add_review
    from evidence_db.session import open_session

    node = parse_case(MINI_CASE).node("trusted.compiler")
    with open_session(str(store), write=True) as session:
        add_review(session=session, target="trusted.compiler", target_digest=trust_digest(node), decision="accept",
                   reviewer="auditor", rationale="pinned compiler", expires=None)
    result = invoke("check", "--db", store, "--case", case_file)
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stderr


def test_check_rejects_an_unknown_goal(store, case_file):
    result = invoke("check", "--db", store, "--case", case_file, "--goal", "G.nope")
    assert result.exit_code == 2 and "G.top" in result.stderr


def test_trusted_base_and_whatif(store, case_file):
    doc = json.loads(invoke("trusted-base", "--db", store, "--case", case_file, "--json").stdout)
    base = doc["items"]
    assert [(r["id"], r["review"]["state"]) for r in base] == [("trusted.compiler", "unreviewed")]
    assert base[0]["review"]["current_digest"].startswith("sha256:")
    assert doc["judged"]["deployment"]["digest"] == CPU.digest and doc["judged"]["chain"]["intact"]
    result = invoke("whatif", "--db", store, "--case", case_file, "--distrust", "trusted.compiler,suite.batch")
    assert result.exit_code == 1, result.output  # the top claim loses support: a finding, as `check` reports
    assert result.stdout.splitlines() == ["G.top\tsupported-under-trust -> incomplete",
                                          "S.split\tsupported-under-trust -> incomplete"]
    as_json = json.loads(invoke("whatif", "--db", store, "--case", case_file, "--distrust", "trusted.compiler",
                                "--json").stdout)
    assert as_json["top_loses_support"] is True and as_json["judged"]["deployment"]["digest"] == CPU.digest
    nothing_lost = invoke("whatif", "--db", store, "--case", case_file, "--distrust", "C.d")
    assert nothing_lost.exit_code == 2  # a context is not a solution
    bad = invoke("whatif", "--db", store, "--case", case_file, "--distrust", "trusted.nope")
    assert bad.exit_code == 2 and "trusted.nope" in bad.stderr


def test_export_sarif_to_a_file(store, case_file, tmp_path):
    out = tmp_path / "out" / "bitcase.sarif"
    result = invoke("export", "--db", store, "--case", case_file, "--format", "sarif", "--out", out)
    assert result.exit_code == 0, result.output
    log = json.loads(out.read_text())
    assert log["version"] == "2.1.0" and [r["ruleId"] for r in log["runs"][0]["results"]] == ["BC004"]
    as_json = invoke("export", "--db", store, "--case", case_file)
    assert json.loads(as_json.stdout)["schema"] == "bitcase.status/v1"


def test_read_commands_on_a_missing_store_exit_2(tmp_path, case_file):
    result = invoke("status", "--db", tmp_path / "none.db", "--case", case_file)
    assert result.exit_code == 2 and "no evidence store" in result.stderr


def test_an_empty_store_falls_back_to_the_engines_current_configuration(empty_store, tmp_path, monkeypatch):
    monkeypatch.setenv("BITCASE_HOME", str(tmp_path / "home"))  # no case copy: the bundled case
    path = tmp_path / "e.db"
    shutil.copyfile(empty_store, path)
    result = invoke("status", "--db", path, "--json")  # the bundled case, expanded over D's recorded plan
    assert result.exit_code == 1, result.output  # nothing discharged: the claim is not supported
    assert "the engine's current configuration" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["case"]["plan"].startswith("plan tiny")
    kernels = [n for n in doc["nodes"] if n["generated_by"]]
    assert kernels and {n["status"] for n in kernels} == {"missing"}
    statuses = {n["id"]: n["status"] for n in doc["nodes"]}
    assert statuses["trusted.cpu-path"] == "trusted-unreviewed" and statuses["trusted.gpu-execution"] == "not-applicable"


def test_without_any_deployment_status_exits_2(empty_store, tmp_path, case_file, monkeypatch):
    import assurance.scope

    monkeypatch.setattr(assurance.scope, "engine_deployment", lambda: (None, "no engine here"))
    path = tmp_path / "e.db"
    shutil.copyfile(empty_store, path)
    result = invoke("status", "--db", path, "--case", case_file, "--config", "latest")
    assert result.exit_code == 2 and "no deployment configuration" in result.stderr
    assert "no engine here" in result.stderr


def test_an_invalid_case_exits_2(store, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(pinned(MINI_CASE, CPU.digest).replace('top = "G.top"', 'top = "G.nope"'))
    result = invoke("status", "--db", store, "--case", bad)
    assert result.exit_code == 2 and "G.nope" in result.stderr


def test_init_creates_the_store_and_copies_the_case(tmp_path, monkeypatch):
    monkeypatch.setenv("BITCASE_HOME", str(tmp_path / "home"))
    db = tmp_path / "new.db"
    result = invoke("init", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["case_copied"] is True and (tmp_path / "home" / "case.toml").is_file() and db.is_file()
    assert 'deployment = "current"' in (tmp_path / "home" / "project.toml").read_text()  # the copy's gate D
    again = json.loads(invoke("init", "--db", db, "--json").stdout)
    assert again["case_copied"] is False
