"""Canonical JSON and digests shared by every producer and the store.

A digest is always ``sha256:<64 hex>`` over the canonical JSON encoding of a value, UTF-8.
Since schema v2 (``bitcase.evidence/v2``, ``bitcase.review/v2``) that encoding is RFC 8785
(JCS, ``evidence_db/jcs.py``), so any JCS implementation recomputes every digest. Schema v1
used Python's ``json`` with sorted keys and compact separators: :func:`canonical_json_v1` and
:func:`digest_of_v1` keep it, only to read and verify v1 bundles and stores.
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, Callable

from evidence_db import jcs

__all__ = ["canonical_json", "canonical_json_of_tree", "canonical_json_v1", "sha256_digest", "digest_of",
           "digest_of_v1", "file_digest", "encoder_for_version", "DIGEST_PREFIX", "CANONICAL_VERSION"]

DIGEST_PREFIX = "sha256:"
CANONICAL_VERSION = 2  # the schema version whose canonical form new evidence, reviews and digests use


# One encoder instance: json.dumps with non-default options builds a new encoder per call.
_V1_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# The C encoder that _V1_ENCODER.encode builds on every call, built once, without the check for
# circular references (see canonical_json_of_tree).
_TREE_ENCODER = None if c_make_encoder is None else c_make_encoder(
    None, None, encode_basestring, None, ":", ",", True, False, False)


def canonical_json(value: Any) -> str:
    """Encode ``value`` as RFC 8785 canonical JSON; raise :class:`ValueError` if it has no JCS form."""
    if jcs.is_c_canonical(value):  # the common case: the C encoder writes the same text, faster
        return _V1_ENCODER.encode(value)
    return jcs.encode(value)


def canonical_json_v1(value: Any) -> str:
    """Encode ``value`` as schema v1 did (sorted keys by code point, compact, Python's float spelling)."""
    return _V1_ENCODER.encode(value)


def canonical_json_of_tree(value: Any, version: int = CANONICAL_VERSION) -> str:
    """The canonical JSON (of schema ``version``) of a value known to be plain JSON and acyclic.

    Only for values already checked (``evidence_db.prepare.check_json_value``): a cyclic value
    would recurse until RecursionError, and a non-JSON value raises TypeError.
    """
    if version != 1 and not jcs.is_c_canonical(value):
        return jcs.encode(value)
    if _TREE_ENCODER is None or type(value) is str:
        return _V1_ENCODER.encode(value)
    return "".join(_TREE_ENCODER(value, 0))


def encoder_for_version(version: int) -> Callable[[Any], str]:
    """:func:`canonical_json_v1` for schema version 1, :func:`canonical_json` for 2."""
    if version == 1:
        return canonical_json_v1
    if version == 2:
        return canonical_json
    raise ValueError(f"no canonical JSON is defined for schema version {version}")


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """``sha256:<hex>`` of the RFC 8785 canonical JSON of ``value``."""
    return sha256_digest(canonical_json(value).encode("utf-8"))


def digest_of_v1(value: Any) -> str:
    """``sha256:<hex>`` of the schema v1 canonical JSON of ``value`` (reading v1 evidence only)."""
    return sha256_digest(canonical_json_v1(value).encode("utf-8"))


def file_digest(path: Path, *, chunk_bytes: int = 1 << 20) -> str:
    """``sha256:<hex>`` of a file's bytes, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            h.update(chunk)
    return DIGEST_PREFIX + h.hexdigest()
