"""The shortcuts taken for speed give byte-identical canonical JSON and digests."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_db.bundle import CATEGORIES
from evidence_db.canonical import canonical_json, canonical_json_of_tree, canonical_json_v1
from evidence_db.chain import ContentHasher, content_digest_of_text, evidence_content_json
from evidence_db.prepare import Preparer
from tests.evidence_db.factories import OTHER_DEPLOYMENT, record



def _trees(max_abs_int: int) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none() | st.booleans() | st.integers(-max_abs_int, max_abs_int)
        | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
        max_leaves=25,
    )


json_trees = _trees(2**53 - 1)  # schema v2: RFC 8785 numbers are doubles
v1_json_trees = _trees(2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(json_trees)
def test_tree_encoder_equals_canonical_json(value: Any) -> None:
    assert canonical_json_of_tree(value) == canonical_json(value)


@settings(max_examples=200, deadline=None)
@given(v1_json_trees)
def test_v1_tree_encoder_equals_the_v1_rule(value: Any) -> None:
    assert canonical_json_of_tree(value, 1) == canonical_json_v1(value)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(CATEGORIES), st.sampled_from(['{"digest":"a","fields":{}}', '{"digest":"b","fields":{"x":1}}']),
       st.text(max_size=20), json_trees)
def test_content_hasher_equals_hashing_the_whole_text(category: str, deployment: str, summary: str,
                                                       details: Any) -> None:
    parts: dict[str, str] = dict(schema_id="bitcase.evidence/v1", record_id="r:1", category=category,
                                 obligation="G1", status="pass", summary=summary, produced_at="2025-01-01T00:00:00Z",
                                 producer='{"tool":"t"}', deployment=deployment, subjects="[]",
                                 details=canonical_json(details))
    hasher = ContentHasher()
    for _ in range(2):  # the second time from the kept state
        assert hasher.digest(**parts) == content_digest_of_text(evidence_content_json(**parts))


def test_prepared_digests_equal_the_records_own_across_categories_and_deployments() -> None:
    prepare = Preparer()
    for index, category in enumerate(CATEGORIES * 2):
        deployment = OTHER_DEPLOYMENT if index % 3 == 0 else record(0).deployment
        value = record(index, category=category, deployment=deployment,
                       details={"n": index, "nested": {"b": [1.5, None], "a": "é"}})
        assert prepare(value.to_json_dict(), f"record {index}").content_digest == value.content_digest()
