"""Overlapped decode: a greedy decode step launched before the previous step's rows are read.

On the CPU ``cuda_graphs=True`` runs the padded decode path eagerly, and the engine launches
steps ahead there too (synchronously), so these tests check the engine's side of overlap: rows
of requests that finished meanwhile are dropped, cancels and admissions while a step is in
flight, pages and prefix-cache contents afterwards. Every produced logit row, token and sampler
state must equal the step-by-step engine's bitwise. The asynchronous copies and the device-side
token gather are checked on a GPU (tests/gpu/test_engine_speed_gpu.py).
"""

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.trace import compare_traces

P = 16
ENGINE = dict(page_size=P, num_pages=40, max_num_seqs=8, max_num_batched_tokens=8 * P, max_model_len=8 * P,
              cuda_graphs=True)
# Lengths around page boundaries, so steps launched ahead allocate new pages.
PROMPTS = [[5, 6, 7], list(range(10, 10 + P - 2)), [9] * (2 * P - 1), list(range(40, 40 + 2 * P + 3)), [1]]


def greedy(max_tokens: int, stop: int | None = None) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, ignore_eos=stop is None,
                          stop_token_ids=None if stop is None else (stop,))


def engine(model_dir, **overrides) -> LLMEngine:
    return LLMEngine(model_dir, EngineConfig(**{**ENGINE, **overrides}))


def run_all(eng: LLMEngine, requests) -> dict:
    ids = [eng.add_request(prompt, params) for prompt, params in requests]
    done = {o.request_id: o for o in eng.run()}
    return {i: done[i] for i in ids}


def assert_same(out, ref):
    assert (out.token_ids, out.finish_reason, out.sampler_state) == (ref.token_ids, ref.finish_reason,
                                                                     ref.sampler_state)
    assert len(out.trace) == len(ref.trace)
    for a, b in zip(out.trace.entries, ref.trace.entries):
        assert torch.equal(a.logits, b.logits) and a.logits_digest == b.logits_digest
        assert (a.position, a.token, a.sampler_state) == (b.position, b.token, b.sampler_state)


def assert_cached_pages_hold_their_prefix(eng: LLMEngine):
    """Every page the prefix cache holds stores the K/V of a cold forward of the prefix it claims."""
    bm, kv = eng.block_manager, eng.runner.kv
    pages = [p for p in bm.pages if p.has_provenance]
    assert pages
    for page in pages:
        prefix = bm.prefix_tokens(page.page_id)
        k, v = eng.runner.cold_kv(prefix)  # [layers, T, kv_heads, head_dim]
        first = (page.depth - 1) * P
        assert torch.equal(kv.k[:, page.page_id], k[:, first:first + P])
        assert torch.equal(kv.v[:, page.page_id], v[:, first:first + P])


@pytest.fixture(scope="module")
def stop_tokens(tiny_dir):
    """For each prompt, the token its greedy continuation produces third (a stop mid-run)."""
    outs = run_all(engine(tiny_dir, overlap_decode=False), [(p, greedy(6)) for p in PROMPTS])
    return [o.token_ids[2] for o in outs.values()]


def test_overlapped_decode_equals_step_by_step_and_drops_finished_rows(tiny_dir, stop_tokens):
    requests = [(p, greedy(3 + 2 * i, stop if i % 2 else None))
                for i, (p, stop) in enumerate(zip(PROMPTS, stop_tokens))]
    overlapped = engine(tiny_dir)
    outs = run_all(overlapped, requests)
    refs = run_all(engine(tiny_dir, overlap_decode=False), requests)
    eager = run_all(engine(tiny_dir, cuda_graphs=False), requests)
    for out, ref, plain in zip(outs.values(), refs.values(), eager.values(), strict=True):
        assert_same(out, ref)
        assert_same(out, plain)
    assert any(o.finish_reason == "stop" for o in outs.values())
    assert overlapped.num_steps_ahead > 0 and overlapped.num_dropped_rows > 0  # both paths were taken
    assert overlapped.block_manager.num_available_pages == ENGINE["num_pages"]  # nothing leaked
    assert_cached_pages_hold_their_prefix(overlapped)


def test_the_step_by_step_engine_launches_nothing_ahead(tiny_dir):
    for eng in (engine(tiny_dir, overlap_decode=False), engine(tiny_dir, check_mode=True),
                engine(tiny_dir, cuda_graphs=False)):
        run_all(eng, [(PROMPTS[0], greedy(4))])
        assert eng.num_steps_ahead == 0


def test_a_cancel_while_a_step_is_in_flight_drops_its_row(tiny_dir):
    requests = [(PROMPTS[0], greedy(8)), (PROMPTS[1], greedy(8))]
    refs = run_all(engine(tiny_dir, overlap_decode=False), requests)
    eng = engine(tiny_dir)
    ids = [eng.add_request(p, params) for p, params in requests]
    while not eng._ahead:  # prefill, then the first decode step launches the next one ahead
        eng.step()
    cancelled = eng.cancel(ids[0])
    rest = {o.request_id: o for o in eng.run()}
    assert eng.num_dropped_rows >= 1
    ref = refs[ids[0]]
    assert cancelled.finish_reason == "cancelled" and 0 < len(cancelled.token_ids) < len(ref.token_ids)
    assert cancelled.token_ids == ref.token_ids[:len(cancelled.token_ids)]
    for a, b in zip(cancelled.trace.entries, ref.trace.entries):
        assert torch.equal(a.logits, b.logits)
    assert_same(rest[ids[1]], refs[ids[1]])
    assert eng.block_manager.num_available_pages == ENGINE["num_pages"]


