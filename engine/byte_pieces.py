"""The raw bytes behind a token's string, for the decoders Hugging Face tokenizers use (torch-free).

Byte-level BPE (GPT-2, Llama 3) spells every byte as one printable character; SentencePiece-style
tokenizers with byte fallback spell a byte as ``<0xNN>`` and a space as ``▁``. A token that is not
valid UTF-8 on its own (one piece of a multi-byte character) is shown as ``bytes:`` followed by
its bytes, printable ASCII as itself and the rest as ``\\xNN`` — the convention of OpenAI's
legacy completions logprobs.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

__all__ = ["byte_level_chars", "char_to_byte", "decoder_kind", "piece_bytes", "display_text"]

_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_SPIECE_SPACE = "\u2581"


@cache
def byte_level_chars() -> tuple[str, ...]:
    """The character byte-level BPE uses for each byte 0..255 (GPT-2's table)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars: dict[int, str] = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return tuple(chars[b] for b in range(256))


@cache
def char_to_byte() -> dict[str, int]:
    """The inverse of :func:`byte_level_chars`."""
    return {c: b for b, c in enumerate(byte_level_chars())}


def _decoder_types(decoder: dict[str, Any] | None) -> list[str]:
    if not decoder:
        return []
    if decoder.get("type") == "Sequence":
        return [t for d in decoder.get("decoders", []) for t in _decoder_types(d)]
    return [str(decoder.get("type"))]


def decoder_kind(decoder: dict[str, Any] | None) -> str:
    """``"byte_level"``, ``"byte_fallback"`` or ``"other"`` for a tokenizer.json ``decoder`` object."""
    types = _decoder_types(decoder)
    if "ByteLevel" in types:
        return "byte_level"
    if "ByteFallback" in types:
        return "byte_fallback"
    return "other"


def piece_bytes(piece: str, kind: str) -> bytes | None:
    """The bytes of a model-vocabulary piece under decoder ``kind``; None when the kind has no byte rule."""
    if kind == "byte_level":
        table = char_to_byte()
        try:
            return bytes(table[c] for c in piece)
        except KeyError:  # not a byte-level piece (a token added as plain text)
            return piece.encode("utf-8")
    if kind == "byte_fallback":
        match = _BYTE_FALLBACK.fullmatch(piece)
        if match:
            return bytes([int(match.group(1), 16)])
        return piece.replace(_SPIECE_SPACE, " ").encode("utf-8")
    return None


def display_text(data: bytes) -> str:
    """``data`` as text when it is valid UTF-8, else ``bytes:`` and an escaped spelling of every byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in data)
