"""A checkpoint's Hugging Face tokenizer: text to token ids and back (torch-free).

Reads ``tokenizer.json`` with the ``tokenizers`` library (the file transformers' fast tokenizers
and vLLM load) and, when present, ``tokenizer_config.json`` (special tokens, chat template),
``chat_template.jinja`` and ``generation_config.json`` (end-of-sequence ids). Special tokens are
added by tokenizer.json's post-processor, as ``tokenizers`` and transformers' fast tokenizers do.

The tokenizer sits outside the determinism claim: the engine's claim is about token ids. Its
files' digest names which tokenizer turned a text into the ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from engine.byte_pieces import decoder_kind, display_text, piece_bytes
from engine.chat_template import ChatMessage, ChatTemplateError, render_chat_template
from evidence_db.canonical import digest_of, sha256_digest

__all__ = ["Tokenizer", "TokenizerError", "ChatMessage", "TOKENIZER_FILE", "TOKENIZER_FILES"]

TOKENIZER_FILE = "tokenizer.json"
# Every file whose bytes can change what the Tokenizer does (config.json is in D's config digest).
TOKENIZER_FILES = ("chat_template.jinja", "generation_config.json", "special_tokens_map.json", TOKENIZER_FILE,
                   "tokenizer_config.json")
_MAKE_HINT = "write one with `bitcase model tokenizer DIR` or copy the model's tokenizer files into DIR"


class TokenizerError(ValueError):
    """A tokenizer that cannot be loaded or used; the message names the file, what is wrong and the fix."""


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; {} when there is no such file (every one but tokenizer.json is optional)."""
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokenizerError(f"{path}: not readable JSON ({exc}); restore the file from the model's release") from None
    if not isinstance(value, dict):
        raise TokenizerError(f"{path}: the top level must be a JSON object")
    return value


def _token_content(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken object."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _id_list(value: Any) -> list[int]:
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, int) and not isinstance(v, bool) and v >= 0]


def _chat_template(model_dir: Path, config: dict[str, Any]) -> str | None:
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: transformers uses the one called "default"
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if isinstance(template, str):
        return template
    path = model_dir / "chat_template.jinja"
    if path.is_file():
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenizerError(f"{path}: not readable as UTF-8 text ({exc})") from None
    return None


