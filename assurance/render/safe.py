"""Helpers that make hostile evidence text inert and readable.

Evidence is input from outside (producers on other machines, JUnit XML, external runs), so
every field may hold markup, script, template syntax, control characters, bidi overrides,
lone surrogates or megabytes of text. Templates never see raw evidence: they get text that
went through :func:`clean_text`, links only through :func:`safe_url`, and data for the
inline script only through :func:`script_json`.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from markupsafe import Markup

__all__ = ["clean_text", "safe_url", "script_json", "anchor_id", "short_digest",
           "MAX_PREVIEW_CHARS"]

MAX_PREVIEW_CHARS = 240

# C0/C1 controls except tab and newline, DEL, bidi embedding/override/isolate controls
# ("Trojan Source"), zero-width joiners and the BOM, and lone surrogates (not encodable).
_UNSAFE_CHARS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)


def _visible_escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean_text(value: Any) -> str:
    """``value`` as display text: control, bidi and surrogate characters shown as escapes.

    >>> clean_text("a\\x00b\\u202ec")
    'a\\\\x00b\\\\u202ec'
    >>> clean_text(None)
    ''
    """
    if type(value) is str:
        return _UNSAFE_CHARS.sub(_visible_escape, value) if _UNSAFE_CHARS.search(value) else value
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="backslashreplace")
    elif not isinstance(value, str):
        value = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return _UNSAFE_CHARS.sub(_visible_escape, value)


def safe_url(value: Any) -> str | None:
    """``value`` as an absolute http(s) URL fit for ``href``, or ``None`` when it is not one.

    Everything else (``javascript:``, ``data:``, ``file:``, relative paths, URLs with
    credentials, whitespace or control characters) is never linked.

    >>> safe_url("https://example.org/a?b=1")
    'https://example.org/a?b=1'
    >>> safe_url("javascript:alert(1)") is None
    True
    """
    if not isinstance(value, str) or len(value) > 2048 or value != value.strip():
        return None
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return None
    try:
        parts = urlsplit(value)
        has_credentials = parts.username is not None or parts.password is not None
        _ = parts.port  # raises ValueError on a malformed port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or has_credentials:
        return None
    return urlunsplit((parts.scheme.lower(), parts.netloc, parts.path, parts.query, parts.fragment))


_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                   "\u2029": "\\u2029"}


def script_json(value: Any) -> Markup:
    """JSON for a ``<script type="application/json">`` block that no string can break out of.

    ``<``, ``>`` and ``&`` become ``\\u`` escapes, so ``</script>`` and ``<!--`` never appear.

    >>> str(script_json({"a": "</script>"}))
    '{"a":"\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    text = _UNSAFE_CHARS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
    for raw, escaped in _SCRIPT_ESCAPES.items():
        text = text.replace(raw, escaped)
    return Markup(text)  # noqa: S704 - every markup-significant character is escaped above


_PLAIN_ID = re.compile(r"[A-Za-z0-9.\-]*\Z")


def anchor_id(prefix: str, key: str) -> str:
    """An injective, HTML- and URL-fragment-safe id: ``[A-Za-z0-9.-]`` kept, the rest ``_xx``.

    >>> anchor_id("n", "G1/a b")
    'n-G1_2fa_20b'
    """
    if _PLAIN_ID.match(key):
        return f"{prefix}-{key}"
    out = []
    for ch in key:
        if ch.isascii() and (ch.isalnum() or ch in ".-"):
            out.append(ch)
        else:
            out.append("".join(f"_{b:02x}" for b in ch.encode("utf-8", errors="surrogatepass")))
    return f"{prefix}-{''.join(out)}"


def short_digest(digest: str, num_hex: int = 12) -> str:
    """``sha256:abcdef…`` shortened to its first ``num_hex`` hex digits, for display."""
    text = clean_text(digest)
    hex_part = text.split(":", 1)[1] if ":" in text else text
    return hex_part[:num_hex]
