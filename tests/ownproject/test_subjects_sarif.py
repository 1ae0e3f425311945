"""The user's own code as subjects (the case's root), and SARIF that points into their repository."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evidence_db.bundle import Deployment, EvidenceRecord, Producer, Subject, write_bundle
from evidence_db.canonical import file_digest
from tests.ownproject.conftest import invoke
from tests.sarif_schema import official_validator

OFFICIAL = official_validator()
PRODUCER = Producer("ledger checks", "1", "pytest", "ci", "cpu", "2026-11-01T00:00:00Z", "2026-11-01T00:00:01Z")
FIELDS = json.loads((Path(__file__).parent.parent / "fixtures" / "ledger" / "deployment.json").read_text())["fields"]


def _bundle(project: Path, name: str = "ledger.jsonl") -> Path:
    """Passing evidence for both solutions, naming the project's files with their digests now."""
    records = [EvidenceRecord(id=f"ledger-{obligation}", category="test_result", obligation=obligation, status="pass",
                              summary="ok", producer=PRODUCER, deployment=Deployment(FIELDS),
                              subjects=(Subject(f"code:tinyledger/{file}", file_digest(project / "tinyledger" / file)),))
               for obligation, file in (("ledger.balances", "ledger.py"), ("ledger.rounding", "money.py"))]
    path = project / name
    write_bundle(path, records)
    return path


def _statuses(*args: str) -> dict[str, str]:
    result = invoke("status", "--db", "bitcase.db", "--json", *args)
    assert result.exit_code in (0, 1), result.stderr
    return {n["id"]: n["status"] for n in json.loads(result.stdout)["nodes"]}


def test_code_subjects_resolve_against_the_case_files_directory(project: Path) -> None:
    assert invoke("ingest", _bundle(project).name, "--db", "bitcase.db").exit_code == 0
    assert _statuses("--case", "case.toml")["ledger.balances"] == "tested"
    (project / "tinyledger" / "ledger.py").write_text("# edited\n", encoding="utf-8")
    statuses = _statuses("--case", "case.toml")
    assert (statuses["ledger.balances"], statuses["ledger.rounding"]) == ("stale", "tested")


def test_root_in_the_case_and_root_on_the_command_line(project: Path, tmp_path: Path) -> None:
    assert invoke("ingest", _bundle(project).name, "--db", "bitcase.db").exit_code == 0
    (project / "assurance").mkdir()
    text = (project / "case.toml").read_text(encoding="utf-8")
    (project / "assurance" / "case.toml").write_text(text.replace('top = "G.ledger"', 'top = "G.ledger"\nroot = ".."'))
    assert _statuses("--case", "assurance/case.toml")["ledger.rounding"] == "tested"
    elsewhere = tmp_path / "other-checkout"
    shutil.copytree(project / "tinyledger", elsewhere / "tinyledger")
    (elsewhere / "tinyledger" / "money.py").write_text("# another version\n", encoding="utf-8")
    statuses = _statuses("--case", "assurance/case.toml", "--root", str(elsewhere))
    assert (statuses["ledger.balances"], statuses["ledger.rounding"]) == ("tested", "stale")
    (project / "assurance" / "case.toml").write_text(text.replace('top = "G.ledger"', 'top = "G.ledger"\nroot = "nope"'))
    bad = invoke("status", "--db", "bitcase.db", "--case", "assurance/case.toml")
    assert bad.exit_code == 2 and "is not a directory" in bad.stderr and "--root DIR" in bad.stderr


def _sarif(*args: str) -> dict:
    result = invoke("export", "--format", "sarif", "--db", "bitcase.db", *args)
    assert result.exit_code == 0, result.stderr
    log = json.loads(result.stdout)
    if OFFICIAL is not None:
        OFFICIAL.validate(log)
    return log


@pytest.mark.parametrize("report, line", [("xunit1.xml", 4), ("xunit2.xml", None)])
def test_sarif_points_at_the_failing_tests_source_and_validates(project: Path, report: str, line: int | None) -> None:
    if report == "xunit2.xml":  # the passing xunit2 report, with the failing test added as xunit2 writes it
        xml = (project / "reports" / "xunit2.xml").read_text(encoding="utf-8").replace(
            "</testsuite>", '<testcase classname="checks.check_parsing" name="test_thousands_separator" time="0.0">'
                            '<failure message="InvalidOperation">tb</failure></testcase></testsuite>')
        (project / "reports" / "xunit2.xml").write_text(xml, encoding="utf-8")
    ingest = invoke("ingest", f"reports/{report}", "--db", "bitcase.db", "--case", "case.toml", "--deployment",
                    "deployment.json", "--obligation", "*check_parsing.*=ledger.rounding",
                    "--default-obligation", "ledger.balances")
    assert ingest.exit_code == 0, ingest.stderr
    log = _sarif("--case", "case.toml")
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["PROJECTROOT"]["uri"] == project.resolve().as_uri() + "/"
    [failed] = [r for r in run["results"] if r["ruleId"] == "BC001"]
    location = failed["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "checks/check_parsing.py", "uriBaseId": "PROJECTROOT"}
    assert location.get("region", {}).get("startLine") == line
    assert (project / "checks" / "check_parsing.py").read_text().splitlines()[3].startswith("def test_thousands")
    case_location = failed["relatedLocations"][0]["physicalLocation"]
    assert case_location["artifactLocation"] == {"uri": "case.toml", "uriBaseId": "PROJECTROOT"}
    assert case_location["region"]["startLine"] > 1
    others = [r for r in run["results"] if r["ruleId"] != "BC001"]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in others} == {"case.toml"}


def test_the_bundled_case_keeps_bitcases_tree_and_exports_relative_uris(project: Path) -> None:
    assert invoke("ingest", _bundle(project).name, "--db", "bitcase.db").exit_code == 0
    log = _sarif()
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]}
    assert uris == {"assurance/cases/determinism.toml"}
    root = Path(log["runs"][0]["originalUriBaseIds"]["PROJECTROOT"]["uri"].removeprefix("file://"))
    assert (root / "assurance" / "cases" / "determinism.toml").is_file()

