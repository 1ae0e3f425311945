"""The examples in the assurance modules' docstrings run and hold."""

import doctest
import importlib

import pytest

MODULES = ("assurance.ids", "assurance.graph", "assurance.subjects", "assurance.validate",
           "assurance.evidence_sets", "assurance.solution_status", "assurance.obligation_targets",
           "evidence_db.junit_revisions")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
