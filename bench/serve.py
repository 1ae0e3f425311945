"""HTTP (`bitcase serve`, streamed, one client per request) against the engine called directly, same workload.

    python -m bench.serve --model DIR [--requests 64] [--concurrency 4] [--prompt-len 32] [--max-tokens 64]
                          [--device cuda --cuda-graphs] [--repeats 3]

Reports medians over alternating runs of tokens/s and requests/s for both, the HTTP/direct ratio of
each pair, and p50/p99 time to first token (HTTP: first streamed token at the client, which runs in
a process of its own; direct: first produced token after submission). The server's engine and the
direct engine are separate instances over the same checkpoint and configuration.
Greedy, ignore_eos, token-id prompts: both sides do exactly the same engine work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import queue
import statistics
import threading
import time
from pathlib import Path


def _prompts(n: int, length: int, vocab: int) -> list[list[int]]:
    return [[(97 * i + 13 * j + 3) % (vocab - 3) + 3 for j in range(length)] for i in range(n)]


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def direct(model: Path, config, prompts, max_tokens: int, concurrency: int) -> dict:
    from engine.llm_engine import LLMEngine
    from engine.sampling_params import SamplingParams

    engine = LLMEngine(model, config)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    queue, ttft, tokens = list(prompts), [], 0
    started, submitted, first = time.perf_counter(), {}, set()
    while queue or engine.has_unfinished():
        # at most `concurrency` requests in the engine, as the HTTP side's clients
        while queue and len(engine.scheduler.running) + len(engine.scheduler.waiting) < concurrency:
            rid = engine.add_request(queue.pop(0), params)
            submitted[rid] = time.perf_counter()
        result = engine.step()
        for p in result.produced:
            tokens += 1
            if p.request_id not in first:
                first.add(p.request_id)
                ttft.append(time.perf_counter() - submitted[p.request_id])
    elapsed = time.perf_counter() - started
    return {"tokens_per_s": tokens / elapsed, "requests_per_s": len(prompts) / elapsed,
            "ttft_p50_ms": 1e3 * _pct(ttft, 0.5), "ttft_p99_ms": 1e3 * _pct(ttft, 0.99), "tokens": tokens}


def _client_process(url: str, prompts, max_tokens: int, concurrency: int, results) -> None:
    """The HTTP clients, in a process of their own (as real clients are): streams every prompt."""
    import httpx

    ttft: list[float] = []
    counts = [0]

    async def one(client, prompt) -> None:
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True}
        sent = time.perf_counter()
        async with client.stream("POST", url, json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    n = len(json.loads(line[6:])["choices"][0].get("token_ids", []))
                    counts[0] += n
                    if n and sent:
                        ttft.append(time.perf_counter() - sent)
                        sent = 0.0

    async def run() -> float:
        sem = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(timeout=300) as client:
            async def guarded(p):
                async with sem:
                    await one(client, p)
            t0 = time.perf_counter()
            await asyncio.gather(*(guarded(p) for p in prompts))
            return time.perf_counter() - t0

    elapsed = asyncio.run(run())
    results.put({"tokens_per_s": counts[0] / elapsed, "requests_per_s": len(prompts) / elapsed,
                 "ttft_p50_ms": 1e3 * _pct(ttft, 0.5), "ttft_p99_ms": 1e3 * _pct(ttft, 0.99), "tokens": counts[0]})


class Server:
    """`bitcase serve`'s app on 127.0.0.1 (ephemeral port) in a thread of this process."""

    def __init__(self, model: Path, config) -> None:
        from serving.server import ServeSettings, make_uvicorn, prepare

        settings = ServeSettings(model_dir=model, config=config, port=0, model_name="bench", startup_checks=False)
        app, self.loop = prepare(settings)
        self.server = make_uvicorn(app, self.loop, settings)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start within 120 s")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}/v1/completions"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.loop.stop(timeout_s=10)


def http(url: str, prompts, max_tokens: int, concurrency: int) -> dict:
    """One workload through the server, the clients in a child process (bounded wait)."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    child = ctx.Process(target=_client_process, args=(url, prompts, max_tokens, concurrency, results))
    child.start()
    try:
        return results.get(timeout=900)
    except queue.Empty:
        raise RuntimeError("the HTTP clients gave no result within 900 s") from None
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cuda-graphs", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="Alternating runs of each path; medians reported.")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval for this process (seconds; Python's default is 0.005).")
    args = parser.parse_args()
    if args.switch_interval is not None:
        import sys

        sys.setswitchinterval(args.switch_interval)
    from engine.config import EngineConfig
    from engine.model_config import read_model_spec

    config = EngineConfig(device=args.device, cuda_graphs=args.cuda_graphs, keep_logit_rows=False)
    prompts = _prompts(args.requests, args.prompt_len, read_model_spec(args.model).vocab_size)
    server = Server(args.model, config)
    runs: dict[str, list[dict]] = {"engine direct": [], "HTTP (SSE)": []}
    try:
        http(server.url, prompts[:4], 4, args.concurrency)  # warm-up: compiles, graphs, connections
        direct(args.model, config, prompts[:4], 4, args.concurrency)
        for _ in range(args.repeats):
            runs["engine direct"].append(direct(args.model, config, prompts, args.max_tokens, args.concurrency))
            runs["HTTP (SSE)"].append(http(server.url, prompts, args.max_tokens, args.concurrency))
    finally:
        server.close()
    tokens = {r["tokens"] for rs in runs.values() for r in rs}
    assert len(tokens) == 1, tokens  # both paths did the same work
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    for name, r in medians.items():
        print(f"{name:14s} {r['tokens_per_s']:9.1f} tokens/s {r['requests_per_s']:7.2f} requests/s "
              f"TTFT p50 {r['ttft_p50_ms']:7.1f} ms p99 {r['ttft_p99_ms']:7.1f} ms")
    ratios = [h["tokens_per_s"] / d["tokens_per_s"] for d, h in zip(runs["engine direct"], runs["HTTP (SSE)"])]
    print(f"HTTP / direct tokens/s: median {statistics.median(ratios):.3f} over {len(ratios)} paired runs "
          f"({', '.join(f'{x:.3f}' for x in ratios)})")
    print(json.dumps({"medians": medians, "ratios": ratios, "args": vars(args) | {"model": str(args.model)}}))


if __name__ == "__main__":
    main()
