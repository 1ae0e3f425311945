"""A test server speaking OpenAI-compatible completions, with switchable non-determinism.

Its logits are a deterministic float32 function of the token history. ``perturb`` names the
changes that move them: ``batch`` (another request in flight at the step), ``prefix`` (a cached
prefix was reused), ``chunk`` (a prompt longer than the chunk admitted beside another request),
``prefill`` (prompt positions scored, against decode), ``seed`` (sampling draws depend on the
number in flight), ``serial`` (every request differs). ``lacks`` removes ``logprobs``, ``echo``,
``seed``, ``token_ids`` (token-id prompts) or ``cached_tokens`` (the usage count). ``reports``
adds a running-request count: ``slots`` (llama.cpp's ``/slots``) or ``metrics`` (vLLM's gauge in
``/metrics``); ``max_running`` queues requests beyond that many, as a server with that many slots.
"""

from __future__ import annotations

import asyncio
import hashlib
import zlib
from dataclasses import dataclass, field

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

BLOCK = 8  # prefix-cache block, in tokens


@dataclass(frozen=True)
class FakeConfig:
    """How the fake server behaves."""

    perturb: frozenset[str] = frozenset()
    lacks: frozenset[str] = frozenset()
    vocab: int = 256
    chunk: int = 32
    max_logprobs: int = 20
    step_s: float = 0.003
    model: str = "fake-model"
    busy_after: int | None = None  # answer 503 once, after this many requests for more than 2 tokens
    reports: str | None = None  # "slots" or "metrics"
    max_running: int = 64


def _log_softmax(row: np.ndarray) -> np.ndarray:
    m = row.max()
    return row - (m + np.log(np.sum(np.exp(row - m), dtype=np.float32)))


