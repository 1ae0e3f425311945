"""Incremental detokenization for streaming: text deltas whose concatenation is the full decode (torch-free).

A token can end in the middle of a UTF-8 character (byte-level BPE splits emoji and CJK
characters), and some decoders change a token's text by what precedes it (SentencePiece drops
the first space). So each step decodes a short window — the tokens already emitted last time
plus the new ones — and emits what the window adds, holding the text back while it ends in
U+FFFD (an incomplete character). :meth:`DetokenizeStream.finish` releases what is still held.
"""

from __future__ import annotations

from engine.tokenizer import Tokenizer

__all__ = ["DetokenizeStream"]

_INCOMPLETE = "\ufffd"


class DetokenizeStream:
    """Turn produced token ids, one at a time, into newly complete text."""

    def __init__(self, tokenizer: Tokenizer, *, skip_special_tokens: bool = True) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix_offset = 0  # the window starts here: tokens already emitted once, for context
        self._read_offset = 0  # tokens before this are emitted

    @property
    def token_ids(self) -> tuple[int, ...]:
        """Every id pushed so far."""
        return tuple(self._ids)

    def _delta(self, *, final: bool) -> str:
        decode = self._tokenizer.decode
        emitted = decode(self._ids[self._prefix_offset:self._read_offset], skip_special_tokens=self._skip)
        window = decode(self._ids[self._prefix_offset:], skip_special_tokens=self._skip)
        if not final and (window.endswith(_INCOMPLETE) or len(window) <= len(emitted)):
            return ""
        self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
        return window[len(emitted):]

    def push(self, token_id: int) -> str:
        """Add one produced token; return the text it completes (often "" inside a multi-byte character)."""
        self._tokenizer.token_bytes(token_id)  # validates the id before it joins the stream
        self._ids.append(token_id)
        return self._delta(final=False)

    def finish(self) -> str:
        """The text still held back at the end (an incomplete character decodes as U+FFFD)."""
        if self._read_offset == len(self._ids):
            return ""
        return self._delta(final=True)
