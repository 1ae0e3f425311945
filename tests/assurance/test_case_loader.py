"""Reading case TOML: shapes, defaults, line numbers and every file-level error."""

import pytest

from assurance.case_loader import load_case, parse_case
from assurance.issues import CaseError
from tests.assurance.conftest import MINI_CASE, case_from


def codes(exc: CaseError) -> list[str]:
    return [i.code for i in exc.issues]


def test_parses_nodes_edges_and_policy(mini_case):
    assert mini_case.id == "mini" and mini_case.top == "G.top"
    top = mini_case.node("G.top")
    assert top.supported_by == ("S.split",) and top.in_context_of == ("C.d",) and top.source == "§1"
    proof = mini_case.node("kernel.mm.contract")
    assert proof.requires == ("kernel_proof",) and proof.subjects == ("code:kernels/*.py",)
    assert proof.obligations == ("kernel.mm.contract",)  # defaults to the solution's id
    trusted = mini_case.node("trusted.compiler")
    assert trusted.is_trusted and trusted.rationale


def test_records_the_line_of_each_node_table(mini_case):
    lines = MINI_CASE.splitlines()
    node = mini_case.node("suite.batch")
    assert lines[node.line - 1].strip() == "[[node]]"
    assert lines[node.line].strip() == 'id = "suite.batch"'


def test_toml_syntax_error_names_the_line():
    with pytest.raises(CaseError) as info:
        parse_case('[case]\nid = "x"\ntop = \n')
    assert codes(info.value) == ["toml-syntax"] and info.value.issues[0].line == 3


def test_unknown_key_suggests_the_close_one():
    with pytest.raises(CaseError) as info:
        case_from(MINI_CASE.replace('requires = ["kernel_proof"]', 'require = ["kernel_proof"]'))
    issue = info.value.issues[0]
    assert issue.code == "unknown-key" and issue.node == "kernel.mm.contract" and "requires" in issue.fix


def test_wrong_types_and_missing_keys_are_all_reported():
    text = """
    [case]
    id = "x"
    [[node]]
    id = "G"
    kind = "goal"
    supported_by = 3
    undeveloped = "yes"
    """
    with pytest.raises(CaseError) as info:
        case_from(text)
    assert sorted(codes(info.value)) == ["missing-key", "missing-key", "type", "type"]  # top, text


def test_solution_only_keys_on_a_goal_are_rejected():
    with pytest.raises(CaseError) as info:
        case_from(MINI_CASE.replace('text = "Argue over the parts"', 'text = "Argue"\nrequires = ["test_result"]'))
    assert codes(info.value) == ["solution-only-key"]


def test_conditions_and_max_age_parse():
    case = case_from(MINI_CASE.replace('rationale = "Pinned versions are part of D"',
                                       'rationale = "r"\nwhen = { device = ["cuda", "cuda:0"] }\n'
                                       'when_not = { dtype = "bfloat16", accelerator.device_type = "cpu" }\n'
                                       'max_age_days = 7'))
    node = case.node("trusted.compiler")
    assert node.when == (("device", ("cuda", "cuda:0")),)
    assert node.when_not == (("accelerator.device_type", ("cpu",)), ("dtype", ("bfloat16",)))
    assert node.max_age_days == 7


def test_bad_max_age_is_reported():
    with pytest.raises(CaseError) as info:
        case_from(MINI_CASE.replace('subjects = ["code:kernels/*.py"]', 'max_age_days = 0'))
    assert codes(info.value) == ["type"]


def test_missing_file_is_a_case_error(tmp_path):
    with pytest.raises(CaseError) as info:
        load_case(tmp_path / "nope.toml")
    assert codes(info.value) == ["unreadable"]


def test_issue_format_names_file_line_node_and_fix(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(MINI_CASE.replace('kind = "context"', 'kind = "context"\nbogus = 1'))
    with pytest.raises(CaseError) as info:
        load_case(path)
    line = info.value.issues[0].format()
    assert line.startswith(f"{path}:") and "node C.d:" in line and "fix:" in line
