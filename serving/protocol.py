"""Request bodies of ``/v1/completions`` and ``/v1/chat/completions``, as vLLM accepts them.

Types are strict (``"5"`` is not an integer), so a wrong type is a 400 naming its field.
Unknown fields are accepted and ignored, as vLLM does by default, so clients written for other
servers keep working; the server names them in the ``X-Bitcase-Ignored-Fields`` response
header and logs them. Fields this engine cannot honour (penalties, logit biases, ``suffix``,
``best_of`` other than ``n``) are refused with 400 unless they hold their no-op value.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, model_validator

__all__ = ["CompletionRequest", "ChatRequest", "ChatMessageIn", "StreamOptions", "MAX_LOGPROBS", "MAX_N",
           "ignored_fields"]

MAX_LOGPROBS = 20  # top logprobs per position, as OpenAI and vLLM's default --max-logprobs
MAX_N = 16  # choices per request

Number = Union[StrictInt, StrictFloat]
TokenId = Annotated[StrictInt, Field(ge=0)]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: StrictBool = False


class _Sampling(BaseModel):
    """Fields both endpoints share."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr | None = None
    temperature: Annotated[Number, Field(ge=0)] | None = None  # None: 1.0, as OpenAI
    top_p: Annotated[Number, Field(gt=0, le=1)] | None = None
    top_k: Annotated[StrictInt, Field(ge=-1)] | None = None  # -1 and 0 disable it (vLLM uses -1)
    seed: Annotated[StrictInt, Field(ge=0, le=2**64 - 1)] | None = None
    stop: StrictStr | list[StrictStr] | None = None
    stop_token_ids: list[TokenId] | None = None
    ignore_eos: StrictBool = False
    n: Annotated[StrictInt, Field(ge=1, le=MAX_N)] = 1
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    prompt_logprobs: Annotated[StrictInt, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    return_tokens_as_token_ids: StrictBool = False
    user: StrictStr | None = None
    presence_penalty: Number | None = None
    frequency_penalty: Number | None = None
    repetition_penalty: Number | None = None
    logit_bias: dict[StrictStr, Number] | None = None

    @model_validator(mode="after")
    def _refuse_unsupported(self):
        for name, neutral in (("presence_penalty", 0), ("frequency_penalty", 0), ("repetition_penalty", 1)):
            value = getattr(self, name)
            if value is not None and value != neutral:
                raise ValueError(f"{name}={value} is not supported (penalties are not implemented); "
                                 f"omit it or send {neutral}")
        if self.logit_bias:
            raise ValueError("logit_bias is not supported; omit it")
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed with stream=true")
        if self.prompt_logprobs is not None and self.stream:
            raise ValueError("prompt_logprobs cannot be streamed; send stream=false")
        if isinstance(self.stop, list) and len(self.stop) > 16 or any(not s for s in self.stop_strings):
            raise ValueError("stop takes up to 16 non-empty strings")
        return self

    @property
    def stop_strings(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)


class CompletionRequest(_Sampling):
    """``POST /v1/completions``."""

    prompt: StrictStr | list[TokenId] | list[StrictStr] | list[list[TokenId]]
    max_tokens: Annotated[StrictInt, Field(ge=0)] | None = 16
    logprobs: Annotated[StrictInt, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    echo: StrictBool = False
    suffix: StrictStr | None = None
    best_of: Annotated[StrictInt, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _completion_checks(self):
        if self.suffix:
            raise ValueError("suffix (insertion) is not supported; omit it")
        if self.best_of is not None and self.best_of != self.n:
            raise ValueError(f"best_of={self.best_of} is not supported; omit it or set it to n ({self.n})")
        if isinstance(self.prompt, list) and not self.prompt:
            raise ValueError("prompt is an empty list; give text, token ids or a list of them")
        if self.max_tokens == 0 and (not self.echo or self.stream):
            raise ValueError("max_tokens=0 is only allowed with echo=true and stream=false")
        if self.echo and self.stream and self.logprobs is not None:
            raise ValueError("echo with logprobs cannot be streamed; send stream=false")
        return self

    def prompts(self) -> list[str | list[int]]:
        """The prompts, one per list element (text or token ids)."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if all(isinstance(x, int) for x in p):
            return [list(p)]  # type: ignore[arg-type]
        return list(p)  # type: ignore[arg-type]


class _TextPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text"]
    text: StrictStr


class ChatMessageIn(BaseModel):
    """A chat message; content is text or a list of text parts (other part types are refused)."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: StrictStr | list[_TextPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        return self.content if isinstance(self.content, str) else "".join(part.text for part in self.content)


class ChatRequest(_Sampling):
    """``POST /v1/chat/completions``."""

    messages: Annotated[list[ChatMessageIn], Field(min_length=1)]
    max_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    logprobs: StrictBool = False
    top_logprobs: Annotated[StrictInt, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    add_generation_prompt: StrictBool = True

    @model_validator(mode="after")
    def _chat_checks(self):
        if self.top_logprobs is not None and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs=true")
        return self

    @property
    def output_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


def ignored_fields(request: BaseModel) -> list[str]:
    """Names of the unknown fields a request carried (top level and ``stream_options``), sorted."""
    names = sorted((request.model_extra or {}).keys())
    options = getattr(request, "stream_options", None)
    if options is not None:
        names += sorted(f"stream_options.{k}" for k in (options.model_extra or {}))
    return names
