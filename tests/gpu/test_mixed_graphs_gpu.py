"""Mixed-step CUDA graphs on a GPU: replay equals the eager padded and unpadded forwards bitwise,
arrivals beside decoding requests keep every trace bitwise, and a replayed mixed step is faster.

The padding logic itself is checked on the CPU (tests/engine/test_mixed_padding.py).
"""

import statistics
import time

import pytest
import torch

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.model_runner import Chunk
from engine.sampling_params import SamplingParams
from tests.gpu.test_engine_speed_gpu import ENGINE, GREEDY, assert_bitwise_equal, generate, llama_dir, prompts  # noqa: F401

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def graphs(llama_dir) -> LLMEngine:
    return LLMEngine(llama_dir, EngineConfig(**ENGINE, cuda_graphs=True))


@pytest.fixture(scope="module")
def eager(llama_dir) -> LLMEngine:
    return LLMEngine(llama_dir, EngineConfig(**ENGINE))


def prefill_chunks(engine: LLMEngine, prompts) -> list[Chunk]:
    """Whole-prompt chunks of fresh requests (their pages held by the scheduler)."""
    for p in prompts:
        engine.add_request(p, GREEDY)
    plan = engine.scheduler.schedule()
    return [Chunk(c.seq.token_ids, c.seq.page_table, c.start, c.end, c.is_sampled) for c in plan.chunks]


def test_mixed_graph_replay_equals_eager_padded_and_unpadded_forwards(graphs, prompts):
    runner = graphs.runner
    chunks = prefill_chunks(graphs, [prompts[1], prompts[3], prompts[0]])  # 15 + 33 + 1 rows
    shape = runner.padded_mixed.shape(chunks)
    assert shape is not None and shape in runner.padded_mixed.graphs
    kv_before = runner.kv.k.clone(), runner.kv.v.clone()

    def restore():
        runner.kv.k.copy_(kv_before[0])
        runner.kv.v.copy_(kv_before[1])

    batch = runner.padded_mixed.stage(chunks, shape)
    logits, tokens, flags, _ = runner.padded_mixed.forward(batch, check_metadata=True)  # eager, with index checks
    flags = flags.clone()
    eager_out = logits.clone(), tokens.clone(), runner.kv.k.clone(), runner.kv.v.clone()
    torch.cuda.synchronize()
    restore()
    logits, tokens, replayed_flags, _ = runner.padded_mixed.run(chunks, shape)  # graph replay
    assert torch.equal(logits, eager_out[0]) and torch.equal(tokens, eager_out[1])  # padding rows too
    assert torch.equal(replayed_flags, flags) and not bool(flags.any())  # finite inputs: nothing flagged
    assert torch.equal(runner.kv.k, eager_out[2]) and torch.equal(runner.kv.v, eager_out[3])
    restore()
    mixed, runner.padded_mixed = runner.padded_mixed, None
    try:
        unpadded = runner.execute(chunks).clone()  # the eager path, unpadded
    finally:
        runner.padded_mixed = mixed
    assert torch.equal(unpadded, eager_out[0][:3].cpu())
    pages = graphs.config.num_pages
    assert torch.equal(runner.kv.k[:, :pages], eager_out[2][:, :pages])  # padding wrote nowhere in the pool
    for rid in [s.request_id for s in [*graphs.scheduler.running, *graphs.scheduler.waiting]]:
        graphs.cancel(rid)


def staggered(engine: LLMEngine, prompts) -> list:
    """One request arrives every two steps while the earlier ones decode."""
    ids, done = [], {}
    for p in prompts:
        ids.append(engine.add_request(p, GREEDY))
        for _ in range(2):
            done.update({o.request_id: o for o in engine.step().finished})
    done.update({o.request_id: o for o in engine.run()})
    return [done[i] for i in ids]


def test_arrivals_beside_decoding_requests_equal_eager_bitwise(graphs, eager, prompts):
    replays = []
    original = graphs.runner.padded_mixed.run
    graphs.runner.padded_mixed.run = lambda chunks, shape: (replays.append(shape), original(chunks, shape))[1]
    try:
        assert_bitwise_equal(staggered(graphs, prompts), staggered(eager, prompts))
    finally:
        del graphs.runner.padded_mixed.run
    assert len({s.num_seqs for s in replays}) >= 2  # arrivals beside 1, 3, ... decoding requests


def mixed_step_seconds(engine: LLMEngine, prompts) -> float:
    for p in prompts[:3]:
        engine.add_request(p[:32], SamplingParams(max_tokens=200, ignore_eos=True))
    for _ in range(4):
        engine.step()
    times = []
    for i in range(8):
        engine.add_request(prompts[4][:32 + i], SamplingParams(max_tokens=1, ignore_eos=True))
        torch.cuda.synchronize()
        start = time.perf_counter()
        engine.step()  # collects the decode step launched ahead, if any, without the newcomer
        engine.step()  # the newcomer's prefill beside three decode rows
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    for rid in [s.request_id for s in [*engine.scheduler.running, *engine.scheduler.waiting]]:
        engine.cancel(rid)
    return statistics.median(times)


def test_a_replayed_mixed_step_is_faster_than_an_eager_one(graphs, eager, prompts):
    assert mixed_step_seconds(graphs, prompts) < 0.5 * mixed_step_seconds(eager, prompts)
