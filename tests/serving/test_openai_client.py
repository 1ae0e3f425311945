"""The server through the official `openai` client: text and ids, streaming, concurrency, seeds, echo."""

import struct
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

PROMPTS = ["The quick brown fox", "Deterministic inference means", "A page of KV cache holds",
           "Once upon a time", "Bits are bits", "Sixteen clients at once"]


def _f32(x: float) -> bytes:
    """The float32 bits of a JSON logprob (it must be exactly a float32)."""
    bits = struct.pack("<f", x)
    assert struct.unpack("<f", bits)[0] == x, f"{x!r} is not a float32 value"
    return bits


def _completion(client, prompt, **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    r = client.completions.create(model="tiny", prompt=prompt, logprobs=5, **kw)
    c = r.choices[0]
    bits = [_f32(x) for x in c.logprobs.token_logprobs]
    tops = [sorted((k, _f32(v)) for k, v in d.items()) for d in c.logprobs.top_logprobs]
    return r, (c.text, c.model_extra["token_ids"], bits, tops, c.model_extra["row_digests"], c.finish_reason)


def test_text_and_token_id_prompts_agree(client, served):
    deployment = httpx.get(served.base_url + "/bitcase/deployment").json()
    text_r, text_out = _completion(client, PROMPTS[0])
    assert text_r.system_fingerprint == deployment["deployment_digest"]
    from engine.tokenizer import Tokenizer

    ids = Tokenizer.from_dir(served.settings.model_dir).encode(PROMPTS[0])
    ids_r, ids_out = _completion(client, ids)
    assert ids_out == text_out
    assert text_r.usage.prompt_tokens == len(ids) and text_r.usage.completion_tokens == len(text_out[1])
    assert all(d.startswith("sha256:") and len(d) == 71 for d in text_out[4])


def test_stream_equals_non_stream(client):
    for kw in ({}, {"temperature": 0.8, "seed": 7}, {"stop": [" the", "e"]}):
        _, whole = _completion(client, PROMPTS[1], **kw)
        chunks = list(client.completions.create(model="tiny", prompt=PROMPTS[1], logprobs=5, stream=True,
                                                **{"max_tokens": 12, "temperature": 0, **kw}))
        text = "".join(ch.choices[0].text for ch in chunks)
        ids = [t for ch in chunks for t in ch.choices[0].model_extra.get("token_ids", [])]
        digests = [d for ch in chunks for d in ch.choices[0].model_extra.get("row_digests", [])]
        bits = [_f32(x) for ch in chunks if ch.choices[0].logprobs for x in ch.choices[0].logprobs.token_logprobs]
        assert (text, ids, bits, digests, chunks[-1].choices[0].finish_reason) == \
            (whole[0], whole[1], whole[2], whole[4], whole[5]), kw
    messages = [{"role": "user", "content": "Say something"}]
    whole = client.chat.completions.create(model="tiny", messages=messages, max_tokens=10, temperature=0,
                                           logprobs=True, top_logprobs=3)
    streamed = list(client.chat.completions.create(model="tiny", messages=messages, max_tokens=10, temperature=0,
                                                   logprobs=True, top_logprobs=3, stream=True,
                                                   stream_options={"include_usage": True}))
    assert "".join(ch.choices[0].delta.content or "" for ch in streamed if ch.choices) == \
        whole.choices[0].message.content
    assert [_f32(e.logprob) for ch in streamed if ch.choices and ch.choices[0].logprobs
            for e in ch.choices[0].logprobs.content] == [_f32(e.logprob) for e in whole.choices[0].logprobs.content]
    assert streamed[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert whole.system_fingerprint == streamed[0].system_fingerprint


def test_sixteen_concurrent_clients_get_what_they_get_alone(client):
    prompts = [PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)) for i in range(16)]
    kinds = [{"temperature": 0} if i % 2 else {"temperature": 0.9, "seed": 1000 + i, "top_p": 0.9} for i in range(16)]
    alone = [_completion(client, p, **k)[1] for p, k in zip(prompts, kinds)]
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(lambda pk: _completion(client, pk[0], **pk[1])[1], zip(prompts, kinds)))
    assert together == alone


