"""Repeated deployment objects are parsed once, and the result is always what json.loads gives."""

from __future__ import annotations

import json

from evidence_db.canonical import canonical_json
from evidence_db.lineparse import LineParser
from tests.evidence_db.factories import record_dict


def test_repeated_deployment_is_shared_and_equal() -> None:
    parser = LineParser()
    lines = [canonical_json(record_dict(i)) for i in range(3)]
    values = [parser.parse(line) for line in lines]
    assert values == [json.loads(line) for line in lines]
    assert values[1]["deployment"] is values[0]["deployment"] is values[2]["deployment"]


def test_deployment_text_nested_elsewhere_is_not_mistaken_for_the_record_deployment() -> None:
    parser = LineParser()
    first = record_dict(0)
    parser.parse(canonical_json(first))
    # the same deployment text appears inside details, and the record's own deployment is different
    tricky = record_dict(1, details={"deployment": first["deployment"]},
                         deployment={"fields": {"gpu": "x"}, "digest": "sha256:" + "0" * 64})
    line = canonical_json(tricky)
    assert line.index('"deployment":{"digest":"sha256:0') < line.index('"details"')
    assert parser.parse(line) == json.loads(line)
    top_null = canonical_json({**record_dict(2, details={"deployment": first["deployment"]}), "deployment": None})
    assert parser.parse(top_null) == json.loads(top_null)


def test_duplicate_deployment_keys_parse_like_json_loads() -> None:
    parser = LineParser()
    line = canonical_json(record_dict(0))
    parser.parse(line)
    duplicate = line[:-1] + ',"deployment":{"fields":{},"digest":"x"}}'
    assert parser.parse(duplicate) == json.loads(duplicate)
