"""``/v1/completions``: the legacy completion format, streamed as SSE or not.

Extension fields, ignored by clients that do not know them: ``choices[i].token_ids`` (produced
ids), ``choices[i].row_digests`` (the ``sha256:`` digest of each produced token's full float32
logit row, so a client can compare whole rows, not only the top 20), ``choices[i].seed`` and
vLLM's ``choices[i].prompt_logprobs``.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable

from serving.errors import error_body
from serving.events import LogprobEntry
from serving.generation import ChoiceState, Generation, row_digest
from serving.logprobs import json_logprob
from serving.protocol import CompletionRequest
from serving.text import TextCodec

__all__ = ["legacy_logprobs", "prompt_logprobs_json", "completion_body", "completion_chunks", "streamed_token",
           "usage", "prompt_token_count"]


def _top_dict(entry: LogprobEntry, codec: TextCodec, as_ids: bool) -> dict[str, float | None]:
    top = {codec.token_name(t, as_id=as_ids): json_logprob(lp) for t, lp in entry.top}
    top.setdefault(codec.token_name(entry.token, as_id=as_ids), json_logprob(entry.logprob))  # vLLM adds the chosen one
    return top


def legacy_logprobs(tokens: list[int], entries: list[LogprobEntry | None], codec: TextCodec, as_ids: bool,
                    offset: int = 0) -> dict[str, Any]:
    """``{tokens, token_logprobs, top_logprobs, text_offset}``; an entry of None (the first prompt token) is null."""
    names = [codec.token_name(t, as_id=as_ids) for t in tokens]
    offsets, at = [], offset
    for name in names:
        offsets.append(at)
        at += len(name)
    return {"tokens": names, "token_logprobs": [None if e is None else json_logprob(e.logprob) for e in entries],
            "top_logprobs": [None if e is None else _top_dict(e, codec, as_ids) for e in entries],
            "text_offset": offsets}


def prompt_logprobs_json(choice: ChoiceState, k: int, codec: TextCodec) -> list[Any]:
    """vLLM's ``prompt_logprobs``: null for the first token, then ``{id: {logprob, rank, decoded_token}}``."""
    out: list[Any] = [None]
    for e in choice.prompt_logprobs:
        ranked = {e.token: (e.logprob, e.rank)}
        for rank, (t, lp) in enumerate(e.top[:k], 1):
            ranked.setdefault(t, (lp, rank))
        out.append({str(t): {"logprob": json_logprob(lp), "rank": r,
                             "decoded_token": codec.token_name(t, as_id=False)} for t, (lp, r) in ranked.items()})
    return out


def usage(choices: list[ChoiceState], num_prompt_tokens: int) -> dict[str, Any]:
    completion = sum(len(c.token_ids) for c in choices)
    cached = sum(c.num_cached_tokens for c in choices)
    return {"prompt_tokens": num_prompt_tokens, "completion_tokens": completion,
            "total_tokens": num_prompt_tokens + completion, "prompt_tokens_details": {"cached_tokens": cached}}


def prompt_token_count(gen: Generation) -> int:
    seen: dict[int, int] = {}
    for c in gen.choices:
        seen[c.spec.prompt_index] = len(c.spec.prompt_token_ids)
    return sum(seen.values())


async def completion_body(body: CompletionRequest, gen: Generation, codec: TextCodec, *, model: str,
                          fingerprint: str, created: int) -> dict[str, Any]:
    """The non-streamed response once every choice ended."""
    choices = []
    echo_only = body.max_tokens == 0
    for i, c in enumerate(gen.choices):
        tokens, texts, entries = ([], [], []) if echo_only else (c.token_ids, c.texts, c.logprobs)
        if echo_only:
            c.token_ids = []
        digests = [] if echo_only else await gen.digests(i)
        text = "".join(texts)
        prompt = list(c.spec.prompt_token_ids)
        prompt_text = codec.decode(prompt) if body.echo else ""
        logprobs = None
        if body.logprobs is not None:
            if body.echo:
                prompt_entries = [None, *c.prompt_logprobs]
                logprobs = legacy_logprobs(prompt + tokens, prompt_entries + entries, codec,
                                           body.return_tokens_as_token_ids)
            else:
                logprobs = legacy_logprobs(tokens, entries, codec, body.return_tokens_as_token_ids)
        choice: dict[str, Any] = {"index": i, "text": prompt_text + text, "logprobs": logprobs,
                                  "finish_reason": "length" if echo_only else c.finish_reason,
                                  "stop_reason": None, "token_ids": list(tokens), "row_digests": digests,
                                  "seed": c.spec.params.seed}
        if body.prompt_logprobs is not None:
            choice["prompt_logprobs"] = prompt_logprobs_json(c, body.prompt_logprobs, codec)
        choices.append(choice)
    return {"id": f"cmpl-{gen.id}", "object": "text_completion", "created": created, "model": model,
            "system_fingerprint": fingerprint, "choices": choices,
            "usage": usage(gen.choices, prompt_token_count(gen))}


async def streamed_token(choice: dict[str, Any], c: ChoiceState, *, with_token: bool, finished: bool,
                         logprobs: Callable[[list[int], list[Any]], Any] | None) -> dict[str, Any]:
    """Fill one streamed chunk's choice: the produced token, its row digest, its logprobs
    (``logprobs(tokens, entries)`` in the endpoint's format; None: not asked) and, at its end, the seed."""
    if with_token:
        pos = len(c.token_ids) - 1
        choice["token_ids"] = [c.token_ids[pos]]
        choice["row_digests"] = [await row_digest(c.digests[pos])]
        if logprobs is not None:
            choice["logprobs"] = logprobs([c.token_ids[pos]], [c.logprobs[pos]])
    if finished:
        choice["seed"] = c.spec.params.seed
    if finished and c.error is not None:  # the stream says why this choice ended with "error"
        choice["error"] = error_body(400 if c.error.is_client_error else 500, c.error.message,
                                     code=c.error.code)["error"]
    return choice


async def completion_chunks(body: CompletionRequest, gen: Generation, codec: TextCodec, updates: AsyncIterator,
                            *, model: str, fingerprint: str, created: int) -> AsyncIterator[dict[str, Any]]:
    """The streamed chunks: the echoed prompt first (with echo), then one chunk per token, then the ends."""
    base = {"id": f"cmpl-{gen.id}", "object": "text_completion", "created": created, "model": model,
            "system_fingerprint": fingerprint}
    if body.echo:
        for i, c in enumerate(gen.choices):
            yield {**base, "choices": [{"index": i, "text": codec.decode(list(c.spec.prompt_token_ids)),
                                        "logprobs": None, "finish_reason": None}]}
    async for index, text, finished, with_token in updates:
        c = gen.choices[index]
        choice: dict[str, Any] = {"index": index, "text": text, "logprobs": None,
                                  "finish_reason": c.finish_reason if finished else None,
                                  "token_ids": [], "row_digests": []}
        as_ids = body.return_tokens_as_token_ids
        logprobs = None if body.logprobs is None else (lambda t, e: legacy_logprobs(t, e, codec, as_ids))
        yield {**base, "choices": [await streamed_token(choice, c, with_token=with_token, finished=finished,
                                                        logprobs=logprobs)]}
    if body.stream_options is not None and body.stream_options.include_usage:
        yield {**base, "choices": [], "usage": usage(gen.choices, prompt_token_count(gen))}
