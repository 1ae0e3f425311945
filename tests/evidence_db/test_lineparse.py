"""Repeated deployment and producer objects are parsed once; the result is always what json.loads gives."""

from __future__ import annotations

import json

from evidence_db.canonical import canonical_json
from evidence_db.lineparse import LineParser
from tests.evidence_db.factories import record_dict


def test_repeated_deployment_is_shared_and_equal() -> None:
    parser = LineParser()
    lines = [canonical_json(record_dict(i)).encode() for i in range(3)]
    values = [parser.parse(line) for line in lines]
    assert values == [json.loads(line) for line in lines]
    for key in ("deployment", "producer"):
        assert values[1][key] is values[0][key] is values[2][key]


def test_deployment_text_nested_elsewhere_is_not_mistaken_for_the_record_deployment() -> None:
    parser = LineParser()
    first = record_dict(0)
    parser.parse(canonical_json(first).encode())
    # the same deployment text appears inside details, and the record's own deployment is different
    tricky = record_dict(1, details={"deployment": first["deployment"]},
                         deployment={"fields": {"gpu": "x"}, "digest": "sha256:" + "0" * 64})
    line = canonical_json(tricky).encode()
    assert line.index(b'"deployment":{"digest":"sha256:0') < line.index(b'"details"')
    assert parser.parse(line) == json.loads(line)
    top_null = canonical_json({**record_dict(2, details={"deployment": first["deployment"]}),
                               "deployment": None}).encode()
    assert parser.parse(top_null) == json.loads(top_null)


def test_duplicate_deployment_keys_parse_like_json_loads() -> None:
    parser = LineParser()
    line = canonical_json(record_dict(0)).encode()
    parser.parse(line)
    duplicate = line[:-1] + b',"deployment":{"fields":{},"digest":"x"}}'
    assert parser.parse(duplicate) == json.loads(duplicate)