def test_n_choices_use_distinct_derived_seeds(client):
    r = client.completions.create(model="tiny", prompt=PROMPTS[2], max_tokens=8, temperature=1.0, seed=42, n=3)
    seeds = [c.model_extra["seed"] for c in r.choices]
    assert seeds[0] == 42 and len(set(seeds)) == 3
    single = client.completions.create(model="tiny", prompt=PROMPTS[2], max_tokens=8, temperature=1.0, seed=42)
    assert single.choices[0].model_extra["token_ids"] == r.choices[0].model_extra["token_ids"]
    again = client.completions.create(model="tiny", prompt=PROMPTS[2], max_tokens=8, temperature=1.0, seed=42, n=3)
    assert [c.model_extra["token_ids"] for c in again.choices] == [c.model_extra["token_ids"] for c in r.choices]


def test_echo_prompt_logprobs_equal_decode_time_logprobs(client):
    """Prefill vs decode: the generated tokens fed back as a prompt get the same float32 logprobs."""
    r = client.completions.create(model="tiny", prompt=PROMPTS[3], max_tokens=10, temperature=0, logprobs=4)
    from_decode = r.choices[0]
    prompt_ids = client.completions.create(model="tiny", prompt=PROMPTS[3], max_tokens=1, echo=True,
                                           logprobs=0, temperature=0).choices[0]
    history = prompt_ids.logprobs.tokens[:-1]  # token_id:N names without a tokenizer mapping
    ids = [int(t.removeprefix("token_id:")) for t in client.completions.create(
        model="tiny", prompt=PROMPTS[3], max_tokens=1, echo=True, logprobs=0, temperature=0,
        extra_body={"return_tokens_as_token_ids": True}).choices[0].logprobs.tokens[:-1]]
    assert len(ids) == len(history)
    generated = from_decode.model_extra["token_ids"]
    echo = client.completions.create(model="tiny", prompt=ids + generated, max_tokens=0, echo=True, logprobs=4,
                                     temperature=0).choices[0]
    tail = slice(len(ids), len(ids) + len(generated))
    assert [_f32(x) for x in echo.logprobs.token_logprobs[tail]] == [_f32(x) for x in from_decode.logprobs.token_logprobs]
    assert echo.logprobs.top_logprobs[tail] == from_decode.logprobs.top_logprobs
    assert echo.logprobs.token_logprobs[0] is None
    vllm_style = client.completions.create(model="tiny", prompt=ids + generated, max_tokens=1, temperature=0,
                                           extra_body={"prompt_logprobs": 2}).choices[0].model_extra["prompt_logprobs"]
    assert vllm_style[0] is None and len(vllm_style) == len(ids) + len(generated)
    assert [_f32(vllm_style[len(ids) + i][str(t)]["logprob"]) for i, t in enumerate(generated)] == \
        [_f32(x) for x in from_decode.logprobs.token_logprobs]


def test_stop_strings_and_stop_token_ids(client):
    _, free = _completion(client, PROMPTS[4], max_tokens=20)
    text = free[0]
    assert len(text) > 4
    stop = text[2:4]
    _, stopped = _completion(client, PROMPTS[4], max_tokens=20, stop=[stop])
    assert stopped[0] == text[:text.index(stop)] and stopped[5] == "stop"
    token = free[1][3]
    _, by_id = _completion(client, PROMPTS[4], max_tokens=20, extra_body={"stop_token_ids": [token]})
    assert by_id[1] == free[1][:free[1].index(token) + 1] and by_id[5] == "stop"


def test_models_health_metrics_deployment(served, client):
    assert [m.id for m in client.models.list().data] == ["tiny"]
    assert httpx.get(served.base_url + "/health").json() == {"status": "ok"}
    metrics = httpx.get(served.base_url + "/metrics").text
    for name in ("bitcase_requests_total", "bitcase_generation_tokens_total", "bitcase_waiting",
                 "bitcase_step_seconds_count", "bitcase_free_pages"):
        assert name in metrics
    d = httpx.get(served.base_url + "/bitcase/deployment").json()
    assert d["plan_digest"] == d["deployment"]["kernel_plan"]["digest"]
    assert {c["obligation"]: c["status"] for c in d["startup_checks"]} == \
        {"runtime.deployment": "pass", "runtime.plan": "pass", "runtime.no_autotune": "pass",
         "trusted.attention-finiteness": "pass"}
