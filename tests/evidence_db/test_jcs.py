"""Canonical JSON is RFC 8785 (JCS): the RFC's own vectors and an independent implementation agree with ours."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_db import jcs
from evidence_db.canonical import canonical_json, canonical_json_of_tree, canonical_json_v1, digest_of, sha256_digest

# RFC 8785 Appendix B: IEEE 754 bit patterns and their JCS spelling.
APPENDIX_B = [
    ("0000000000000000", "0"), ("8000000000000000", "0"), ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"), ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"), ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"), ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"), ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"), ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"), ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"), ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"), ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"), ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"), ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def _double(bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(bits))[0]


@pytest.mark.parametrize("bits, text", APPENDIX_B)
def test_the_rfcs_number_vectors(bits: str, text: str) -> None:
    assert canonical_json(_double(bits)) == text
    assert canonical_json_of_tree([_double(bits)]) == f"[{text}]"


def test_the_rfcs_example_object() -> None:  # RFC 8785 §3.2.2 / §3.2.3
    value = json.loads('{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
                       '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
                       '"literals": [null, true, false]}')
    assert canonical_json(value) == ('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,'
                                     '1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')
    keys = {"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One", "\U0001f600": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O"}
    order = [k for k, _ in json.loads(canonical_json(keys), object_pairs_hook=lambda pairs: pairs)]
    assert order == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


@pytest.mark.parametrize("value, text, v1_text", [
    (1.0, "1", "1.0"), (1e-07, "1e-7", "1e-07"),
    (9.999999747378752e-06, "0.000009999999747378752", "9.999999747378752e-06"),
    ({"\U0001f600": 1, "\ufb33": 2}, '{"\U0001f600":1,"\ufb33":2}', '{"\ufb33":2,"\U0001f600":1}'),
])
def test_where_python_json_and_jcs_differ(value: Any, text: str, v1_text: str) -> None:
    assert canonical_json(value) == text == rfc8785.dumps(value).decode("utf-8")
    assert canonical_json_v1(value) == v1_text
    assert digest_of(value) == sha256_digest(text.encode("utf-8"))


def test_values_without_a_jcs_form_are_refused() -> None:
    for bad in (2**53, -(2**53), float("nan"), float("inf")):
        with pytest.raises(ValueError):
            canonical_json({"x": bad})
    assert canonical_json(2**53 - 1) == "9007199254740991"


def test_integral_floats_do_not_keep_their_type() -> None:
    assert not jcs.keeps_types({"a": [1.0]}) and not jcs.keeps_types(-0.0)
    assert jcs.keeps_types({"a": [1.5, 1e21, 3, "1.0"]})


def _trees() -> st.SearchStrategy[Any]:
    scalars = (st.none() | st.booleans() | st.integers(-(2**53 - 1), 2**53 - 1)
               | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
    keys = st.text(max_size=4) | st.sampled_from(["\U0001f600", "\ufb33", "\ue000", "\U00010000", "a", "\x7f"])
    return st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                        | st.dictionaries(keys, children, max_size=5), max_leaves=30)


@settings(max_examples=400, deadline=None)
@given(_trees())
def test_an_independent_implementation_writes_the_same_bytes(value: Any) -> None:
    expected = rfc8785.dumps(value).decode("utf-8")
    assert canonical_json(value) == expected
    assert jcs.encode(value) == expected
    assert canonical_json_of_tree(value) == expected


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_as_the_independent_implementation_writes_it(value: float) -> None:
    assert jcs.number(value) == rfc8785.dumps(value).decode("ascii")


def test_the_ingest_fast_path_digest_is_the_rfc8785_digest_of_the_record() -> None:
    import hashlib

    from evidence_db.bundle import Deployment
    from evidence_db.prepare import Preparer
    from tests.evidence_db.factories import record

    deployment = Deployment({"rms_norm_eps": 9.999999747378752e-06, "rope_theta": 10000.0, "\U0001f600": 1,
                             "\ufb33": [1e-07, -0.0, 1e21]})
    value = record(0, deployment=deployment, details={"seconds": 2.0, "\U0001f600": {"\ufb33": 1e-07}, "n": 3})
    line = value.to_json_dict()
    expected = "sha256:" + hashlib.sha256(rfc8785.dumps(line)).hexdigest()
    assert deployment.digest == "sha256:" + hashlib.sha256(rfc8785.dumps(deployment.fields)).hexdigest()
    assert Preparer()(line, "line 1").content_digest == value.content_digest() == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**53 - 1), 2**53 - 1) | st.text(max_size=3), min_size=16, max_size=40),
       st.floats(allow_nan=False, allow_infinity=False))
def test_long_flat_lists_take_the_c_encoder_and_match(items: list[Any], number: float) -> None:
    value = {"ids": items, "t": number}
    assert canonical_json(value) == rfc8785.dumps(value).decode("utf-8")
    with pytest.raises(ValueError):
        canonical_json({"ids": items + [2**53], "t": number})
