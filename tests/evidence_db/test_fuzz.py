"""Fuzzing the input side: parsers and validation never raise anything but BundleError."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_db.canonical import digest_of
from evidence_db.errors import BundleError
from evidence_db.junit import junit_records
from evidence_db.lineparse import LineParser
from evidence_db.prepare import Preparer
from evidence_db.reader import iter_jsonl
from evidence_db.unique_keys import DuplicateKey
from tests.evidence_db.factories import record_dict

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOP_FIELDS = sorted(record_dict(0))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


SCRATCH = Path(tempfile.mkdtemp(prefix="bitcase-fuzz-"))  # hypothesis reruns cannot use tmp_path


def _ingest_bytes(data: bytes) -> None:
    path = SCRATCH / "fuzz.jsonl"
    path.write_bytes(data)
    prepare = Preparer()
    for where, value in iter_jsonl(path):
        prepare(value, where)


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes_are_refused_cleanly(data: bytes) -> None:
    try:
        _ingest_bytes(data)
    except BundleError:
        pass


@FUZZ
@given(st.sampled_from(TOP_FIELDS), json_values, st.sampled_from(["replace", "delete", "nest"]))
def test_mutated_records_are_accepted_or_refused_cleanly(field: str, value: Any, how: str) -> None:
    mutated = record_dict(0)
    if how == "delete":
        del mutated[field]
    elif how == "nest" and isinstance(mutated[field], dict):
        mutated[field] = {**mutated[field], "x": value}
    else:
        mutated[field] = value
    line = json.dumps(mutated, allow_nan=True).encode("utf-8", "surrogatepass")
    try:
        _ingest_bytes(line + b"\n" + json.dumps(record_dict(1)).encode() + b"\n")
    except BundleError as exc:
        assert str(exc)


@FUZZ
@given(st.binary(max_size=300), st.sampled_from([b"", b"<testsuite>", b"<testsuites><testsuite name='s'>"]))
def test_arbitrary_xml_is_refused_cleanly(data: bytes, prefix: bytes) -> None:
    path = SCRATCH / "fuzz.xml"
    path.write_bytes(prefix + data)
    try:
        list(junit_records(path, obligation_map=[("*", "G")], deployment={"fields": {}, "digest": ""}))
    except BundleError:
        pass


def _dumps(value: Any) -> str:
    """Canonical layout, but Infinity allowed (a line the parser must still read like json.loads)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


attribute_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30)


@FUZZ
@given(st.dictionaries(st.sampled_from(["name", "timestamp", "time", "hostname"]), attribute_text),
       st.dictionaries(st.sampled_from(["name", "classname", "time", "file", "line"]), attribute_text),
       st.sampled_from(["", "<failure/>", "<error message='m'/>", "<skipped/>"]),
       st.lists(st.tuples(st.sampled_from(["obligation", "subject", "x"]), attribute_text), max_size=3))
def test_arbitrary_junit_attributes_give_records_or_clean_errors(suite: dict, case: dict, outcome: str,
                                                                  properties: list) -> None:
    props = "".join(f"<property name={quoteattr(k)} value={quoteattr(v)}/>" for k, v in properties)
    suite_attrs = " ".join(f"{k}={quoteattr(v)}" for k, v in suite.items())
    case_attrs = " ".join(f"{k}={quoteattr(v)}" for k, v in case.items())
    path = SCRATCH / "fuzz-attrs.xml"
    path.write_text(f"<testsuite {suite_attrs}><testcase {case_attrs}><properties>{props}</properties>{outcome}"
                    "</testcase></testsuite>", encoding="utf-8")
    prepare = Preparer()
    try:
        for where, value in junit_records(path, obligation_map=[("*", "G")],
                                          deployment={"fields": {}, "digest": digest_of({})}):
            prepare(value, where)
    except BundleError:
        pass


@FUZZ
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4), json_values, st.booleans(), st.booleans())
def test_line_parser_equals_json_loads(fields: dict, other: Any, is_nested: bool, is_duplicate: bool) -> None:
    deployment = {"digest": "sha256:" + "a" * 64, "fields": {"padding": "p" * 300, **fields}}
    parser = LineParser()
    first = _dumps({"deployment": deployment, "id": 1})
    assert parser.parse(first.encode()) == json.loads(first)
    body = {"details": {"deployment": deployment} if is_nested else other, "id": 2}
    line = _dumps({"deployment": deployment if not is_nested else other, **body})
    if is_duplicate:  # refused: parsers disagree on which of the two values wins
        line = line[:-1] + ',"deployment":' + _dumps(other) + "}"
        with pytest.raises(DuplicateKey, match="deployment"):
            parser.parse(line.encode("utf-8", "surrogatepass"))
        return
    assert parser.parse(line.encode("utf-8", "surrogatepass")) == json.loads(line)
