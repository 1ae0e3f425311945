"""Canonical JSON and digests shared by every producer and the store.

A digest is always ``sha256:<64 hex>`` over the canonical JSON encoding: keys sorted,
no insignificant whitespace, UTF-8, no NaN/Infinity (they have no JSON spelling).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["canonical_json", "sha256_digest", "digest_of", "file_digest", "DIGEST_PREFIX"]

DIGEST_PREFIX = "sha256:"


# One encoder instance: json.dumps with non-default options builds a new encoder per call.
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """Encode ``value`` as canonical JSON (sorted keys, compact, no NaN)."""
    return _CANONICAL_ENCODER.encode(value)


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
