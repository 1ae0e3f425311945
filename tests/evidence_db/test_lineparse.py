"""Repeated deployment and producer objects are parsed once; the result is always what json.loads gives.

Every test runs twice: parsing with orjson (when installed) and with the standard library only.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_db import lineparse
from evidence_db.canonical import canonical_json
from evidence_db.unique_keys import DuplicateKey
from evidence_db.lineparse import LineParser, loads_utf8
from tests.evidence_db.factories import record_dict


@pytest.fixture(autouse=True, params=["orjson", "json"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which parser :func:`loads_utf8` tries first."""
    if request.param == "json":
        monkeypatch.setattr(lineparse, "orjson", None)
    elif lineparse.orjson is None:
        pytest.skip("orjson is not installed (the standard-library path runs in the other case)")
    return request.param


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


def test_duplicate_keys_are_refused_even_where_a_known_text_is_swapped_out() -> None:
    parser = LineParser()
    line = canonical_json(record_dict(0)).encode()
    parser.parse(line)
    duplicate = line[:-1] + b',"deployment":{"fields":{},"digest":"x"}}'
    with pytest.raises(DuplicateKey, match="'deployment'"):
        parser.parse(duplicate)
    nested = line[:-1] + b',"extra":{"k":1,"k":2}}'  # the reduced path: the deployment text is known
    with pytest.raises(DuplicateKey, match="'k'"):
        parser.parse(nested)
    colons = line[:-1] + b',"extra":"a\\":b\\" : c"}'  # a string holding ": is counted, not taken for a key
    assert parser.parse(colons) == json.loads(colons)


TRICKY_LINES = [
    b'{"n":18446744073709551616}', b'{"n":-9223372036854775809}', b'{"n":1e400}', b'{"n":NaN}', b'{"n":-Infinity}',
    b'{"s":"\\ud800"}', b'{"s":"\\ud83d\\ude00"}', b'{"a":1,"a":2}', b'{"s":"\xff"}', b'{"s":"\x01"}', b'\x0c{}',
    b'{"n":01}', b'{"n":1.}', b'{"n":-0}', b'{"n":-0.0}', b'{"n":5e-324}', b'{"n":0.1000000000000000055511151231257827}',
    b'[' * 2000 + b']' * 2000, b'{"x":[1,2,]}', b'{"s":"a\\u0000b"}', b'  {"a":[true,false,null]} \r\n',
]


def _outcome(load, raw: bytes) -> tuple[str, str]:
    try:
        return "value", repr(load(raw))
    except (ValueError, RecursionError) as exc:
        return "error", type(exc).__name__


@pytest.mark.parametrize("raw", TRICKY_LINES)
def test_loads_utf8_gives_what_json_loads_gives(raw: bytes, loader: str) -> None:
    """Same value (same types: ints stay ints), or the same kind of exception."""
    expected = _outcome(lambda data: json.loads(data.decode("utf-8")), raw)
    assert _outcome(loads_utf8, raw) == expected
    if expected[0] == "error" and not isinstance(json_error(raw), RecursionError):
        with pytest.raises(type(json_error(raw))) as info:
            loads_utf8(raw)
        assert str(info.value) == str(json_error(raw))  # the message users see is json's


def json_error(raw: bytes) -> BaseException:
    try:
        json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return exc
    raise AssertionError("expected an error")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40) | st.from_regex(rb'\A[\[\]{}",:0-9.eE+\- a-z\\]{1,30}\Z'))
def test_loads_utf8_on_arbitrary_bytes(data: bytes) -> None:
    assert _outcome(loads_utf8, data) == _outcome(lambda raw: json.loads(raw.decode("utf-8")), data)
