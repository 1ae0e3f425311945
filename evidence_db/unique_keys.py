"""Refusing JSON objects that repeat a key: parsers disagree on which value wins.

Python and orjson keep the last of ``"status":"fail","status":"pass"``, other parsers the
first, so an auditor reading a bundle with another tool could see a different record than the
store did. :func:`check_unique_keys` is exact and cheap on the common path: outside strings a
JSON text has one ``:`` per key, and inside them the colons of their contents. Re-encoding the
parsed value (orjson) writes every kept key and string again, each colon as a colon; so when the
text spells no colon as a ``\\u003a`` escape, it holds more colons than the re-encoding exactly
when a parser dropped a repeated key (with whatever its value held), and as many otherwise.
Any other text, or without orjson, is parsed again with a hook that sees every key.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DuplicateKey", "check_unique_keys", "loads_unique"]

_ESCAPED_COLON = b"\\u003"  # the start of \u003a / \u003A (a few other characters too: then the slow way)

try:
    import orjson
except ImportError:  # optional: without it every line is parsed a second time, with the hook
    orjson = None


class DuplicateKey(ValueError):
    """A JSON object names one key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return value


def loads_unique(text: str | bytes) -> Any:
    """``json.loads`` that raises :class:`DuplicateKey` for an object repeating a key."""
    return json.loads(text, object_pairs_hook=_pairs)


def check_unique_keys(raw: bytes, value: Any) -> None:
    """Raise :class:`DuplicateKey` when the JSON text ``raw`` (which parsed to ``value``) repeats a key."""
    if orjson is not None and _ESCAPED_COLON not in raw:
        try:
            if raw.count(b":") == orjson.dumps(value).count(b":"):
                return
        except TypeError:  # orjson's JSONEncodeError, e.g. an integer beyond 64 bits: check the slow way
            pass
    loads_unique(raw.decode("utf-8"))
