"""From a validated request body to the engine requests of its choices, refusing what the engine would.

Limits are checked here, before anything is queued, so a bad request is a 400 naming its field
and never reaches the engine thread. Seeds: a request without ``seed`` gets a fresh random one
(OpenAI's behaviour: unseeded sampling varies), reported in the response so the run can be
repeated; choice ``i`` of ``n`` uses :func:`serving.generation.derived_seed`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Sequence

from engine.sampling_params import MAX_SEED, SamplingParams
from serving.errors import ApiError
from serving.generation import ChoiceSpec, derived_seed
from serving.protocol import ChatRequest, CompletionRequest
from serving.text import NoTokenizer, TextCodec

__all__ = ["Limits", "completion_specs", "chat_specs"]


@dataclass(frozen=True, slots=True)
class Limits:
    """What the engine accepts (read once at start-up)."""

    vocab_size: int
    max_model_len: int
    eos_token_ids: tuple[int, ...]


def _check_prompt(ids: Sequence[int], limits: Limits, param: str) -> None:
    if not ids:
        raise ApiError(400, f"{param}: the prompt is empty", param=param)
    bad = next((t for t in ids if not 0 <= t < limits.vocab_size), None)
    if bad is not None:
        raise ApiError(400, f"{param}: token id {bad} is outside the vocabulary [0, {limits.vocab_size})",
                       param=param)
    if len(ids) >= limits.max_model_len:
        raise ApiError(400, f"{param}: the prompt has {len(ids)} tokens and max_model_len is {limits.max_model_len}; "
                            "a request needs room for at least one produced token", param=param)


def _max_tokens(requested: int | None, prompt_len: int, limits: Limits, param: str) -> int:
    room = limits.max_model_len - prompt_len
    if requested is None:
        return room
    if requested > room:
        raise ApiError(400, f"{param}={requested} is past the limit: the prompt has {prompt_len} tokens and "
                            f"max_model_len is {limits.max_model_len}, so at most {room} can be produced",
                       param=param)
    return requested


def _params(body: CompletionRequest | ChatRequest, max_tokens: int, seed: int, limits: Limits,
            prompt_logits: bool) -> SamplingParams:
    stop_ids = None
    if body.stop_token_ids:
        bad = next((t for t in body.stop_token_ids if t >= limits.vocab_size), None)
        if bad is not None:
            raise ApiError(400, f"stop_token_ids: {bad} is outside the vocabulary [0, {limits.vocab_size})",
                           param="stop_token_ids")
        # in addition to end-of-sequence, as vLLM does (unless ignore_eos)
        eos = () if body.ignore_eos else limits.eos_token_ids
        stop_ids = tuple(sorted(set(body.stop_token_ids) | set(eos)))
    temperature = 1.0 if body.temperature is None else float(body.temperature)
    return SamplingParams(max_tokens=max_tokens, temperature=temperature,
                          top_k=max(0, body.top_k or 0), top_p=1.0 if body.top_p is None else float(body.top_p),
                          seed=seed, stop_token_ids=stop_ids, ignore_eos=body.ignore_eos,
                          prompt_logits=prompt_logits)


def request_seed(body: CompletionRequest | ChatRequest) -> int:
    return body.seed if body.seed is not None else secrets.randbelow(MAX_SEED + 1)


def completion_specs(body: CompletionRequest, codec: TextCodec, limits: Limits, seed: int) -> list[ChoiceSpec]:
    """Choices of a completion request: for each prompt, ``n`` choices (prompt-major, as OpenAI orders them)."""
    specs = []
    for p, prompt in enumerate(body.prompts()):
        param = "prompt" if len(body.prompts()) == 1 else f"prompt.{p}"
        try:
            ids = codec.encode(prompt) if isinstance(prompt, str) else list(prompt)
        except NoTokenizer as exc:
            raise ApiError(400, f"{param}: {exc}", param=param) from None
        _check_prompt(ids, limits, param)
        # echo with max_tokens=0 returns only the prompt: one token is computed and not returned
        wanted = _max_tokens(body.max_tokens, len(ids), limits, "max_tokens")
        prompt_logits = body.prompt_logprobs is not None or (body.echo and body.logprobs is not None)
        num_prompt = body.prompt_logprobs if body.prompt_logprobs is not None else \
            (body.logprobs if prompt_logits else None)
        for i in range(body.n):
            params = _params(body, max(1, wanted), derived_seed(seed, p * body.n + i), limits, prompt_logits)
            specs.append(ChoiceSpec(tuple(ids), params, body.stop_strings, body.logprobs, num_prompt, p))
    return specs


def chat_specs(body: ChatRequest, codec: TextCodec, limits: Limits, seed: int) -> list[ChoiceSpec]:
    """The ``n`` choices of a chat request."""
    try:
        ids = codec.chat_prompt([(m.role, m.text()) for m in body.messages],
                                add_generation_prompt=body.add_generation_prompt)
    except NoTokenizer as exc:
        raise ApiError(400, f"messages: {exc}", param="messages") from None
    _check_prompt(ids, limits, "messages")
    param = "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"
    wanted = _max_tokens(body.output_limit, len(ids), limits, param)
    num_logprobs = (body.top_logprobs or 0) if body.logprobs else None
    prompt_logits = body.prompt_logprobs is not None
    return [ChoiceSpec(tuple(ids), _params(body, wanted, derived_seed(seed, i), limits, prompt_logits), body.stop_strings,
                       num_logprobs, body.prompt_logprobs, 0) for i in range(body.n)]