def test_a_request_added_while_a_step_is_in_flight(tiny_dir):
    first, late = (PROMPTS[3], greedy(10)), (PROMPTS[2], greedy(5))
    refs = run_all(engine(tiny_dir, overlap_decode=False), [first, late])
    eng = engine(tiny_dir)
    a = eng.add_request(*first)
    while not eng._ahead:
        eng.step()
    b = eng.add_request(*late)  # waits: steps go on one at a time until it is admitted
    done = {o.request_id: o for o in eng.run()}
    assert_same(done[a], refs["req-0"])
    assert_same(done[b], refs["req-1"])
    assert eng.num_steps_ahead > 1


def test_a_sampled_request_keeps_steps_one_at_a_time(tiny_dir):
    sampled = SamplingParams(max_tokens=6, temperature=0.8, seed=3, ignore_eos=True)
    requests = [(PROMPTS[0], greedy(6)), (PROMPTS[1], sampled)]
    eng = engine(tiny_dir)
    outs = run_all(eng, requests)
    refs = run_all(engine(tiny_dir, overlap_decode=False), requests)
    for out, ref in zip(outs.values(), refs.values()):
        assert_same(out, ref)
    assert eng.num_steps_ahead == 0  # the sampled token is chosen on the host: nothing to launch with


def test_overlap_decode_must_be_a_bool():
    with pytest.raises(ValueError, match="overlap_decode must be True or False"):
        EngineConfig(overlap_decode="yes")


def test_a_wrong_token_read_on_the_device_stops_the_engine(tiny_dir, monkeypatch):
    eng = engine(tiny_dir)
    buffers, vocab_size = eng.runner.buffers, eng.spec.vocab_size
    gather = buffers.gather_tokens

    def gather_off_by_one(num_rows, previous_tokens):
        gather(num_rows, previous_tokens)
        ids = buffers.decode.device["input_ids"][:num_rows]
        ids.copy_((ids + 1) % vocab_size)

    monkeypatch.setattr(buffers, "gather_tokens", gather_off_by_one)
    eng.add_request(PROMPTS[0], greedy(6))
    with pytest.raises(RuntimeError, match="the step launched ahead read token"):
        eng.run()


@st.composite
def scripts(draw):
    """Requests with arrival steps, stop tokens, sampling and cancels: a schedule to replay."""
    requests = []
    for i in range(draw(st.integers(1, 5))):
        prompt = draw(st.lists(st.integers(1, 200), min_size=1, max_size=2 * P + 3))
        stop = draw(st.one_of(st.none(), st.integers(0, 255)))
        sampled = draw(st.integers(0, 4)) == 0
        params = SamplingParams(max_tokens=draw(st.integers(1, 7)), ignore_eos=stop is None,
                                stop_token_ids=None if stop is None else (stop,),
                                temperature=0.9 if sampled else 0.0, seed=i)
        requests.append((prompt, params, draw(st.integers(0, 4)), draw(st.one_of(st.none(), st.integers(1, 6)))))
    return requests


def replay(eng: LLMEngine, script) -> dict:
    """Run ``script`` (prompt, params, arrival step, cancel step or None) step by step; outputs by index."""
    ids, done, step = {}, {}, 0
    while len(done) < len(script):
        for i, (prompt, params, arrival, cancel) in enumerate(script):
            if arrival == step:
                ids[i] = eng.add_request(prompt, params, request_id=f"r{i}")
            if cancel == step and i in ids and i not in done:
                done[i] = eng.cancel(ids[i])
        if eng.has_unfinished():
            for out in eng.step().finished:
                done[int(out.request_id[1:])] = out
        step += 1
        assert step < 200, "the script did not finish"
    return done


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=scripts())
def test_any_schedule_with_overlap_agrees_with_one_step_at_a_time(tiny_dir, script):
    overlapped = engine(tiny_dir)
    outs, refs = replay(overlapped, script), replay(engine(tiny_dir, overlap_decode=False), script)
    for i, out in outs.items():
        verdict = compare_traces(out.trace, refs[i].trace)
        assert verdict.agree, f"request {i}: {verdict.first_difference}"
        if "cancelled" not in (out.finish_reason, refs[i].finish_reason):
            assert (out.token_ids, out.finish_reason) == (refs[i].token_ids, refs[i].finish_reason)
    if overlapped.num_steps_ahead:
        event("steps launched ahead")
    if overlapped.num_dropped_rows:
        event("rows dropped")
    assert overlapped.block_manager.num_available_pages == ENGINE["num_pages"]
