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


def test_ingest_names_the_file_line_and_repeated_key(tmp_path) -> None:
    from evidence_db.errors import BundleError
    from evidence_db.ingest import load_deployment_file
    from evidence_db.reader import iter_json, iter_jsonl
    from tests.evidence_db.factories import record_dict

    good = json.dumps(record_dict(0), separators=(",", ":"))
    bundle = tmp_path / "b.jsonl"
    bundle.write_text(good + "\n" + good[:-1] + ',"status":"pass"}\n')
    with pytest.raises(BundleError, match=r"b\.jsonl:2: an object names the key 'status' twice"):
        list(iter_jsonl(bundle))
    array = tmp_path / "b.json"
    array.write_text('[{"id":"x","details":{"k":1,"k":2}}]')
    with pytest.raises(BundleError, match=r"b\.json: an object names the key 'k' twice"):
        list(iter_json(array))
    deployment = tmp_path / "d.json"
    deployment.write_text('{"fields":{"gpu":"a"},"fields":{"gpu":"b"}}')
    with pytest.raises(BundleError, match="names the key 'fields' twice"):
        load_deployment_file(deployment)
