"""Refusing JSON objects that repeat a key: parsers disagree on which value wins.

Python and orjson keep the last of ``"status":"fail","status":"pass"``, other parsers the
first, so an auditor reading a bundle with another tool could see a different record than the
store did. :func:`check_unique_keys` is exact and cheap on the common path: every key in the
text is a string followed by ``:``, so the number of ``"`` + optional whitespace + ``:`` in
the text is at least the number of keys; when it equals the number of keys the parsed value
holds, no key can have been dropped. Only otherwise (a string value containing ``":``, or a
real duplicate) is the text parsed again with a hook that sees every key.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["DuplicateKey", "check_unique_keys", "loads_unique"]

_KEY_END = re.compile(rb'"[ \t\r\n]*:')


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


def _num_keys(value: Any) -> int:
    if type(value) is dict:
        return len(value) + sum(_num_keys(v) for v in value.values() if type(v) in (dict, list))
    if type(value) is list:
        return sum(_num_keys(v) for v in value if type(v) in (dict, list))
    return 0


def check_unique_keys(raw: bytes, value: Any) -> None:
    """Raise :class:`DuplicateKey` when the JSON text ``raw`` (which parsed to ``value``) repeats a key."""
    if len(_KEY_END.findall(raw)) != _num_keys(value):
        loads_unique(raw.decode("utf-8"))
