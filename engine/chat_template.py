"""Rendering Hugging Face chat templates the way transformers does (torch-free).

transformers compiles ``chat_template`` in a Jinja2 ``ImmutableSandboxedEnvironment`` with
``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols`` extension, a ``tojson`` filter that
keeps non-ASCII text, and the globals ``raise_exception`` and ``strftime_now``; it passes
``messages`` (a list of ``{"role", "content"}`` objects), ``add_generation_prompt`` and the special
tokens (``bos_token``, ``eos_token``, ...). The same here, so a checkpoint's template renders the
same text under bitcase as under transformers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, NoReturn, Sequence

__all__ = ["ChatMessage", "ChatTemplateError", "render_chat_template"]


class ChatTemplateError(ValueError):
    """A template that does not compile or raises while rendering; the message says why."""


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a conversation."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or not self.role:
            raise ValueError(f"a chat message's role must be a non-empty string, got {self.role!r}")
        if not isinstance(self.content, str):
            raise ValueError(f"a chat message's content must be a string, got {type(self.content).__name__}")


def _raise_exception(message: str) -> NoReturn:
    raise ChatTemplateError(f"the chat template refused the messages: {message}")


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=8)
def _compile(source: str) -> Any:
    from jinja2 import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except TemplateError as exc:
        raise ChatTemplateError(f"the chat template does not compile: {exc}") from None


def render_chat_template(source: str, messages: Sequence[ChatMessage], *, add_generation_prompt: bool,
                         special_tokens: dict[str, str]) -> str:
    """Render ``source`` for ``messages``; ``special_tokens`` maps e.g. ``bos_token`` to its text."""
    from jinja2 import TemplateError

    template = _compile(source)
    turns = [{"role": m.role, "content": m.content} for m in messages]
    try:
        return template.render(messages=turns, add_generation_prompt=add_generation_prompt, tools=None,
                               documents=None, **special_tokens)
    except ChatTemplateError:
        raise
    except (TemplateError, ArithmeticError, AttributeError, LookupError, TypeError, ValueError) as exc:
        # A template is code shipped with the checkpoint: whatever it raises is its failure, not ours.
        raise ChatTemplateError(f"the chat template failed while rendering: {exc}") from None
