"""Node generators: one obligation per sealed-plan entry, no case edit for a new kernel."""

import pytest

from assurance.generators import PlanItem, expand_case
from assurance.issues import CaseError
from assurance.validate import validate_case
from tests.assurance.conftest import case_from

GENERATED = """
[case]
id = "gen"
top = "G.kernels"

[[node]]
id = "G.kernels"
kind = "goal"
text = "Every plan entry is proved"

[[generate]]
id = "attention"
parent = "G.kernels"
match = ["*attention*"]
[generate.node]
id = "kernel.{key}.contract"
kind = "solution"
text = "{kernel} at {key} (causal)"
requires = ["kernel_proof"]
subjects = ["code:{source_file}"]

[[generate]]
id = "others"
parent = "G.kernels"
exclude = ["*attention*"]
[generate.node]
id = "kernel.{key}.contract"
kind = "solution"
text = "{kernel} at {key}"
requires = ["kernel_proof"]
subjects = ["code:{source_file}"]
"""

PLAN = (PlanItem("matmul", "matmul.n64_k64", "kernels/matmul.py", "sha256:1"),
        PlanItem("paged_attention", "paged_attention.d16", "kernels/attention.py", "sha256:2"))


def test_expansion_makes_one_solution_per_entry():
    case = expand_case(case_from(GENERATED), PLAN, label="test plan")
    assert validate_case(case) == []
    assert case.node("G.kernels").supported_by == ("kernel.matmul.n64_k64.contract", "kernel.paged_attention.d16.contract")
    attn = case.node("kernel.paged_attention.d16.contract")
    assert attn.text == "paged_attention at paged_attention.d16 (causal)" and attn.generated_by == "attention"
    assert attn.subjects == ("code:kernels/attention.py",) and attn.obligations == ("kernel.paged_attention.d16.contract",)
    assert case.node("kernel.matmul.n64_k64.contract").generated_by == "others"
    assert case.is_expanded and case.plan_label == "test plan"


def test_a_new_kernel_gets_its_obligation_without_editing_the_case():
    plan = PLAN + (PlanItem("rope", "rope.d16", "kernels/rope.py", "sha256:3"),)
    case = expand_case(case_from(GENERATED), plan)
    assert case.has_node("kernel.rope.d16.contract")


def test_unexpanded_case_validates_generators_on_a_sample_entry():
    assert validate_case(case_from(GENERATED)) == []


def test_unknown_placeholder_is_a_case_error():
    with pytest.raises(CaseError) as info:
        expand_case(case_from(GENERATED.replace("{kernel} at {key}\"", "{kernal} at {key}\"")), PLAN)
    issue = info.value.issues[0]
    assert issue.code == "generator-template" and issue.node == "others" and "{key}" in issue.fix


def test_generated_ids_are_validated_like_hand_written_ones():
    bad = (PlanItem("matmul", "matmul:n64", "kernels/matmul.py", "sha256:1"),)
    issues = validate_case(expand_case(case_from(GENERATED), bad))
    assert [i.code for i in issues] == ["dot-unsafe-id", "dot-unsafe-id"]  # node id and obligation id
