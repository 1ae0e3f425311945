"""`bitcase audit diff` on the ledger project: a store against its own export, reviews, two D's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.ownproject.conftest import MAPPING, invoke

INGEST = ["--db", "bitcase.db", "--case", "case.toml", *MAPPING]


def _when_case(project: Path) -> None:
    """A node that applies only on another platform, with evidence of its own (dropped from exports)."""
    text = (project / "case.toml").read_text(encoding="utf-8")
    text = text.replace('supported_by = ["ledger.balances", "ledger.rounding", "trusted.decimal"]',
                        'supported_by = ["ledger.balances", "ledger.rounding", "trusted.decimal", "ledger.windows"]')
    text += ('\n[[node]]\nid = "ledger.windows"\nkind = "solution"\ntext = "Tests on Windows."\n'
             'requires = ["test_result"]\nwhen = { platform = "windows-x86_64" }\n')
    (project / "case.toml").write_text(text, encoding="utf-8")


def _diff(a: str, b: str, *args: str):
    return invoke("audit", "diff", a, b, "--case", "case.toml", *args)


def test_a_store_diffed_against_its_own_export_is_identical(project: Path) -> None:
    _when_case(project)
    mapping = [*INGEST, "--obligation", "*check_parsing.*=ledger.windows", "--deployment", "deployment.json"]
    assert invoke("ingest", "reports/xunit1.xml", *mapping).exit_code == 0
    other = json.loads((project / "deployment.json").read_text())
    other["fields"]["python"] = "3.13"
    (project / "d313.json").write_text(json.dumps(other))
    assert invoke("ingest", "reports/xunit2.xml", *INGEST, "--deployment", "d313.json").exit_code == 0
    exported = invoke("export", "--db", "bitcase.db", "--case", "case.toml", "--out", "export.json")
    assert exported.exit_code == 0, exported.stderr
    result = _diff("bitcase.db", "export.json")
    assert result.exit_code == 0, result.stdout
    assert "identical" in result.stderr
    assert _diff("export.json", "bitcase.db").exit_code == 0


def test_added_and_changed_reviews_show_who_decided_what_and_why(project: Path) -> None:
    assert invoke("ingest", "reports/xunit2.xml", *INGEST, "--deployment", "deployment.json").exit_code == 0
    shutil.copyfile("bitcase.db", "before.db")
    added = invoke("review", "add", "trusted.decimal", "--decision", "needs-work", "--by", "ana", "--rationale",
                   "check the rounding mode", "--db", "bitcase.db", "--case", "case.toml")
    assert added.exit_code == 0, added.stderr
    shutil.copyfile("bitcase.db", "middle.db")
    first = _diff("before.db", "middle.db")
    assert first.exit_code == 1
    assert "review+\t" in first.stdout and "trusted.decimal\tneeds-work by ana on " in first.stdout
    assert first.stdout.rstrip().endswith("check the rounding mode")
    assert invoke("review", "add", "trusted.decimal", "--decision", "accept", "--by", "bo", "--rationale",
                  "ROUND_HALF_EVEN is set explicitly", "--db", "bitcase.db", "--case", "case.toml").exit_code == 0
    second = _diff("middle.db", "bitcase.db", "--json")
    [change] = json.loads(second.stdout)["reviews"]
    assert change["change"] == "changed" and change["node"] == "trusted.decimal"
    assert (change["before"]["decision"], change["before"]["reviewer"]) == ("needs-work", "ana")
    assert change["after"] | {"created_at": None} == {"state": "accepted", "decision": "accept", "reviewer": "bo",
                                                       "rationale": "ROUND_HALF_EVEN is set explicitly",
                                                       "created_at": None}


def test_a_diff_across_two_deployments_compares_node_by_node(project: Path) -> None:
    shutil.copyfile("bitcase.db", "d313.db")  # still empty
    assert invoke("ingest", "reports/xunit2.xml", *INGEST, "--deployment", "deployment.json").exit_code == 0
    other = json.loads((project / "deployment.json").read_text())
    other["fields"]["python"] = "3.13"
    (project / "d313.json").write_text(json.dumps(other))
    # d313.db: the same tests under another D, with the parsing test mapped (and failing) as well
    assert invoke("ingest", "reports/xunit1.xml", "--db", "d313.db", "--case", "case.toml", *MAPPING,
                  "--obligation", "*check_parsing.*=ledger.rounding", "--deployment", "d313.json").exit_code == 0
    result = _diff("bitcase.db", "d313.db", "--json")
    diff = json.loads(result.stdout)
    changed = {c["node"]: (c["before"], c["after"]) for c in diff["status_changes"]}
    assert changed == {"ledger.rounding": ("tested", "failed"), "S.parts": ("supported-under-trust", "defeated"),
                       "G.ledger": ("supported-under-trust", "defeated")}
    assert all("→" in c["deployment"] for c in diff["status_changes"])
    assert "C.python" not in changed
