"""Canonical JSON and digests shared by every producer and the store.

A digest is always ``sha256:<64 hex>`` over the canonical JSON encoding: keys sorted,
no insignificant whitespace, UTF-8, no NaN/Infinity (they have no JSON spelling).
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

__all__ = ["canonical_json", "canonical_json_of_tree", "sha256_digest", "digest_of", "file_digest", "DIGEST_PREFIX"]

DIGEST_PREFIX = "sha256:"


# One encoder instance: json.dumps with non-default options builds a new encoder per call.
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# The C encoder that _CANONICAL_ENCODER.encode builds on every call, built once, without the
# check for circular references (see canonical_json_of_tree).
_TREE_ENCODER = None if c_make_encoder is None else c_make_encoder(
    None, None, encode_basestring, None, ":", ",", True, False, False)


def canonical_json(value: Any) -> str:
    """Encode ``value`` as canonical JSON (sorted keys, compact, no NaN)."""
    return _CANONICAL_ENCODER.encode(value)


def canonical_json_of_tree(value: Any) -> str:
    """:func:`canonical_json` (the same text) of a value known to be plain JSON and acyclic.

    Only for values already checked (``evidence_db.prepare.check_json_value``): a cyclic value
    would recurse until RecursionError, and a non-JSON value raises TypeError.
    """
    if _TREE_ENCODER is None or type(value) is str:
        return canonical_json(value)
    return "".join(_TREE_ENCODER(value, 0))


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON encoding of ``value``."""
    return sha256_digest(canonical_json(value).encode("utf-8"))


def file_digest(path: Path, *, chunk_bytes: int = 1 << 20) -> str:
    """``sha256:<hex>`` of a file's bytes, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            h.update(chunk)
    return DIGEST_PREFIX + h.hexdigest()
