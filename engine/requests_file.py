"""Reading request files: one prompt per line, as comma-separated token ids or a JSON object (torch-free).

A JSON line is ``{"token_ids": [...], "max_tokens": 8, "temperature": 0.7, ...}`` or, with text,
``{"prompt": "Once upon a time", ...}`` (encoded by the caller's tokenizer): any
:class:`~engine.sampling_params.SamplingParams` field overrides the defaults for that request.
Blank lines are skipped. Every error names the file and line.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

from engine.sampling_params import SamplingParams

__all__ = ["RequestsFileError", "parse_token_ids", "read_requests_file"]

_SAMPLING_FIELDS = {f.name for f in fields(SamplingParams)}


class RequestsFileError(ValueError):
    """A request line that cannot be read; the message says where and why."""


def parse_token_ids(text: str) -> list[int]:
    """``"1, 2,3"`` -> ``[1, 2, 3]``; a clear ValueError otherwise."""
    items = [item.strip() for item in text.split(",")]
    if items == [""]:
        raise ValueError("no token ids given")
    try:
        return [int(item) for item in items]
    except ValueError:
        bad = next(item for item in items if not item.lstrip("-").isdigit())
        raise ValueError(f"{bad!r} is not an integer token id (expected comma-separated integers)") from None


def _sampling(defaults: dict[str, Any], overrides: dict[str, Any]) -> SamplingParams:
    return SamplingParams(**{**defaults, **overrides})


def _prompt_ids(obj: dict[str, Any], encode: Callable[[str], list[int]] | None) -> list[int]:
    if ("token_ids" in obj) == ("prompt" in obj):
        raise ValueError("give exactly one of token_ids (a list of integers) or prompt (text)")
    if "prompt" in obj:
        if not isinstance(obj["prompt"], str):
            raise ValueError(f"prompt must be text, got {type(obj['prompt']).__name__}; token ids go in token_ids")
        if encode is None:
            raise ValueError("a text prompt needs a tokenizer")
        return encode(obj["prompt"])
    token_ids = obj["token_ids"]
    if not isinstance(token_ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in token_ids):
        raise ValueError("token_ids must be a list of integers")
    return token_ids


def read_requests_file(path: Path, defaults: dict[str, Any], *, encode: Callable[[str], list[int]] | None = None
                       ) -> list[tuple[list[int], SamplingParams]]:
    """Every request of ``path`` as (prompt token ids, sampling parameters).

    ``encode`` turns a ``"prompt"`` text into token ids; a ValueError it raises is reported with the line.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RequestsFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    requests = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        where = f"{path} line {number}"
        try:
            if text.startswith("{"):
                obj = json.loads(text)
                unknown = sorted(set(obj) - _SAMPLING_FIELDS - {"token_ids", "prompt"})
                if unknown:
                    raise ValueError(f"unknown field(s) {', '.join(unknown)}; known: prompt, token_ids, "
                                     f"{', '.join(sorted(_SAMPLING_FIELDS))}")
                token_ids = _prompt_ids(obj, encode)
                params = _sampling(defaults, {k: v for k, v in obj.items() if k not in ("token_ids", "prompt")})
            else:
                token_ids, params = parse_token_ids(text), _sampling(defaults, {})
        except json.JSONDecodeError as exc:
            raise RequestsFileError(f"{where}: not valid JSON ({exc.msg})") from None
        except (TypeError, ValueError) as exc:
            raise RequestsFileError(f"{where}: {exc}") from None
        requests.append((token_ids, params))
    if not requests:
        raise RequestsFileError(f"{path}: no requests (one prompt per line)")
    return requests
