"""Structural validation: each rule, with the fix it proposes."""

import pytest

from assurance.validate import subject_problem, validate_case
from tests.assurance.conftest import MINI_CASE, case_from


def issues_of(text: str):
    return validate_case(case_from(text))


def codes_of(text: str) -> list[str]:
    return sorted(i.code for i in issues_of(text))


def test_mini_case_is_valid(mini_case):
    assert validate_case(mini_case) == []


def test_unknown_id_suggests_a_close_one():
    issues = issues_of(MINI_CASE.replace('"suite.batch", "trusted', '"suite.btch", "trusted'))
    unknown = [i for i in issues if i.code == "unknown-id"]
    assert unknown and unknown[0].node == "S.split" and "suite.batch" in unknown[0].fix


def test_cycle_is_reported_with_its_path():
    text = MINI_CASE.replace('supported_by = ["kernel.mm.contract", "suite.batch", "trusted.compiler"]',
                             'supported_by = ["G.top", "kernel.mm.contract", "suite.batch", "trusted.compiler"]')
    issues = issues_of(text)
    cycle = [i for i in issues if i.code == "cycle"]
    assert cycle and "G.top" in cycle[0].message and "S.split" in cycle[0].message


def test_a_top_node_that_is_not_a_goal():
    text = MINI_CASE + '\n[[node]]\nid = "Sn.orphan"\nkind = "solution"\ntext = "x"\nany_of = ["test_result"]\n'
    issues = [i for i in issues_of(text) if i.code == "top-not-goal"]
    assert [i.node for i in issues] == ["Sn.orphan"]


def test_case_top_must_be_a_goal_and_a_root():
    assert "top-not-goal" in codes_of(MINI_CASE.replace('top = "G.top"', 'top = "S.split"'))
    assert "unknown-id" in codes_of(MINI_CASE.replace('top = "G.top"', 'top = "G.nope"'))


def test_goal_neither_developed_nor_marked_undeveloped():
    text = MINI_CASE + '\n[[node]]\nid = "G.sub"\nkind = "goal"\ntext = "x"\n'
    text = text.replace('supported_by = ["S.split"]', 'supported_by = ["S.split", "G.sub"]')
    issues = [i for i in issues_of(text) if i.code == "undeveloped"]
    assert [i.node for i in issues] == ["G.sub"] and "undeveloped = true" in issues[0].fix
    assert codes_of(text.replace('id = "G.sub"\nkind = "goal"', 'id = "G.sub"\nkind = "goal"\nundeveloped = true')) == []


def test_undeveloped_goal_with_support_is_contradictory():
    assert "undeveloped" in codes_of(MINI_CASE.replace('kind = "goal"', 'kind = "goal"\nundeveloped = true'))


def test_solution_without_policy():
    issues = [i for i in issues_of(MINI_CASE.replace('requires = ["kernel_proof"]\n', '')) if i.code == "no-policy"]
    assert [i.node for i in issues] == ["kernel.mm.contract"] and "requires" in issues[0].fix


def test_unknown_category_suggests_the_close_one():
    issues = [i for i in issues_of(MINI_CASE.replace('["kernel_proof"]', '["kernel_proofs"]'))
              if i.code == "unknown-category"]
    assert issues and "'kernel_proof'" in issues[0].fix


@pytest.mark.parametrize("bad", ["code:x", "a b", "node", "9lives", 'x"y'])
def test_dot_unsafe_ids(bad):
    text = MINI_CASE.replace('"C.d"', f"'{bad}'")
    issues = [i for i in issues_of(text) if i.code == "dot-unsafe-id"]
    assert issues and issues[0].node == bad


def test_dot_unsafe_obligation_ids():
    text = MINI_CASE.replace('requires = ["kernel_proof"]', 'requires = ["kernel_proof"]\nobligations = ["k:1"]')
    assert "dot-unsafe-id" in codes_of(text)


def test_duplicate_ids_and_obligations():
    text = MINI_CASE.replace('any_of = ["test_result", "runtime_config_check"]',
                             'any_of = ["test_result"]\nobligations = ["kernel.mm.contract"]')
    assert codes_of(text) == ["duplicate-obligation"]
    dup = MINI_CASE + '\n[[node]]\nid = "C.d"\nkind = "context"\ntext = "again"\n'
    assert "duplicate-id" in codes_of(dup)


def test_edge_kinds():
    assert "bad-edge" in codes_of(MINI_CASE.replace('in_context_of = ["C.d"]', 'in_context_of = ["S.split"]'))
    assert "bad-edge" in codes_of(MINI_CASE.replace('supported_by = ["S.split"]', 'supported_by = ["S.split", "C.d"]'))


def test_trusted_items_need_a_rationale_and_own_the_trusted_category():
    assert "trusted-rationale" in codes_of(MINI_CASE.replace('rationale = "Pinned versions are part of D"', ''))
    text = MINI_CASE.replace('any_of = ["test_result", "runtime_config_check"]', 'any_of = ["trusted_contract_translation"]')
    assert codes_of(text) == ["trusted-category"]


def test_subject_globs():
    assert subject_problem("deployment") is None and subject_problem("model") is None
    assert subject_problem("code:engine/**/*.py") is None
    for bad in ("code:../x.py", "code:/abs.py", "file:x.py", "code:"):
        assert subject_problem(bad) is not None
    assert "bad-subject" in codes_of(MINI_CASE.replace('"code:kernels/*.py"', '"code:../secrets"'))


def test_generator_parent_must_exist():
    text = MINI_CASE + """
[[generate]]
id = "g"
parent = "G.nope"
[generate.node]
id = "kernel.{key}.c"
kind = "solution"
text = "k"
requires = ["kernel_proof"]
"""
    issues = [i for i in issues_of(text) if i.code == "unknown-id"]
    assert issues and issues[0].node == "g"