@dataclass
class FakeServer:
    """The server's state: requests in flight, the prefix cache, a request counter."""

    config: FakeConfig
    in_flight: int = 0
    served: int = 0
    received: int = 0
    was_busy: bool = False
    cache: set = field(default_factory=set)
    admitted: asyncio.Semaphore | None = None

    async def _admit(self) -> None:
        if self.admitted is None:  # created on the server's own event loop
            self.admitted = asyncio.Semaphore(self.config.max_running)
        await self.admitted.acquire()

    def logits(self, context: list[int], shift: int) -> np.ndarray:
        digest = hashlib.blake2b(np.asarray(context, dtype=np.int32).tobytes(), digest_size=8).digest()
        row = (np.random.default_rng(int.from_bytes(digest, "little")).standard_normal(self.config.vocab) * 2
               ).astype(np.float32)
        if shift:
            row[int(row.argmax())] += np.float32(1e-4 * shift)
        return row

    def entry(self, lp: np.ndarray, token: int, k: int, as_ids: bool) -> tuple[str, float, dict[str, float]]:
        name = (lambda t: f"token_id:{t}") if as_ids else (lambda t: f"t{t}")
        order = sorted(range(len(lp)), key=lambda t: (-float(lp[t]), t))[:k]
        return name(token), float(lp[token]), {name(t): float(lp[t]) for t in order}

    def tokenize(self, prompt) -> list[int]:
        if isinstance(prompt, list):
            return [int(t) for t in prompt]
        return [zlib.crc32(w.encode()) % (self.config.vocab - 3) + 3 for w in prompt.split()]

    async def completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        c = self.config
        self.received += int(body.get("max_tokens", 16)) > 2  # the probe's feature checks ask for 1 or 2
        if c.busy_after is not None and self.received == c.busy_after + 1 and not self.was_busy:
            self.was_busy = True
            return JSONResponse({"error": {"message": "busy"}}, status_code=503)
        if isinstance(body.get("prompt"), list) and "token_ids" in c.lacks:
            return JSONResponse({"error": {"message": "prompt must be a string"}}, status_code=400)
        if body.get("echo") and "echo" in c.lacks:
            return JSONResponse({"error": {"message": "echo is not supported"}}, status_code=400)
        if body.get("seed") is not None and "seed" in c.lacks:
            return JSONResponse({"error": {"message": "unknown field: seed"}}, status_code=400)
        k = int(body.get("logprobs") or 0) if "logprobs" not in c.lacks else 0
        if k > c.max_logprobs:
            return JSONResponse({"error": {"message": f"logprobs must be <= {c.max_logprobs}"}}, status_code=400)
        prompt = self.tokenize(body["prompt"])
        isolated = bool(body.get("cache_salt")) or body.get("cache_prompt") is False
        await self._admit()
        self.in_flight += 1
        self.served += 1
        try:
            return JSONResponse(await self._generate(body, prompt, k, isolated))
        finally:
            self.in_flight -= 1
            self.admitted.release()

    async def _generate(self, body: dict, prompt: list[int], k: int, isolated: bool) -> dict:
        c, p = self.config, self.config.perturb
        cached = 0
        if not isolated:
            blocks = [tuple(prompt[:n]) for n in range(BLOCK, len(prompt), BLOCK)]
            cached = max((len(b) for b in blocks if b in self.cache), default=0)
            self.cache.update(blocks)
        base = self.served if "serial" in p else 0
        base += 1 if "prefix" in p and cached else 0
        base += 1 if "chunk" in p and len(prompt) > c.chunk and self.in_flight > 1 else 0
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        temperature, seed = float(body.get("temperature") or 0.0), body.get("seed")
        context, entries = list(prompt), []
        for step in range(int(body.get("max_tokens", 16))):
            await asyncio.sleep(c.step_s)
            shift = base + (1 if "batch" in p and self.in_flight > 1 else 0)
            lp = _log_softmax(self.logits(context, shift))
            if temperature > 0:
                draw = [seed, step, self.in_flight] if "seed" in p and self.in_flight > 1 else [seed, step]
                rng = np.random.default_rng(draw if seed is not None else None)
                probs = np.exp(lp.astype(np.float64) / temperature)
                token = int(rng.choice(c.vocab, p=probs / probs.sum()))
            else:
                token = int(lp.argmax())
            entries.append(self.entry(lp, token, k, as_ids))
            context.append(token)
        if body.get("echo"):
            shift = 1 if "prefill" in p else 0
            echoed = [self.entry(_log_softmax(self.logits(prompt[:i], shift)), prompt[i], k, as_ids) if i
                      else (self.entry(np.zeros(c.vocab, np.float32), prompt[0], 0, as_ids)[0], None, None)
                      for i in range(len(prompt))]
            entries = echoed + entries
        logprobs = None if not k else {
            "tokens": [e[0] for e in entries], "token_logprobs": [e[1] for e in entries],
            "top_logprobs": [e[2] for e in entries], "text_offset": list(range(len(entries)))}
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(context) - len(prompt),
                 "total_tokens": len(context)}
        if "cached_tokens" not in c.lacks:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        text = "".join(f" t{t}" for t in context[len(prompt):])
        return {"id": f"cmpl-{self.served}", "object": "text_completion", "model": c.model,
                "system_fingerprint": "fake-fingerprint-1", "usage": usage,
                "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}]}

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": self.config.model, "object": "model",
                                                         "max_model_len": 4096}]})


    async def slots(self, request: Request) -> JSONResponse:
        return JSONResponse([{"id": i, "is_processing": i < self.in_flight} for i in range(self.config.max_running)])

    async def metrics(self, request: Request) -> PlainTextResponse:
        return PlainTextResponse("# TYPE vllm:num_requests_running gauge\n"
                                 f'vllm:num_requests_running{{model_name="{self.config.model}"}} {self.in_flight}.0\n')


def make_app(config: FakeConfig) -> Starlette:
    """The Starlette app of one fake server."""
    server = FakeServer(config)
    routes = [Route("/v1/completions", server.completions, methods=["POST"]),
              Route("/v1/models", server.models, methods=["GET"])]
    if config.reports == "slots":
        routes.append(Route("/slots", server.slots, methods=["GET"]))
    elif config.reports == "metrics":
        routes.append(Route("/metrics", server.metrics, methods=["GET"]))
    return Starlette(routes=routes)
