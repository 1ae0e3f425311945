"""The FastAPI application: routes, error mapping, SSE framing, ignored-field reporting.

Routes: ``GET /v1/models``, ``POST /v1/completions``, ``POST /v1/chat/completions``,
``GET /health``, ``GET /metrics`` and ``GET /bitcase/deployment`` (D, its digest, the sealed
plan digest, the start-up checks). Every error body is OpenAI's ``{"error": {...}}``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from serving.chat import chat_body, chat_chunks
from serving.completions import completion_body, completion_chunks
from serving.engine_loop import EngineLoop, Overloaded, Unavailable
from serving.errors import ApiError, error_body, error_response, validation_error
from serving.generation import Generation
from serving.metrics import Metrics
from serving.protocol import ChatRequest, CompletionRequest, ignored_fields
from serving.requests import Limits, chat_specs, completion_specs, request_seed
from serving.text import TextCodec

__all__ = ["ServerState", "build_app", "IGNORED_FIELDS_HEADER"]

IGNORED_FIELDS_HEADER = "X-Bitcase-Ignored-Fields"
log = logging.getLogger("bitcase.serve")


@dataclass(slots=True)
class ServerState:
    """What the routes read: the engine loop, text codec, names, D and the start-up checks."""

    loop: EngineLoop
    codec: TextCodec
    model_name: str
    limits: Limits
    deployment_digest: str
    deployment_fields: dict[str, Any]
    plan_digest: str
    metrics: Metrics
    startup_checks: list[dict[str, Any]] = field(default_factory=list)
    started: int = field(default_factory=lambda: int(time.time()))


def _json(data: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=headers)


def _sse(chunks: AsyncIterator[dict[str, Any]], on_close: Callable[[], None]) -> AsyncIterator[bytes]:
    async def frames() -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                yield f"data: {json.dumps(chunk, allow_nan=False)}\n\n".encode()
            yield b"data: [DONE]\n\n"
        finally:  # the client went away or the stream ended: nothing stays queued in the engine
            on_close()
    return frames()


def build_app(state: ServerState) -> FastAPI:
    """The application serving ``state``."""
    app = FastAPI(title="bitcase serve", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        err = validation_error(list(exc.errors()))
        state.metrics.count_request(request.url.path, 400)
        return error_response(err)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        state.metrics.count_request(request.url.path, exc.status)
        return error_response(exc)

    @app.exception_handler(404)
    async def _not_found(request: Request, exc: Exception) -> JSONResponse:
        return _json(error_body(404, f"no route {request.method} {request.url.path}"), 404)

    @app.exception_handler(405)
    async def _not_allowed(request: Request, exc: Exception) -> JSONResponse:
        return _json(error_body(405, f"method {request.method} is not allowed on {request.url.path}"), 405)

    def _model_card() -> dict[str, Any]:
        return {"id": state.model_name, "object": "model", "created": state.started, "owned_by": "bitcase",
                "max_model_len": state.limits.max_model_len}

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return _json({"object": "list", "data": [_model_card()]})

    @app.get("/health")
    async def health() -> JSONResponse:
        if state.loop.is_healthy:
            return _json({"status": "ok"})
        return _json(error_body(503, state.loop.unavailable_reason()), 503)

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        state.metrics.set_pending(state.loop.num_pending)
        return PlainTextResponse(state.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/bitcase/deployment")
    async def deployment() -> JSONResponse:
        return _json({"deployment_digest": state.deployment_digest, "plan_digest": state.plan_digest,
                      "model": state.model_name, "tokenizer_digest": state.codec.digest,
                      "startup_checks": state.startup_checks, "deployment": state.deployment_fields,
                      "engine": state.metrics.engine_state()})

    async def _generate(request: Request, body: Any, endpoint: str) -> Any:
        if body.model is not None and body.model != state.model_name:
            raise ApiError(404, f"model {body.model!r} is not served here; this server serves {state.model_name!r}",
                           param="model", code="model_not_found")
        ignored = ignored_fields(body)
        headers = {IGNORED_FIELDS_HEADER: ", ".join(ignored)} if ignored else {}
        if ignored:
            log.warning("%s: ignored unknown field(s) %s", endpoint, ", ".join(ignored))
        seed = request_seed(body)
        make = completion_specs if isinstance(body, CompletionRequest) else chat_specs
        specs = make(body, state.codec, state.limits, seed)
        gen = Generation(state.loop, state.codec, specs)
        try:
            gen.submit()
        except Overloaded as exc:
            raise ApiError(429, str(exc), code="queue_full") from None
        except Unavailable as exc:
            raise ApiError(503, str(exc), code="unavailable") from None
        created = int(time.time())
        names = {"model": state.model_name, "fingerprint": state.deployment_digest, "created": created}
        if body.stream:
            state.metrics.count_request(endpoint, 200)
            chunks = (completion_chunks if isinstance(body, CompletionRequest) else chat_chunks)(
                body, gen, state.codec, gen.updates(request.is_disconnected), **names)
            return StreamingResponse(_sse(chunks, gen.cancel_unfinished), media_type="text/event-stream",
                                     headers={**headers, "Cache-Control": "no-cache"})
        async for _ in gen.updates(request.is_disconnected):
            pass
        failed = next((c.error for c in gen.choices if c.error is not None), None)
        if failed is not None:
            raise ApiError(400 if failed.is_client_error else 500, failed.message, code=failed.code)
        if any(c.finish_reason is None for c in gen.choices):  # the client went away
            state.metrics.count_request(endpoint, 499)
            return _json(error_body(499, "the client disconnected; the request was cancelled"), 499)
        make_body = completion_body if isinstance(body, CompletionRequest) else chat_body
        state.metrics.count_request(endpoint, 200)
        return _json(await make_body(body, gen, state.codec, **names), headers=headers)

    @app.post("/v1/completions")
    async def completions(request: Request, body: CompletionRequest) -> Any:
        return await _generate(request, body, "/v1/completions")

    @app.post("/v1/chat/completions")
    async def chat(request: Request, body: ChatRequest) -> Any:
        return await _generate(request, body, "/v1/chat/completions")

    return app
