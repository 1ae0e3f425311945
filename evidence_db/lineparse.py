"""Parsing bundle lines without re-parsing the objects every line repeats.

Every record of a bundle carries its deployment configuration D and its producer, and a real
D (with the sealed kernel plan) is several kilobytes: most of each line. When a line contains,
byte for byte, the ``"deployment":{…}`` (or ``"producer":{…}``) text of an earlier line, that
text is swapped for a random placeholder string before parsing, and the placeholder, if it
comes back as the record's top-level value for that key, is replaced by the object parsed
before. The result equals ``json.loads`` of the whole line (the same text parses to the same
value), and repeated objects become one shared object, which the preparer recognises without
checking or hashing it again. In any other case (a match nested elsewhere, duplicate keys, a
malformed line) the line is parsed whole.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from evidence_db.canonical import canonical_json

__all__ = ["LineParser", "REPEATED_KEYS"]

REPEATED_KEYS = ("deployment", "producer")
MIN_REPEAT_BYTES = 128  # below this, parsing is cheaper than looking for a repeat


class _Repeat:
    """One top-level key whose value may repeat verbatim from line to line."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.placeholder = f"\x00bitcase-repeat-{secrets.token_hex(16)}"  # unguessable: cannot be forged
        self.placeholder_bytes = f'"{key}":{json.dumps(self.placeholder)}'.encode("ascii")
        self.text: bytes | None = None  # b'"key":{…}' as it appeared in an earlier line
        self.value: Any = None


class LineParser:
    """``json.loads`` for bundle lines (bytes), with repeated objects parsed once."""

    def __init__(self) -> None:
        self._repeats = [_Repeat(key) for key in REPEATED_KEYS]

    def parse(self, raw: bytes) -> Any:
        """The JSON value of one UTF-8 line; raises what decoding or ``json.loads`` raise for a bad line."""
        reduced, used = raw, []
        for repeat in self._repeats:
            if repeat.text is not None:
                index = reduced.find(repeat.text)
                if index >= 0:
                    reduced = reduced[:index] + repeat.placeholder_bytes + reduced[index + len(repeat.text):]
                    used.append(repeat)
        if used:
            try:
                value = json.loads(reduced.decode("utf-8"))
            except (ValueError, RecursionError):
                value = None  # the whole line gives the error message
            if isinstance(value, dict) and all(value.get(r.key) == r.placeholder for r in used):
                for repeat in used:
                    value[repeat.key] = repeat.value
                return value
        value = json.loads(raw.decode("utf-8"))
        self._remember(raw, value)
        return value

    def _remember(self, raw: bytes, value: Any) -> None:
        if not isinstance(value, dict):
            return
        for repeat in self._repeats:
            item = value.get(repeat.key)
            if not isinstance(item, dict):
                continue
            try:
                candidate = f'"{repeat.key}":{canonical_json(item)}'.encode("utf-8")
            except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
                continue
            if len(candidate) >= MIN_REPEAT_BYTES and candidate in raw:
                repeat.text, repeat.value = candidate, item
