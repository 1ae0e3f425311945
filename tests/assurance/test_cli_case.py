"""`bitcase case validate` and `bitcase case obligations`."""

import json

from typer.testing import CliRunner

from assurance.cli.main import app
from assurance.scope import BUNDLED_CASE
from tests.assurance.conftest import MINI_CASE

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_validate_a_valid_case_exits_0():
    result = invoke("case", "validate", BUNDLED_CASE)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"{BUNDLED_CASE}: valid"


def test_validate_lists_every_problem_and_exits_2(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(MINI_CASE.replace('"suite.batch", "trusted', '"suite:batch", "trusted')
                    .replace('requires = ["kernel_proof"]', 'requires = ["proof"]'))
    result = invoke("case", "validate", path)
    assert result.exit_code == 2
    assert "node S.split: supported_by names unknown node 'suite:batch'" in result.stderr
    assert "[unknown-category]" in result.stderr and "kernel_proof" in result.stderr
    assert "[top-not-goal]" in result.stderr  # suite.batch is no longer reachable
    assert "3 problem(s)" in result.stderr and result.stdout == ""


def test_validate_json(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(MINI_CASE.replace('top = "G.top"', 'top = "C.d"'))
    result = invoke("case", "validate", path, "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["valid"] is False
    assert {i["code"] for i in doc["issues"]} == {"top-not-goal"}
    assert set(doc["issues"][0]) == {"code", "file", "line", "node", "message", "fix"}


def test_validate_reports_toml_errors_and_missing_files(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("[case\n")
    assert invoke("case", "validate", path).exit_code == 2
    assert "toml-syntax" in invoke("case", "validate", path).stderr
    assert invoke("case", "validate", tmp_path / "none.toml").exit_code == 2


def test_validate_with_an_unknown_plan_preset_exits_2():
    result = invoke("case", "validate", BUNDLED_CASE, "--plan", "no-such-preset")
    assert result.exit_code == 2 and "no-such-preset" in result.stderr


def test_obligations_lists_ids_with_their_policy():
    result = invoke("case", "obligations", BUNDLED_CASE, "--json")
    assert result.exit_code == 0, result.output
    rows = {r["obligation"]: r for r in json.loads(result.stdout)}
    assert rows["runtime.plan"]["requires"] == ["runtime_config_check"]
    assert rows["trusted.triton-compiler"]["trusted"] is True
    text = invoke("case", "obligations", BUNDLED_CASE)
    assert any(line.startswith("suite.batch\ttest_result\tsubjects: code:") for line in text.stdout.splitlines())
