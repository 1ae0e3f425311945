"""The OpenAI-compatible completions wire format: request bodies and parsed responses.

Two logprob layouts are read: the legacy completions one (``tokens``, ``token_logprobs``,
``top_logprobs`` keyed by token) that vLLM, SGLang and TGI's router print, and the chat-style
``content`` list (``token``, ``logprob``, ``top_logprobs``, and ``id`` where the server adds it)
that llama.cpp prints. A token is named by its id where the response carries one (vLLM's
``token_id:N`` spelling, an ``id`` field, ``token_ids``) and by its text otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Features", "Position", "Completion", "WireError", "completion_body", "parse_completion", "token_key"]

_TOKEN_ID_PREFIX = "token_id:"


class WireError(ValueError):
    """A response that is not an OpenAI-compatible completion."""


@dataclass(frozen=True, slots=True)
class Features:
    """What the server accepts and returns, as found by :mod:`probing.backend`."""

    token_id_prompts: bool = True
    top_logprobs: int = 0  # top-k returned per position; 0: no logprobs
    ids_in_logprobs: bool = False  # tokens named by id (else by text)
    asks_token_ids: bool = False  # send vLLM's return_tokens_as_token_ids
    echo: bool = False  # echo + logprobs scores the prompt
    seed: bool = False
    chunk_size: int | None = None  # the server's prefill chunk, where known
    max_model_len: int | None = None


@dataclass(frozen=True, slots=True)
class Position:
    """One scored position: the token (``id:N`` or ``text:…``), its logprob and the top-k in server order."""

    token: str
    logprob: float | None
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Completion:
    """What one completion returned, reduced to what the probe compares and witnesses."""

    generated: tuple[Position, ...]
    prompt: tuple[Position, ...] = ()  # echoed prompt positions (position 0 has no logprob)
    text: str = ""
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    fingerprint: str | None = None
    row_digests: tuple[str, ...] = ()
    numbers: tuple[float, ...] = field(default=(), repr=False)  # every logprob as parsed, for the float32 check


def token_key(token: Any, token_id: Any = None) -> str:
    """The comparison key of a token: ``id:N`` when its id is known, else ``text:…``.

    >>> token_key("token_id:17"), token_key("abc", 5), token_key("abc")
    ('id:17', 'id:5', 'text:abc')
    """
    if isinstance(token_id, int) and not isinstance(token_id, bool):
        return f"id:{token_id}"
    text = str(token)
    if text.startswith(_TOKEN_ID_PREFIX) and text[len(_TOKEN_ID_PREFIX):].lstrip("-").isdigit():
        return f"id:{int(text[len(_TOKEN_ID_PREFIX):])}"
    return f"text:{text}"


def completion_body(*, model: str, prompt: list[int] | str, max_tokens: int, features: Features,
                    echo: bool = False, seed: int | None = None, temperature: float = 0.0,
                    extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``/v1/completions`` body asking for as much as ``features`` says the server returns."""
    body: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
                            "stream": False, "n": 1}
    if temperature > 0:
        body["top_p"] = 1.0
    if features.top_logprobs:
        body["logprobs"] = features.top_logprobs
    if features.asks_token_ids:
        body["return_tokens_as_token_ids"] = True
    if echo:
        body["echo"] = True
    if seed is not None:
        body["seed"] = seed
    body.update(extra or {})
    return body


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WireError(f"{where}: logprob {value!r} is not a number")
    return float(value)


def _legacy(lp: dict[str, Any], ids: list[Any] | None) -> tuple[list[Position], list[float]]:
    tokens, values, tops = lp.get("tokens") or [], lp.get("token_logprobs") or [], lp.get("top_logprobs") or []
    if not isinstance(tokens, list) or not isinstance(values, list) or len(values) != len(tokens):
        raise WireError("logprobs.tokens and logprobs.token_logprobs differ in length")
    positions, numbers = [], []
    for i, token in enumerate(tokens):
        value = None if values[i] is None else _number(values[i], f"token_logprobs[{i}]")
        top_raw = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
        top = tuple((token_key(k), _number(v, f"top_logprobs[{i}]")) for k, v in top_raw.items())
        numbers.extend([value] if value is not None else [])
        numbers.extend(v for _, v in top)
        token_id = ids[i] if ids is not None and i < len(ids) else None
        positions.append(Position(token_key(token, token_id), value, top))
    return positions, numbers


def _content(entries: list[Any]) -> tuple[list[Position], list[float]]:
    positions, numbers = [], []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise WireError(f"logprobs.content[{i}] is not an object")
        value = _number(entry.get("logprob"), f"logprobs.content[{i}].logprob")
        top = tuple((token_key(t.get("token"), t.get("id")), _number(t.get("logprob"), f"content[{i}].top_logprobs"))
                    for t in entry.get("top_logprobs") or [] if isinstance(t, dict))
        numbers.append(value)
        numbers.extend(v for _, v in top)
        positions.append(Position(token_key(entry.get("token"), entry.get("id")), value, top))
    return positions, numbers


def parse_completion(data: Any, *, num_prompt: int | None = None, echo: bool = False) -> Completion:
    """The :class:`Completion` of a ``/v1/completions`` response; raises :class:`WireError`.

    With ``echo`` the leading positions are the prompt's: ``num_prompt`` of them when the prompt
    was token ids, else as many as ``usage.prompt_tokens`` says.
    """
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise WireError("the response has no choices")
    choice = data["choices"][0]
    if not isinstance(choice, dict):
        raise WireError("choices[0] is not an object")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
    prompt_tokens = usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else None
    cached = details.get("cached_tokens") if isinstance(details.get("cached_tokens"), int) else None
    ids = choice.get("token_ids") if isinstance(choice.get("token_ids"), list) else None
    lp = choice.get("logprobs")
    if isinstance(lp, dict) and isinstance(lp.get("content"), list):
        positions, numbers = _content(lp["content"])
    elif isinstance(lp, dict) and "tokens" in lp:
        if echo and ids is not None and isinstance(choice.get("prompt_token_ids"), list):
            ids = choice["prompt_token_ids"] + ids
        positions, numbers = _legacy(lp, ids)
    else:
        positions, numbers = [Position(token_key("", t), None) for t in ids or []], []
    split = 0
    if echo:
        split = num_prompt if num_prompt is not None else prompt_tokens
        if split is None or split > len(positions):
            raise WireError("echoed logprobs do not cover the prompt")
    digests = choice.get("row_digests")
    return Completion(generated=tuple(positions[split:]), prompt=tuple(positions[:split]),
                      text=choice.get("text") if isinstance(choice.get("text"), str) else "",
                      prompt_tokens=prompt_tokens, cached_tokens=cached,
                      fingerprint=data.get("system_fingerprint") if isinstance(data.get("system_fingerprint"), str)
                      else None,
                      row_digests=tuple(str(d) for d in digests) if isinstance(digests, list) else (),
                      numbers=tuple(numbers))
