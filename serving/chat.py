"""``/v1/chat/completions``: chat format, streamed as SSE or not.

The same extension fields as completions (``token_ids``, ``row_digests``, ``seed`` and vLLM's
``prompt_logprobs`` on each choice); see serving/completions.py.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

from serving.completions import prompt_logprobs_json, prompt_token_count, streamed_token, usage
from serving.events import LogprobEntry
from serving.generation import Generation
from serving.logprobs import json_logprob
from serving.protocol import ChatRequest
from serving.text import TextCodec

__all__ = ["chat_logprobs", "chat_body", "chat_chunks"]


def _item(token: int, logprob: float, codec: TextCodec, as_ids: bool) -> dict[str, Any]:
    return {"token": codec.token_name(token, as_id=as_ids), "logprob": json_logprob(logprob),
            "bytes": codec.token_bytes(token)}


def chat_logprobs(tokens: list[int], entries: list[LogprobEntry | None], codec: TextCodec,
                  as_ids: bool) -> dict[str, Any]:
    """``{"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}``."""
    content = []
    for t, e in zip(tokens, entries):
        assert e is not None
        content.append({**_item(t, e.logprob, codec, as_ids),
                        "top_logprobs": [_item(tt, lp, codec, as_ids) for tt, lp in e.top]})
    return {"content": content}


async def chat_body(body: ChatRequest, gen: Generation, codec: TextCodec, *, model: str, fingerprint: str,
                    created: int) -> dict[str, Any]:
    """The non-streamed response once every choice ended."""
    choices = []
    for i, c in enumerate(gen.choices):
        choice: dict[str, Any] = {
            "index": i, "message": {"role": "assistant", "content": c.text},
            "logprobs": chat_logprobs(c.token_ids, c.logprobs, codec, body.return_tokens_as_token_ids)
            if body.logprobs else None,
            "finish_reason": c.finish_reason, "stop_reason": None, "token_ids": list(c.token_ids),
            "row_digests": await gen.digests(i), "seed": c.spec.params.seed}
        if body.prompt_logprobs is not None:
            choice["prompt_logprobs"] = prompt_logprobs_json(c, body.prompt_logprobs, codec)
        choices.append(choice)
    return {"id": f"chatcmpl-{gen.id}", "object": "chat.completion", "created": created, "model": model,
            "system_fingerprint": fingerprint, "choices": choices, "usage": usage(gen.choices, prompt_token_count(gen))}


async def chat_chunks(body: ChatRequest, gen: Generation, codec: TextCodec, updates: AsyncIterator, *,
                      model: str, fingerprint: str, created: int) -> AsyncIterator[dict[str, Any]]:
    """A role chunk per choice, then one chunk per token, then each choice's end (and usage, if asked)."""
    base = {"id": f"chatcmpl-{gen.id}", "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": fingerprint}
    for i in range(len(gen.choices)):
        yield {**base, "choices": [{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                    "finish_reason": None}]}
    async for index, text, finished, with_token in updates:
        c = gen.choices[index]
        choice: dict[str, Any] = {"index": index, "delta": {"content": text} if text or with_token else {},
                                  "logprobs": None, "finish_reason": c.finish_reason if finished else None,
                                  "token_ids": [], "row_digests": []}
        as_ids = body.return_tokens_as_token_ids
        logprobs = (lambda t, e: chat_logprobs(t, e, codec, as_ids)) if body.logprobs else None
        yield {**base, "choices": [await streamed_token(choice, c, with_token=with_token, finished=finished,
                                                        logprobs=logprobs)]}
    if body.stream_options is not None and body.stream_options.include_usage:
        yield {**base, "choices": [], "usage": usage(gen.choices, prompt_token_count(gen))}
