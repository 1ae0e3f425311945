"""RFC 8785 JSON Canonicalization Scheme (JCS): the canonical JSON of digests from schema v2 on.

JCS is compact JSON with object members sorted by their names' UTF-16 code units, strings
escaped minimally (only ``"``, ``\\`` and control characters; ``\\u00xx`` in lowercase hex), and
numbers written as ECMAScript writes an IEEE 754 double (``1`` not ``1.0``, ``1e-7`` not
``1e-07``, ``0.000009999999747378752`` not ``9.999999747378752e-06``). Integers must be exact
doubles: beyond ±(2**53 - 1) a JCS tool in another language would read a different number, so
they are refused (write such values as strings).

:func:`encode` is the whole scheme in Python. :func:`is_c_canonical` says when the C JSON
encoder's compact sorted output already *is* JCS (no float it spells differently, no key above
U+FFFF, no integer out of range), which is true of most evidence and keeps ingest fast.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any

__all__ = ["encode", "number", "is_c_canonical", "keeps_types", "MAX_SAFE_INT", "JcsError"]

MAX_SAFE_INT = 2**53 - 1
_FLAT_LIST_MIN = 16  # lists at least this long are checked for the C encoder's fast path
_C_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


class JcsError(ValueError):
    """A number that has no JCS form (NaN, infinity, an integer beyond ±(2**53 - 1)), or a non-string key."""


def number(value: float | int) -> str:
    """A number as ECMAScript's Number.prototype.toString writes it (RFC 8785 §3.2.2.3)."""
    if type(value) is int:
        if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            return str(value)
        raise JcsError(f"integer {value} is beyond ±(2**53 - 1), so it has no exact JCS form; write it as a string")
    if value != value or value in (float("inf"), float("-inf")):
        raise JcsError(f"{value} is not a finite number; JSON has no NaN or Infinity")
    if value == 0:
        return "0"  # -0 included
    text = repr(value)  # the shortest digits that round-trip: the digits ECMAScript uses too
    sign = "-" if text[0] == "-" else ""
    mantissa, _, exp = text.lstrip("-").partition("e")
    whole, _, frac = mantissa.partition(".")
    all_digits = whole + frac
    digits = all_digits.lstrip("0")
    point = len(whole) + int(exp or 0) - (len(all_digits) - len(digits))  # the "n" of ECMA-262
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        return sign + digits + "0" * (point - k)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    e = point - 1
    head = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{head}e{'+' if e > 0 else '-'}{abs(e)}"


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def encode(value: Any) -> str:
    """The JCS text of a JSON value (``dict`` with ``str`` keys, ``list``, ``str``, numbers, bools, None)."""
    parts: list[str] = []
    _encode(value, parts.append)
    return "".join(parts)


def _encode(value: Any, out: Any) -> None:
    kind = type(value)
    if kind is str:
        out(encode_basestring(value))
    elif value is None:
        out("null")
    elif value is True:
        out("true")
    elif value is False:
        out("false")
    elif kind is int or kind is float:
        out(number(value))
    elif kind is dict:
        if any(not isinstance(k, str) for k in value):
            raise JcsError("object keys must be strings")
        out("{")
        for i, key in enumerate(sorted(value, key=_utf16_order)):
            if i:
                out(",")
            out(encode_basestring(key))
            out(":")
            _encode(value[key], out)
        out("}")
    elif (kind is list or kind is tuple) and len(value) >= _FLAT_LIST_MIN and _is_flat(value):
        out(_C_ENCODE(value))  # token ids and the like: every item is spelled the same by both
    elif kind is list or kind is tuple:
        out("[")
        for i, item in enumerate(value):
            if i:
                out(",")
            _encode(item, out)
        out("]")
    elif isinstance(value, str):  # subclasses (torch's TorchVersion) as their text, as json does
        out(encode_basestring(value))
    elif isinstance(value, (int, float)):  # subclasses (IntEnum, numpy's float64) as their plain value
        out(number(int(value) if isinstance(value, int) else float(value)))
    elif isinstance(value, (dict, list, tuple)):
        _encode(dict(value) if isinstance(value, dict) else list(value), out)
    else:
        raise TypeError(f"Object of type {kind.__name__} is not JSON serializable")


def _is_flat(items: list[Any] | tuple[Any, ...]) -> bool:
    """Only strings and integers within ±(2**53 - 1): what the C encoder writes exactly as JCS does."""
    for item in items:
        kind = type(item)
        if not (kind is str or (kind is int and -MAX_SAFE_INT <= item <= MAX_SAFE_INT)):
            return False
    return True


def is_c_canonical(value: Any) -> bool:
    """True when compact, sorted output of the C encoder equals :func:`encode` of ``value``.

    For plain JSON values only (as ``evidence_db.prepare.check_json_value`` admits). False is
    safe (the caller then uses :func:`encode`); True is exact: floats spelled identically (no
    exponent and not integral), every integer within ±(2**53 - 1), every key within the BMP (where
    code point order and UTF-16 order agree).
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -MAX_SAFE_INT <= value <= MAX_SAFE_INT
    if kind is float:
        text = repr(value)
        return "e" not in text and not text.endswith(".0")
    if kind is dict:
        for key, item in value.items():
            if not (key.isascii() or max(key) <= "\uffff") or not is_c_canonical(item):
                return False
        return True
    if kind is list:
        for item in value:
            if not is_c_canonical(item):
                return False
        return True
    return False


def keeps_types(value: Any) -> bool:
    """True when parsing :func:`encode` of ``value`` gives back its ints as ints and floats as floats.

    False exactly when a float is integral and below 1e21 in magnitude (``1.0`` is written ``1``,
    ``-0.0`` is written ``0``): JCS does not tell such a float from an integer.
    """
    kind = type(value)
    if kind is float:
        return not (value.is_integer() and abs(value) < 1e21)
    if kind is dict:
        return all(keeps_types(item) for item in value.values())
    if kind is list or kind is tuple:
        return all(keeps_types(item) for item in value)
    return True
