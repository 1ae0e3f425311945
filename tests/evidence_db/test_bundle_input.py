"""Reading bundles: every bad or hostile input is a BundleError naming file, line and field."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from evidence_db.canonical import canonical_json
from evidence_db.errors import BundleError
from evidence_db.ingest import parse_obligation_map
from evidence_db.prepare import Preparer
from evidence_db.reader import iter_json, iter_jsonl, sniff_kind
from tests.evidence_db.factories import record, record_dict


def read(path: Path) -> list[Any]:
    """Parse and prepare every record of a bundle file, as ingest does."""
    prepare = Preparer()
    rows = iter_json(path) if sniff_kind(path) == "json" else iter_jsonl(path)
    return [prepare(value, where) for where, value in rows]


def write_lines(path: Path, *lines: str | bytes) -> Path:
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines))
    return path


def error_of(path: Path) -> BundleError:
    with pytest.raises(BundleError) as info:
        read(path)
    return info.value


def test_jsonl_json_object_and_json_array_read_the_same(tmp_path: Path) -> None:
    values = [record_dict(i) for i in range(3)]
    jsonl = write_lines(tmp_path / "b.jsonl", "", *(canonical_json(v) for v in values), "   ")
    array = tmp_path / "b.json"
    array.write_text(json.dumps(values, indent=2))
    single = tmp_path / "one.json"
    single.write_text("\ufeff" + json.dumps(values[0]))
    digests = [record(i).content_digest() for i in range(3)]
    assert [r.content_digest for r in read(jsonl)] == digests
    assert [r.content_digest for r in read(array)] == digests
    assert [r.content_digest for r in read(single)] == digests[:1]
    assert read(jsonl)[1].where == f"{jsonl}:3 (id 'proof:matmul:1')"


def test_optional_fields_take_their_defaults(tmp_path: Path) -> None:
    value = record_dict(0)
    del value["subjects"], value["details"]
    [prepared] = read(write_lines(tmp_path / "b.jsonl", json.dumps(value)))
    assert prepared.content_digest == record(0, subjects=(), details={}).content_digest()


@pytest.mark.parametrize(("changes", "field", "message", "hint"), [
    ({"categroy": "kernel_proof"}, "categroy", "is not a field", "did you mean `category`?"),
    ({"status": "passed"}, "status", "'pass'?", "use one of: pass, fail, error, inconclusive"),
    ({"schema": "bitcase.evidence/v3"}, "schema", 'must be "bitcase.evidence/v2"', ""),
    ({"id": ""}, "id", "is empty", ""),
    ({"obligation": "G\n1"}, "obligation", "malformed", "single-line"),
    ({"summary": 7}, "summary", "expected string, got integer 7", ""),
    ({"produced_at": "2025-06-01T10:00:00"}, "produced_at", "has no UTC offset", ""),
    ({"produced_at": "yesterday"}, "produced_at", "not an ISO 8601 date-time", ""),
    ({"subjects": [{"uri": "code:x", "sha256": "abc"}]}, "subjects[0].sha256", "malformed", "64 lowercase hex"),
    ({"subjects": {"uri": "x"}}, "subjects", "expected array, got object", ""),
    ({"details": []}, "details", "expected object", ""),
    ({"details": {"x": {"y": 2**53}}}, "details.x.y", "out of range", "2**53 - 1"),
    ({"producer": {"tool": "t"}}, "producer.version", "is missing", "add the field `version`"),
    ({"deployment": {"fields": {"gpu": "x"}, "digest": "sha256:" + "0" * 64}}, "deployment.digest",
     "does not match the fields", "digest_of"),
])
def test_invalid_records_name_line_field_and_fix(tmp_path: Path, changes: dict, field: str, message: str,
                                                hint: str) -> None:
    path = write_lines(tmp_path / "b.jsonl", json.dumps(record_dict(0)), json.dumps(record_dict(1, **changes)))
    error = error_of(path)
    assert error.where.startswith(f"{path}:2")
    assert error.field == field
    assert message in str(error)
    assert hint in (error.hint or "")


def test_missing_required_field(tmp_path: Path) -> None:
    value = record_dict(0)
    del value["obligation"]
    error = error_of(write_lines(tmp_path / "b.jsonl", json.dumps(value)))
    assert (error.field, error.hint) == ("obligation", "add the field `obligation`")


@pytest.mark.parametrize(("line", "message"), [
    (b"{not json", "not valid JSON: Expecting property name"),
    (b"[1, 2]", "expected a JSON object (one evidence record), got array"),
    (b'"text"', "expected a JSON object (one evidence record), got string"),
    (b"\xff\xfe{}", "invalid UTF-8 at byte 0"),
    (b'{"a": "\xc3\x28"}', "invalid UTF-8 at byte 7"),
    (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    (b'{"x": ' + b"9" * 10_000 + b"}", "unreadable JSON number"),
])
def test_hostile_lines(tmp_path: Path, line: bytes, message: str) -> None:
    error = error_of(write_lines(tmp_path / "b.jsonl", line))
    assert message in str(error)
    assert error.where == f"{tmp_path / 'b.jsonl'}:1"


def with_raw_details(raw: str) -> str:
    """A valid record line whose details are the given raw JSON text."""
    return canonical_json(record_dict(0, details={"x": 0})).replace('"details":{"x":0}', f'"details":{raw}')


@pytest.mark.parametrize(("raw", "field", "message"), [
    ('{"a":' * 70 + "1" + "}" * 70, "details" + ".a" * 64, "nested more than 64 levels"),
    ('{"x":NaN}', "details.x", "not a finite number"),
    ('{"x":-Infinity}', "details.x", "not a finite number"),
    ('{"x":1e999}', "details.x", "not a finite number"),
    ('{"x":"\\ud800"}', "", "unpaired UTF-16 surrogate"),
])
def test_hostile_values(tmp_path: Path, raw: str, field: str, message: str) -> None:
    error = error_of(write_lines(tmp_path / "b.jsonl", with_raw_details(raw)))
    assert message in str(error)
    assert error.field == field


def test_long_lines_are_refused_without_reading_them_whole(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "b.jsonl", json.dumps(record_dict(0)), b"x" * 5000)
    with pytest.raises(BundleError, match="line is longer than 4096 bytes") as info:
        list(iter_jsonl(path, max_line_bytes=4096))
    assert info.value.where == f"{path}:2"


def test_multi_gigabyte_file_without_newlines_fails_fast(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as f:
        f.truncate(3 * 2**30)  # sparse: 3 GiB of NUL bytes, no newline
    started = time.monotonic()
    error = error_of(path)
    assert "line is longer than 16777216 bytes" in str(error) and error.where == f"{path}:1"
    assert time.monotonic() - started < 20


def test_json_bundle_limits(tmp_path: Path) -> None:
    scalar = tmp_path / "s.json"
    scalar.write_text("42")
    assert "expected a record object or an array of records, got integer" in str(error_of(scalar))
    big = tmp_path / "big.json"
    big.write_text(json.dumps([record_dict(i) for i in range(20)]))
    with pytest.raises(BundleError, match="larger than 1000 bytes") as info:
        list(iter_json(big, max_file_bytes=1000))
    assert "JSONL" in info.value.hint
    broken = tmp_path / "broken.json"
    broken.write_text('[{"id": 1},\n {oops}]')
    assert "(line 2, column 3)" in str(error_of(broken))
    element = tmp_path / "el.json"
    element.write_text(json.dumps([record_dict(0), record_dict(1, status="ok")]))
    error = error_of(element)
    assert error.where == f"{element}: record 2 (id 'proof:matmul:1')" and error.field == "status"


def test_input_kind_by_suffix_or_content(tmp_path: Path) -> None:
    for name, content, kind in (("a.ndjson", "{}", "jsonl"), ("a.txt", " [", "json"), ("a.out", "<x/>", "junit"),
                                ("a.log", "{", "jsonl")):
        (tmp_path / name).write_text(content)
        assert sniff_kind(tmp_path / name) == kind
    (tmp_path / "a.bin").write_bytes(b"\x00\x01")
    with pytest.raises(BundleError, match="cannot tell what this file is"):
        sniff_kind(tmp_path / "a.bin")
    with pytest.raises(BundleError, match="no such file"):
        read(tmp_path / "missing.jsonl")


def test_obligation_mapping_syntax() -> None:
    assert parse_obligation_map(["tests.engine.*=G2", "a=b=c"]) == [("tests.engine.*", "G2"), ("a=b", "c")]
    with pytest.raises(BundleError, match="is not TESTID_GLOB=OBLIGATION"):
        parse_obligation_map(["tests.engine.*"])


def test_a_record_round_trips_through_its_bundle_line(tmp_path: Path) -> None:
    from evidence_db.bundle import EvidenceRecord, write_bundle

    original = record(3)
    write_bundle(tmp_path / "b.jsonl", [original])
    line = (tmp_path / "b.jsonl").read_text(encoding="utf-8")
    again = EvidenceRecord.from_json_dict(json.loads(line))
    assert again == original and again.content_digest() == original.content_digest()
