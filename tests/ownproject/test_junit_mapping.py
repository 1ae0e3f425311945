"""JUnit mapping mistakes are recoverable: checked targets, re-mapping that supersedes, xunit2."""

from __future__ import annotations

import json
from pathlib import Path

from evidence_db.session import open_session
from evidence_db.store import load_evidence
from tests.ownproject.conftest import MAPPING, invoke

COMMON = ["--db", "bitcase.db", "--case", "case.toml", "--deployment", "deployment.json"]


def _items(project: Path) -> dict[str, tuple[str, dict]]:
    with open_session(str(project / "bitcase.db")) as session:
        return {e.item_id: (e.obligation, e.details) for e in load_evidence(session=session, with_details=True)}


def _status(*extra: str) -> dict:
    result = invoke("status", "--db", "bitcase.db", "--case", "case.toml", "--json", *extra)
    assert result.exit_code in (0, 1), result.stderr
    return {n["id"]: n for n in json.loads(result.stdout)["nodes"]}


def test_unknown_obligation_target_exits_2_with_close_matches_and_stores_nothing(project: Path) -> None:
    result = invoke("ingest", "reports/xunit2.xml", *COMMON, "--obligation", "*=ledger.rouding")
    assert result.exit_code == 2
    assert "--obligation '*=ledger.rouding': case tinyledger has no obligation 'ledger.rouding'" in result.stderr
    assert "did you mean 'ledger.rounding'" in result.stderr
    assert _items(project) == {}
    default = invoke("ingest", "reports/xunit2.xml", *COMMON, "--default-obligation", "ledger.balance")
    assert default.exit_code == 2 and "did you mean 'ledger.balances'" in default.stderr


def test_any_obligation_opts_out_and_status_names_the_unclaimed_obligation(project: Path) -> None:
    result = invoke("ingest", "reports/xunit2.xml", *COMMON, "--obligation", "*=ledger.rouding", "--any-obligation")
    assert result.exit_code == 0, result.stderr
    status = invoke("status", "--db", "bitcase.db", "--case", "case.toml")
    assert status.exit_code == 1
    assert "no solution of the case covers: ledger.rouding (3 item(s))" in status.stderr


def test_remapping_supersedes_the_earlier_records_and_keeps_both(project: Path) -> None:
    first = invoke("ingest", "reports/xunit2.xml", *COMMON, "--obligation", "*=ledger.balances")
    assert first.exit_code == 0, first.stderr
    assert _status()["ledger.rounding"]["status"] == "missing"
    again = invoke("ingest", "reports/xunit2.xml", *COMMON, *MAPPING)
    assert again.exit_code == 2
    assert "now differs" in again.stderr and "--remap" in again.stderr
    assert len(_items(project)) == 3  # the refused re-mapping stored nothing
    remapped = invoke("ingest", "reports/xunit2.xml", *COMMON, *MAPPING, "--remap", "--json")
    assert remapped.exit_code == 0, remapped.stderr
    summary = json.loads(remapped.stdout)
    assert (summary["added"], summary["unchanged"], len(summary["superseded"])) == (2, 1, 2)
    items = _items(project)
    assert len(items) == 5
    successors = {i: d["supersedes"] for i, (_, d) in items.items() if "supersedes" in d}
    assert sorted(successors.values()) == summary["superseded"]
    assert all("~1:" in i for i in successors)
    nodes = _status()
    assert nodes["ledger.rounding"]["status"] == "tested"
    assert nodes["ledger.balances"]["obligations"][0]["evidence_ids"] == [
        i for i in items if i.endswith("test_postings_balance")]
    # the same re-mapping again is a no-op; mapping back supersedes the re-mapped records in turn
    same = invoke("ingest", "reports/xunit2.xml", *COMMON, *MAPPING, "--remap", "--json")
    assert json.loads(same.stdout)["added"] == 0
    back = invoke("ingest", "reports/xunit2.xml", *COMMON, "--obligation", "*=ledger.balances", "--remap", "--json")
    assert json.loads(back.stdout)["added"] == 2
    assert _status()["ledger.rounding"]["status"] == "missing"
    assert len(_items(project)) == 7


def test_default_obligation_and_skip_unmapped(project: Path) -> None:
    only_one = ["--obligation", "*test_postings_balance=ledger.balances"]
    refused = invoke("ingest", "reports/xunit2.xml", *COMMON, *only_one)
    assert refused.exit_code == 2 and "--skip-unmapped" in refused.stderr
    skipped = invoke("ingest", "reports/xunit2.xml", *COMMON, *only_one, "--skip-unmapped", "--json")
    assert skipped.exit_code == 0, skipped.stderr
    assert json.loads(skipped.stdout)["files"][0]["skipped_tests"] == [
        "checks.check_ledger.test_half_to_even", "checks.check_ledger.test_negative_amounts"]
    assert "2 test case(s) without an obligation left out" in skipped.stderr
    assert sorted(o for o, _ in _items(project).values()) == ["ledger.balances"]
    both = invoke("ingest", "reports/xunit2.xml", *COMMON, "--default-obligation", "ledger.rounding", "--skip-unmapped")
    assert both.exit_code == 2


def test_default_obligation_fills_what_the_mapping_leaves(project: Path) -> None:
    result = invoke("ingest", "reports/xunit1.xml", *COMMON, "--obligation", "*test_postings_balance=ledger.balances",
                    "--default-obligation", "ledger.rounding")
    assert result.exit_code == 0, result.stderr
    assert sorted(o for o, _ in _items(project).values()) == ["ledger.balances"] + ["ledger.rounding"] * 3


def test_xunit2_reports_read_as_far_as_they_go(project: Path) -> None:
    assert invoke("ingest", "reports/xunit2.xml", *COMMON, *MAPPING).exit_code == 0
    junit = [d["junit"] for _, d in _items(project).values()]
    assert {(j["classname"], j["file"], j["line"]) for j in junit} == {("checks.check_ledger", None, None)}
    assert sorted(j["name"] for j in junit) == ["test_half_to_even", "test_negative_amounts", "test_postings_balance"]
