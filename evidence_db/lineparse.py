"""Parsing bundle lines without re-parsing the objects every line repeats.

Every record of a bundle carries its deployment configuration D and its producer, and a real
D (with the sealed kernel plan) is several kilobytes: most of each line. When a line contains,
byte for byte, the ``"deployment":{…}`` (or ``"producer":{…}``) text of an earlier line (one
of the last :data:`MAX_KNOWN` distinct ones: a bundle may interleave several producers), that
text is swapped for a random placeholder string before parsing, and the placeholder, if it
comes back as the record's top-level value for that key, is replaced by the object parsed
before. A known text is only compared where the key's first ``"key":`` stands, not searched
for along the line. The result equals ``json.loads`` of the whole line (the same text parses to the same
value), and repeated objects become one shared object, which the preparer recognises without
checking or hashing it again. In any other case (a match nested elsewhere, duplicate keys, a
malformed line) the line is parsed whole.

Where the optional ``orjson`` package is installed, :func:`loads_utf8` parses with it (several
times faster) whenever it gives exactly what ``json.loads`` gives; see there.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from evidence_db.canonical import canonical_json, canonical_json_v1
from evidence_db.jcs import keeps_types
from evidence_db.unique_keys import DuplicateKey, check_unique_keys

try:
    import orjson
except ImportError:  # optional: the standard library parses the same, slower
    orjson = None

__all__ = ["LineParser", "REPEATED_KEYS", "loads_utf8"]

REPEATED_KEYS = ("deployment", "producer")
MIN_REPEAT_BYTES = 128  # below this, parsing is cheaper than looking for a repeat
MAX_KNOWN = 16  # distinct texts remembered per key (the oldest is forgotten first)
# orjson reads an integer beyond 64 bits as a float where json.loads gives an int (which the
# preparer then refuses by name): lines with a run of 19 digits go to json.loads. (Mapping
# digits to "0" and everything else to " ", then searching, is far cheaper than a regex.)
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGIT_RUN = b"0" * 19


def loads_utf8(raw: bytes) -> Any:
    """``json.loads(raw.decode("utf-8"))``: the same value, or the same exception.

    orjson parses first when installed; anything it refuses (invalid UTF-8, lone surrogate
    escapes, NaN, numbers out of double range, deep nesting, malformed text) is parsed again
    by ``json.loads``, which either accepts it the way it always has or raises its usual error.
    """
    if orjson is not None and _LONG_DIGIT_RUN not in raw.translate(_DIGITS_AS_ZEROS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw.decode("utf-8"))


class _Repeat:
    """One top-level key whose value may repeat verbatim from line to line."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.placeholder = f"\x00bitcase-repeat-{secrets.token_hex(16)}"  # unguessable: cannot be forged
        self.placeholder_bytes = f'"{key}":{json.dumps(self.placeholder)}'.encode("ascii")
        self.marker = f'"{key}":'.encode("ascii")
        self.known: dict[bytes, Any] = {}  # b'"key":{…}' as it appeared in an earlier line -> its value

    def find(self, raw: bytes) -> tuple[int, bytes, Any] | None:
        """``(index, text, value)`` of a known text at the first ``"key":`` of ``raw``, if any."""
        index = raw.find(self.marker)
        if index >= 0:
            for text, value in self.known.items():
                if raw.startswith(text, index):
                    return index, text, value
        return None

    def remember(self, text: bytes, value: Any) -> None:
        if len(self.known) >= MAX_KNOWN:
            del self.known[next(iter(self.known))]
        self.known[text] = value


class LineParser:
    """``json.loads`` for bundle lines (bytes), with repeated objects parsed once."""

    def __init__(self) -> None:
        self._repeats = [_Repeat(key) for key in REPEATED_KEYS]

    def parse(self, raw: bytes) -> Any:
        """The JSON value of one UTF-8 line; raises what decoding or ``json.loads`` raise for a bad line,
        and :class:`~evidence_db.unique_keys.DuplicateKey` for an object that repeats a key."""
        reduced, used = raw, []
        for repeat in self._repeats:
            if repeat.known and (found := repeat.find(reduced)) is not None:
                index, text, known_value = found
                reduced = reduced[:index] + repeat.placeholder_bytes + reduced[index + len(text):]
                used.append((repeat, known_value))
        if used:
            try:
                value = loads_utf8(reduced)
                check_unique_keys(reduced, value)  # the known texts were checked when first parsed
            except DuplicateKey:
                raise
            except (ValueError, RecursionError):
                value = None  # the whole line gives the error message
            if isinstance(value, dict) and all(value.get(r.key) == r.placeholder for r, _ in used):
                for repeat, known_value in used:
                    value[repeat.key] = known_value
                if len(used) < len(self._repeats):
                    self._remember(raw, value, skip={r.key for r, _ in used})
                return value
        value = loads_utf8(raw)
        check_unique_keys(raw, value)
        self._remember(raw, value)
        return value

    def _remember(self, raw: bytes, value: Any, skip: set[str] | frozenset[str] = frozenset()) -> None:
        if not isinstance(value, dict):
            return
        for repeat in self._repeats:
            item = value.get(repeat.key)
            if repeat.key in skip or not isinstance(item, dict):
                continue
            # The text a line would hold for this very value: v2 writers write RFC 8785, v1 writers
            # Python's json; where RFC 8785 spells a float as an integer, only the v1 text is exact.
            encode = canonical_json if keeps_types(item) else canonical_json_v1
            try:
                candidate = f'"{repeat.key}":{encode(item)}'.encode("utf-8")
            except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
                continue
            if len(candidate) >= MIN_REPEAT_BYTES and candidate not in repeat.known and candidate in raw:
                repeat.remember(candidate, item)
