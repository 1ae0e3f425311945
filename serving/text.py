"""Text in and out: the checkpoint's tokenizer when it has one, token ids only otherwise.

Without ``tokenizer.json`` the server still serves token-id prompts (as vLLM's
``--skip-tokenizer-init``): text prompts and chat are refused with 400, produced text is empty
and tokens are named ``token_id:N``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

__all__ = ["TextCodec", "NoTokenizer", "load_codec"]


class NoTokenizer(ValueError):
    """A text feature was asked of a model served without a tokenizer."""


class _NoText:
    def push(self, token_id: int) -> str:
        return ""

    def finish(self) -> str:
        return ""


class TextCodec:
    """Encoding prompts, decoding produced tokens, naming tokens in logprobs."""

    def __init__(self, tokenizer: Any | None) -> None:
        self.tokenizer = tokenizer

    @property
    def has_text(self) -> bool:
        return self.tokenizer is not None

    @property
    def digest(self) -> str | None:
        return None if self.tokenizer is None else self.tokenizer.digest

    def _need(self, what: str) -> Any:
        if self.tokenizer is None:
            raise NoTokenizer(f"{what} needs a tokenizer and this model directory has none (tokenizer.json); "
                              "send token ids instead")
        return self.tokenizer

    def encode(self, text: str) -> list[int]:
        """A text prompt's token ids (with the tokenizer's special tokens, e.g. BOS)."""
        return self._need("a text prompt").encode(text, add_special_tokens=True)

    def chat_prompt(self, messages: Sequence[tuple[str, str]], *, add_generation_prompt: bool) -> list[int]:
        """Token ids of ``(role, content)`` messages rendered by the checkpoint's chat template."""
        from engine.tokenizer import ChatMessage

        tok = self._need("chat")
        if not tok.has_chat_template:
            raise NoTokenizer("this model's tokenizer has no chat template; use /v1/completions")
        text = tok.apply_chat_template([ChatMessage(r, c) for r, c in messages],
                                       add_generation_prompt=add_generation_prompt)
        return tok.encode(text, add_special_tokens=False)  # the template writes its own special tokens

    def decode(self, token_ids: Sequence[int]) -> str:
        return "" if self.tokenizer is None else self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def stream(self) -> Any:
        """An incremental decoder: ``push(token_id) -> newly complete text``, ``finish() -> the rest``."""
        if self.tokenizer is None:
            return _NoText()
        from engine.detokenize import DetokenizeStream

        return DetokenizeStream(self.tokenizer)

    def token_name(self, token_id: int, *, as_id: bool) -> str:
        """How a token is named in logprobs: its text, or ``token_id:N``."""
        if as_id or self.tokenizer is None:
            return f"token_id:{token_id}"
        return self.tokenizer.token_text(token_id)

    def token_bytes(self, token_id: int) -> list[int] | None:
        return None if self.tokenizer is None else list(self.tokenizer.token_bytes(token_id))


def load_codec(model_dir: Path) -> TextCodec:
    """The checkpoint's tokenizer, or none when the directory has no ``tokenizer.json``."""
    if not (Path(model_dir) / "tokenizer.json").is_file():
        return TextCodec(None)
    from engine.tokenizer import Tokenizer

    return TextCodec(Tokenizer.from_dir(model_dir))
