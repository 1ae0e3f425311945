"""Which server this is and what it accepts: found by asking it, with a few tiny requests.

The backend is named by its own endpoints (``/get_server_info`` SGLang, ``/props`` llama.cpp,
``/info`` TGI, ``/version`` vLLM) unless ``--api`` names it. Features are found by trying them:
token-id prompts, top-k logprobs (and whether they name tokens by id), echo of prompt logprobs,
seeds, a per-request way around the prefix cache, and where the server reports how many requests it
is running (:mod:`probing.server_watch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from probing.client import ProbeClient, ProbeInputError, error_message
from probing.prompts import PromptMaker
from probing.server_watch import Watch, find_watch
from probing.wire import Features, WireError, completion_body, parse_completion

__all__ = ["APIS", "Backend", "detect", "isolation_extra"]

APIS = ("auto", "openai", "vllm", "sglang", "llama.cpp", "tgi")
_INFO_PATHS = (("sglang", "/get_server_info"), ("llama.cpp", "/props"), ("tgi", "/info"), ("vllm", "/version"))
_MAX_REPORTED = 64


@dataclass(frozen=True, slots=True)
class Backend:
    """The server as found: its API flavour, what it reports about itself, and its features."""

    api: str
    version: str | None
    reported: dict[str, Any]
    features: Features
    isolation: str | None = None  # the request field that keeps a request out of the prefix cache
    notes: tuple[str, ...] = field(default=())
    watch: Watch | None = None  # where the server reports how many requests it is running


def isolation_extra(isolation: str | None, unique: str) -> dict[str, Any]:
    """The body fields that keep one request from reading or writing the prefix cache."""
    if isolation == "cache_salt":
        return {"cache_salt": unique}
    if isolation == "cache_prompt":
        return {"cache_prompt": False}
    return {}


def _scalars(data: Any, prefix: str = "") -> dict[str, Any]:
    """Top-level and one-level-nested scalar fields of a server's self-description, bounded."""
    out: dict[str, Any] = {}
    if not isinstance(data, dict):
        return out
    for key in sorted(data, key=str):
        value = data[key]
        if isinstance(value, (str, int, float, bool)) and not (isinstance(value, float) and value != value):
            out[f"{prefix}{key}"] = value[:200] if isinstance(value, str) else value
        elif isinstance(value, dict) and not prefix:
            out.update(_scalars(value, f"{key}."))
    return dict(list(out.items())[:_MAX_REPORTED])


async def _identify(client: ProbeClient, api: str) -> tuple[str, str | None, dict[str, Any]]:
    for name, path in _INFO_PATHS:
        if api not in ("auto", name):
            continue
        status, payload = await client.request("GET", client.endpoint.root + path)
        if status == 200 and isinstance(payload, dict):
            reported = _scalars(payload)
            version = next((str(reported[k]) for k in ("version", "build_info", "build_number") if k in reported), None)
            return name, version, reported
    return ("openai" if api == "auto" else api), None, {}


async def _models(client: ProbeClient, model: str) -> int | None:
    status, payload = await client.request("GET", client.endpoint.api_base + "/models")
    if status == 0:
        raise ProbeInputError(f"cannot reach {client.endpoint.display}: {payload}",
                              hint="check the URL and that the server is up")
    if status in (401, 403):
        raise ProbeInputError(f"{client.endpoint.display} refused the credentials (HTTP {status})",
                              hint="set BITCASE_PROBE_API_KEY (or OPENAI_API_KEY) to the server's API key")
    if status != 200 or not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        return None  # not every server lists its models
    entries = {str(m.get("id")): m for m in payload["data"] if isinstance(m, dict)}
    if entries and model not in entries:
        raise ProbeInputError(f"the server does not serve model {model!r}",
                              hint="it serves: " + ", ".join(sorted(entries)[:10]))
    length = entries.get(model, {}).get("max_model_len")
    return length if isinstance(length, int) else None


async def _try(client: ProbeClient, body: dict[str, Any], **parse: Any):
    status, payload = await client.request("POST", client.endpoint.api_base + "/completions", body)
    if status != 200:
        return None, f"HTTP {status}: {error_message(payload)}" if status else str(payload)
    try:
        return parse_completion(payload, **parse), ""
    except WireError as exc:
        return None, str(exc)


async def detect(client: ProbeClient, *, api: str, model: str, top_k: int, vocab: int, seed: int,
                 chunk_size: int | None = None) -> Backend:
    """Identify the server and try each feature once; raises :class:`ProbeInputError` when it cannot be probed."""
    max_len = await _models(client, model)
    name, version, reported = await _identify(client, api)
    notes: list[str] = []
    prompts = PromptMaker(seed=seed ^ 0x5EED, vocab=vocab, token_ids=True)
    f = Features(token_id_prompts=True, chunk_size=chunk_size, max_model_len=max_len)
    base = completion_body(model=model, prompt=prompts.make(4), max_tokens=2, features=f)
    got, why = await _try(client, base)
    if got is None:
        f = replace(f, token_id_prompts=False)
        notes.append(f"token-id prompts refused ({why}): text prompts, with the server's tokenizer in the loop")
        base = {**base, "prompt": PromptMaker(seed=seed ^ 0x5EED, vocab=vocab, token_ids=False).make(4)}
        got, why = await _try(client, base)
        if got is None:
            raise ProbeInputError(f"{client.endpoint.display} answered no plain completion request ({why})",
                                  hint="check --model and that the server offers /v1/completions")
    for k, ask_ids in ((top_k, True), (top_k, False), (5, False), (1, False)):
        trial = replace(f, top_logprobs=min(k, top_k), asks_token_ids=ask_ids)
        got, why = await _try(client, completion_body(model=model, prompt=base["prompt"], max_tokens=2, features=trial))
        if got is not None and got.generated and all(p.logprob is not None for p in got.generated):
            returned = min(len(p.top) for p in got.generated)
            f = replace(trial, top_logprobs=max(1, min(returned, trial.top_logprobs)),
                        ids_in_logprobs=all(p.token.startswith("id:") for p in got.generated))
            break
    else:
        notes.append("no logprobs returned: only tokens or text are compared")
    if f.top_logprobs:
        num_prompt = len(base["prompt"]) if f.token_id_prompts else None
        got, why = await _try(client, completion_body(model=model, prompt=base["prompt"], max_tokens=1, features=f,
                                                      echo=True), num_prompt=num_prompt, echo=True)
        f = replace(f, echo=got is not None and len(got.prompt) > 1)
        if not f.echo:
            notes.append(f"echo with logprobs not available ({why or 'no prompt logprobs'}): prefill is not scored")
    got, why = await _try(client, completion_body(model=model, prompt=base["prompt"], max_tokens=2, features=f,
                                                  seed=1234, temperature=1.0))
    f = replace(f, seed=got is not None)
    if not f.seed:
        notes.append(f"per-request seeds refused ({why})")
    isolation = {"vllm": "cache_salt", "openai": "cache_salt", "llama.cpp": "cache_prompt"}.get(name)
    if isolation is not None:
        got, why = await _try(client, {**base, **isolation_extra(isolation, "bitcase-probe-check")})
        if got is None:
            notes.append(f"{isolation} refused ({why}): repeats may reuse the prefix cache")
            isolation = None
    watch = await find_watch(client)
    if watch is None:
        notes.append("no running-request count (/slots or a /metrics gauge): overlap is seen from the client only")
    return Backend(name, version, reported, f, isolation, tuple(notes), watch)