class Tokenizer:
    """The tokenizer of one checkpoint directory; build it with :meth:`from_dir`."""

    def __init__(self, model_dir: Path, backend: Any, *, decoder: dict[str, Any] | None, config: dict[str, Any],
                 generation: dict[str, Any], model_config: dict[str, Any], digest: str) -> None:
        self.model_dir = model_dir
        self._backend = backend
        self._path = model_dir / TOKENIZER_FILE
        self.digest = digest
        self.vocab_size: int = backend.get_vocab_size(with_added_tokens=True)
        self._added = {i: t for i, t in backend.get_added_tokens_decoder().items()}
        self._special_ids = frozenset(i for i, t in self._added.items() if t.special)
        self._decoder_kind = decoder_kind(decoder)
        self._special_text = {k: c for k in ("bos_token", "eos_token", "unk_token", "pad_token")
                              if (c := _token_content(config.get(k))) is not None}
        bos = self._known_id(self._special_text.get("bos_token"))
        if bos is None:
            bos = next(iter(_id_list(generation.get("bos_token_id")) + _id_list(model_config.get("bos_token_id"))),
                       None)
        self.bos_token_id: int | None = bos
        eos: list[int] = []
        for candidate in ([self._known_id(self._special_text.get("eos_token"))]
                          + _id_list(generation.get("eos_token_id")) + _id_list(model_config.get("eos_token_id"))):
            if candidate is not None and candidate not in eos:
                eos.append(candidate)
        self.eos_token_ids: tuple[int, ...] = tuple(eos)
        self._chat_template = _chat_template(model_dir, config)

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> Tokenizer:
        """Load the tokenizer files of ``model_dir``; TokenizerError names what is missing or broken."""
        from tokenizers import Tokenizer as Backend

        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise TokenizerError(f"model directory {model_dir} does not exist")
        path = model_dir / TOKENIZER_FILE
        if not path.is_file():
            raise TokenizerError(f"{model_dir} has no {TOKENIZER_FILE}: text prompts need the checkpoint's Hugging Face "
                                 f"tokenizer ({_MAKE_HINT.replace('DIR', str(model_dir))}); token ids work without it")
        try:
            backend = Backend.from_file(str(path))
        except Exception as exc:  # the Rust loader raises a bare Exception on any malformed field
            raise TokenizerError(f"{path}: not a tokenizer the `tokenizers` library can load ({exc})") from None
        config = _read_json(model_dir / "tokenizer_config.json")
        generation = _read_json(model_dir / "generation_config.json")
        model_config = _read_json(model_dir / "config.json")
        files = {name: sha256_digest((model_dir / name).read_bytes())
                 for name in TOKENIZER_FILES if (model_dir / name).is_file()}
        decoder = None if backend.decoder is None else json.loads(backend.decoder.__getstate__())
        return cls(model_dir, backend, decoder=decoder, config=config, generation=generation,
                   model_config=model_config, digest=digest_of({"tokenizer_files": files}))

    def _known_id(self, content: str | None) -> int | None:
        return None if content is None else self._backend.token_to_id(content)

    def _check_ids(self, token_ids: Sequence[int]) -> None:
        for t in token_ids:
            if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < self.vocab_size:
                raise TokenizerError(f"token id {t!r} is outside the vocabulary of {self._path} "
                                     f"(ids 0..{self.vocab_size - 1})")

    @property
    def has_chat_template(self) -> bool:
        """Whether tokenizer_config.json (or chat_template.jinja) carries a chat template."""
        return self._chat_template is not None

    @property
    def special_token_ids(self) -> frozenset[int]:
        """Ids of the tokens tokenizer.json marks special (skipped by ``skip_special_tokens``)."""
        return self._special_ids

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``; ``add_special_tokens`` applies tokenizer.json's post-processor (e.g. a BOS)."""
        if not isinstance(text, str):
            raise TokenizerError(f"text to encode must be a string, got {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise TokenizerError(f"text is not valid Unicode at character {exc.start} "
                                 f"({text[exc.start]!r} is a lone surrogate); send UTF-8 text") from None
        return list(self._backend.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, token_ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """The text of ``token_ids``; bytes that are not valid UTF-8 become U+FFFD, as in transformers."""
        self._check_ids(token_ids)
        return self._backend.decode(list(token_ids), skip_special_tokens=skip_special_tokens)

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes of one token (a special token's are its text's UTF-8 bytes)."""
        self._check_ids([token_id])
        added = self._added.get(token_id)
        if added is not None:
            return added.content.encode("utf-8")
        piece = self._backend.id_to_token(token_id)
        data = None if piece is None else piece_bytes(piece, self._decoder_kind)
        if data is None:  # a decoder without a byte rule (e.g. WordPiece): the token's decoded text
            data = self._backend.decode([token_id], skip_special_tokens=False).encode("utf-8")
        return data

    def token_text(self, token_id: int) -> str:
        """One token's text as logprobs show it; a piece that is not valid UTF-8 as ``bytes:\\xe2...``."""
        return display_text(self.token_bytes(token_id))

    def apply_chat_template(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool = True) -> str:
        """The prompt text of a conversation, rendered as transformers renders the checkpoint's template.

        The text already holds the template's special tokens (e.g. the BOS): encode it with
        ``add_special_tokens=False``, as transformers' ``apply_chat_template(tokenize=True)`` does.
        """
        if self._chat_template is None:
            raise TokenizerError(f"{self.model_dir / 'tokenizer_config.json'} has no chat_template; add one "
                                 "(a Jinja template as transformers uses) or send a plain-text prompt")
        if not messages:
            raise TokenizerError("a conversation needs at least one message")
        for m in messages:
            if not isinstance(m, ChatMessage):
                raise TokenizerError(f"messages must be ChatMessage objects, got {type(m).__name__}")
        try:
            return render_chat_template(self._chat_template, messages, add_generation_prompt=add_generation_prompt,
                                        special_tokens=self._special_text)
        except ChatTemplateError as exc:
            raise TokenizerError(f"{self.model_dir / 'tokenizer_config.json'}: {exc}") from None
