"""Parsing bundle lines without re-parsing the deployment configuration every line repeats.

Every record of a bundle carries its deployment configuration D, and a real D (with the
sealed kernel plan) is several kilobytes: most of each line. When a line contains, verbatim,
the ``"deployment":{…}`` text of an earlier line, that text is swapped for a random
placeholder string before parsing, and the placeholder, if it comes back as the record's
top-level ``deployment``, is replaced by the object parsed before. The result is exactly what
``json.loads`` of the whole line gives (the same text parses to the same value) and repeated
deployments become one shared object, which the preparer recognises without re-hashing it.
In any other case (nested match, malformed line, duplicate keys) the line is parsed whole.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from evidence_db.canonical import canonical_json

__all__ = ["LineParser"]

MIN_REPEAT_CHARS = 256  # below this, parsing is cheaper than looking for a repeat


class LineParser:
    """``json.loads`` for bundle lines, with repeated deployment objects parsed once."""

    def __init__(self) -> None:
        self._placeholder = "\x00bitcase-repeat-" + secrets.token_hex(16)  # unguessable: cannot be forged
        self._placeholder_json = '"deployment":' + json.dumps(self._placeholder)
        self._repeat_text: str | None = None  # '"deployment":{…}' as it appeared in an earlier line
        self._repeat_value: Any = None

    def parse(self, text: str) -> Any:
        """The JSON value of one line (raises what ``json.loads`` raises for a bad line)."""
        if self._repeat_text is not None:
            index = text.find(self._repeat_text)
            if index >= 0:
                reduced = text[:index] + self._placeholder_json + text[index + len(self._repeat_text):]
                try:
                    value = json.loads(reduced)
                except (ValueError, RecursionError):
                    value = None  # let the whole line produce the error message
                if isinstance(value, dict) and value.get("deployment") == self._placeholder:
                    value["deployment"] = self._repeat_value
                    return value
        value = json.loads(text)
        self._remember(text, value)
        return value

    def _remember(self, text: str, value: Any) -> None:
        deployment = value.get("deployment") if isinstance(value, dict) else None
        if not isinstance(deployment, dict):
            return
        try:
            candidate = '"deployment":' + canonical_json(deployment)
        except (ValueError, TypeError, RecursionError):
            return
        if len(candidate) >= MIN_REPEAT_CHARS and candidate in text:
            self._repeat_text, self._repeat_value = candidate, deployment
