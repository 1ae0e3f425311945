"""The repeated-key check is exact: every repeat is caught, however the text is spelled, and nothing else."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidence_db.unique_keys import DuplicateKey, check_unique_keys
from tests.evidence_db.test_fuzz import FUZZ, json_values

colon_text = st.text(alphabet=st.sampled_from(':"\\ a\u00e9\U0001f600\x01'), max_size=8)  # what could fool a count
values = st.recursive(json_values | colon_text,
                      lambda children: st.lists(children, max_size=3) | st.dictionaries(colon_text, children, max_size=3),
                      max_leaves=12)
spellings = st.sampled_from([dict(separators=(",", ":")), dict(separators=(", ", ": ")), dict(indent=1),
                             dict(separators=(",", ":"), ensure_ascii=False)])


@FUZZ
@given(st.dictionaries(colon_text, values, min_size=1, max_size=4), values, spellings, st.booleans(), st.integers(0, 3))
def test_every_repeated_key_is_caught(obj: dict, extra: object, spelling: dict, is_nested: bool, where: int) -> None:
    text = json.dumps(obj, **spelling)
    key = sorted(obj)[where % len(obj)]
    repeat = json.dumps(key) + ":" + json.dumps(extra)
    doc = text[:-1].rstrip() + "," + repeat + "}"  # the repeat as compact JSON, the rest as `spelling` writes it
    if is_nested:
        doc = '{"outer":' + doc + ',"tail":[1]}'
    with pytest.raises(DuplicateKey):
        check_unique_keys(doc.encode("utf-8", "surrogatepass"), json.loads(doc))


@FUZZ
@given(st.dictionaries(colon_text, values, max_size=5), spellings)
def test_no_repeat_is_never_reported(obj: dict, spelling: dict) -> None:
    text = json.dumps(obj, **spelling)
    check_unique_keys(text.encode("utf-8", "surrogatepass"), json.loads(text))
    escaped = text.replace(":", "\\u003a")  # a colon spelled as an escape (breaks separators: may be invalid)
    try:
        value = json.loads(escaped)
    except ValueError:
        return
    check_unique_keys(escaped.encode("utf-8", "surrogatepass"), value)
