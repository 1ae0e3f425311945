"""CUDA graphs for decode on the Llama-3.2-1B shape in bfloat16 (random weights): replay fidelity,
padding isolation, device greedy choice, and that graphs make decode steps faster.

Bitwise throughout (torch.equal on full float32 logit rows, tokens, sampler states). Set
BITCASE_GPU_MODEL_DIR to reuse an existing llama-1b checkpoint directory.
"""

import json
import os
import time
from pathlib import Path

import pytest
import torch

from engine.checkpoint import make_checkpoint
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.model_runner import Chunk
from engine.sampler import greedy_tokens, sample
from engine.sampling_params import SamplingParams

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

ENGINE = dict(device="cuda", dtype="bfloat16", page_size=16, num_pages=512, max_num_seqs=8,
              max_num_batched_tokens=1024, max_model_len=1024, enable_prefix_caching=False)
LENGTHS = (1, 15, 17, 33, 100, 255, 257, 500)  # none a page multiple: decode rows stay in their pages
GREEDY = SamplingParams(max_tokens=12, ignore_eos=True)
SAMPLED = SamplingParams(max_tokens=12, temperature=0.8, top_p=0.95, seed=5, ignore_eos=True)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    given = os.environ.get("BITCASE_GPU_MODEL_DIR")
    return Path(given) if given else make_checkpoint("llama-1b", tmp_path_factory.mktemp("llama-1b"), seed=0)


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(7)
    return [torch.randint(0, 128000, (n,), generator=g).tolist() for n in LENGTHS]


@pytest.fixture(scope="module")
def graphs(llama_dir) -> LLMEngine:
    return LLMEngine(llama_dir, EngineConfig(**ENGINE, cuda_graphs=True))


@pytest.fixture(scope="module")
def eager(llama_dir) -> LLMEngine:
    return LLMEngine(llama_dir, EngineConfig(**ENGINE))


def generate(engine: LLMEngine, prompts, params):
    ids = [engine.add_request(p, params) for p in prompts]
    done = {o.request_id: o for o in engine.run()}
    return [done[i] for i in ids]


def assert_bitwise_equal(outputs, references):
    for out, ref in zip(outputs, references, strict=True):
        assert out.token_ids == ref.token_ids and out.sampler_state == ref.sampler_state
        for i, (a, b) in enumerate(zip(out.trace.entries, ref.trace.entries, strict=True)):
            assert torch.equal(a.logits, b.logits), f"logit row {i} of {out.request_id} differs"
            assert a.token == b.token and a.sampler_state == b.sampler_state


def test_device_greedy_choice_is_the_samplers(llama_dir):
    rows = torch.randn(8, 128256)
    rows[1, 7] = rows[1, 900] = rows[1].max() + 1  # a tie: the first index wins
    rows[2, 50] = rows[2, 60] = float("nan")  # NaN counts as the maximum, first one wins
    rows[3] = float("-inf")
    rows[4, 3:] = float("inf")
    rows[5] = 0.0
    rows[6, 90_000] = rows[6, 2_100] = rows[6].max() + 1  # a tie across the parts greedy_tokens splits into
    rows[7, 5] = rows[7].max() + 1
    rows[7, 70_000] = float("nan")  # a NaN in a later part beats a larger number in an earlier one
    state = SamplingParams().initial_state()
    expected = [sample(r, SamplingParams(), state)[0] for r in rows]
    assert greedy_tokens(rows.cuda()).tolist() == expected
    assert expected[1:] == [7, 50, 0, 3, 0, 2_100, 70_000]


def test_greedy_launches_give_argmax_at_every_part_count():
    """kernels/greedy.py at part counts around the engine's (256 for this vocabulary) on rows whose
    argmax a wrong part rule would miss."""
    from bench.greedy_tokens import adversarial_rows
    from kernels.greedy import greedy_argmax

    counts = [16, 64, 256, 1002, 4008]
    for rows in adversarial_rows(4, 128256, counts):
        for parts in counts:
            assert torch.equal(greedy_argmax(rows, parts), torch.argmax(rows, dim=-1)), parts


def decode_chunks(engine: LLMEngine, prompts) -> list[Chunk]:
    """Prefill ``prompts`` (one step), then the decode chunks of the next step, without running it."""
    for p in prompts:
        engine.add_request(p, GREEDY)
    engine.step()
    chunks = [Chunk(s.token_ids, s.page_table, s.num_tokens - 1, s.num_tokens, True) for s in engine.scheduler.running]
    assert all(len(s.page_table) * 16 >= s.num_tokens for s in engine.scheduler.running)
    return chunks


def test_graph_replay_equals_eager_padded_and_unpadded_forwards(graphs, prompts):
    runner = graphs.runner
    chunks = decode_chunks(graphs, prompts[:3])  # padded to 4
    kv_before = runner.kv.k.clone(), runner.kv.v.clone()

    def restore():
        runner.kv.k.copy_(kv_before[0])
        runner.kv.v.copy_(kv_before[1])

    batch = runner.buffers.stage_decode(runner.padded_decode.pad(chunks))
    logits, tokens, flags, _ = runner.padded_decode.forward(batch, check_metadata=True)  # eager, with index checks
    eager_out = logits.clone(), tokens.clone(), runner.kv.k.clone(), runner.kv.v.clone(), flags.clone()
    torch.cuda.synchronize()  # the staged copies are done before run() rewrites the pinned mirrors
    restore()
    (logits, tokens, flags, _), fetch = runner.padded_decode.run(chunks)  # graph replay
    assert torch.equal(logits, eager_out[0]) and torch.equal(tokens, eager_out[1])  # padding rows too
    rows, host_tokens, inputs, host_flags = runner.host_logits.wait(fetch)  # what the graph put in its slot
    assert torch.equal(rows.view(torch.int32), eager_out[0][:3].cpu().view(torch.int32))
    assert host_tokens == eager_out[1][:3].tolist() and inputs is None
    assert torch.equal(host_flags, eager_out[4][:3].cpu())
    assert torch.equal(flags, eager_out[4]) and not bool(flags.any())  # the replayed finiteness flags
    assert torch.equal(runner.kv.k, eager_out[2]) and torch.equal(runner.kv.v, eager_out[3])
    restore()
    decode, runner.padded_decode = runner.padded_decode, None
    try:
        unpadded = runner.execute(chunks).clone()  # the eager path, 3 rows
    finally:
        runner.padded_decode = decode
    assert torch.equal(unpadded, eager_out[0][:3].cpu())
    pages = graphs.config.num_pages
    assert torch.equal(runner.kv.k[:, :pages], eager_out[2][:, :pages])  # padding wrote nowhere in the pool
    for rid in [s.request_id for s in graphs.scheduler.running]:
        graphs.cancel(rid)


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_traces_equal_with_graphs_on_and_off_across_batch_sizes(graphs, eager, prompts, params):
    singletons = [generate(eager, [p], params)[0] for p in prompts]
    replays = []
    original_run = graphs.runner.padded_decode.run
    graphs.runner.padded_decode.run = lambda chunks, **kw: (replays.append(len(chunks)), original_run(chunks, **kw))[1]
    try:
        for batch in (prompts[:3], prompts[:4], prompts[:5], prompts, prompts[::-1]):
            expected = [singletons[prompts.index(p)] for p in batch]
            assert_bitwise_equal(generate(graphs, batch, params), expected)
            assert_bitwise_equal(generate(eager, batch, params), expected)
        assert_bitwise_equal([generate(graphs, [p], params)[0] for p in prompts], singletons)
    finally:
        del graphs.runner.padded_decode.run
    assert {3, 5}.issubset(replays)  # steps padded to 4 and to 8 were replayed


def test_greedy_tokens_of_a_graph_run_are_the_argmax_of_their_rows(graphs, prompts):
    for out in generate(graphs, prompts, GREEDY):
        assert [e.token for e in out.trace.entries] == [int(torch.argmax(e.logits)) for e in out.trace.entries]


def test_check_mode_holds_on_graph_replays(llama_dir, eager, prompts):
    checked = LLMEngine(llama_dir, EngineConfig(**{**ENGINE, "check_mode": True, "enable_prefix_caching": True},
                                                cuda_graphs=True))
    assert_bitwise_equal(generate(checked, prompts[:5], GREEDY), generate(eager, prompts[:5], GREEDY))


def test_overlapped_decode_equals_step_by_step_with_stops_cancels_and_arrivals(llama_dir, graphs, prompts):
    serial = LLMEngine(llama_dir, EngineConfig(**ENGINE, cuda_graphs=True, overlap_decode=False))
    base = generate(serial, prompts, GREEDY)
    # odd requests stop at their 4th token: the step launched ahead of it holds a dead row
    params = [SamplingParams(max_tokens=12, stop_token_ids=(o.token_ids[3],)) if i % 2 else
              SamplingParams(max_tokens=4 + i, ignore_eos=True) for i, o in enumerate(base)]

    def run(engine, cancel_at: int | None):
        ids = [engine.add_request(p, q) for p, q in zip(prompts[:6], params[:6])]
        done, late, num_steps = {}, None, 0
        while engine.has_unfinished():
            done.update({o.request_id: o for o in engine.step().finished})
            num_steps += 1
            if num_steps == cancel_at:
                cancelled = engine.cancel(ids[0])
                done[ids[0]] = cancelled
                late = engine.add_request(prompts[6], params[6])
        return [done[i] for i in ids], done.get(late)

    before = graphs.num_steps_ahead, graphs.num_dropped_rows
    outs, _ = run(graphs, None)
    refs, _ = run(serial, None)
    assert_bitwise_equal(outs, refs)
    assert any(o.finish_reason == "stop" for o in outs)
    assert graphs.num_steps_ahead > before[0] and graphs.num_dropped_rows > before[1]
    outs, late_out = run(graphs, 3)
    refs, late_ref = run(serial, 3)
    assert outs[0].finish_reason == "cancelled"
    assert outs[0].token_ids == refs[0].token_ids[:len(outs[0].token_ids)]
    assert_bitwise_equal(outs[1:] + [late_out], refs[1:] + [late_ref])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second CUDA GPU")
def test_an_engine_on_another_gpu_than_the_current_one(llama_dir, graphs, prompts):
    # Streams, events, graphs and Triton launches follow the current device: the engine must
    # make its own device current, or it would launch on the wrong one.
    other = LLMEngine(llama_dir, EngineConfig(**{**ENGINE, "device": "cuda:1"}, cuda_graphs=True))
    assert torch.cuda.current_device() == 0
    outs = generate(other, prompts[:4], GREEDY)
    assert other.num_steps_ahead > 0 and torch.cuda.current_device() == 0
    assert_bitwise_equal(outs, generate(graphs, prompts[:4], GREEDY))


def decode_step_seconds(engine: LLMEngine, prompts) -> float:
    for p in prompts:
        engine.add_request(p, SamplingParams(max_tokens=40, ignore_eos=True))
    for _ in range(8):  # prefill and warm-up decode steps
        engine.step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(24):
        engine.step()
    seconds = (time.perf_counter() - start) / 24
    engine.run()
    return seconds


def test_graph_decode_steps_are_faster_than_eager_ones(graphs, eager, prompts):
    with_graphs, without = decode_step_seconds(graphs, prompts[:4]), decode_step_seconds(eager, prompts[:4])
    assert with_graphs * 1.5 < without, f"graph step {with_graphs * 1e3:.2f} ms, eager step {without * 1e3:.2f} ms"


def test_decode_profile_breaks_a_graph_step_down(llama_dir, tmp_path):
    """bench/decode_profile.py times the host phases, the graph and each kernel of a decode step."""
    from bench import decode_profile
    assert decode_profile.main(["--out", str(tmp_path), "--model-dir", str(llama_dir), "--contexts", "0,64",
                                "--new-tokens", "8"]) == 0
    results = json.loads((tmp_path / "decode_profile.json").read_text())
    assert [r["context"] for r in results] == [0, 64]
    for r in results:
        phases = r["phase_ms_median"]
        assert r["steps"] == 7 and 0 < phases["fetch_wait"] < phases["step"]
        assert {"schedule_ahead", "slot_reserve", "pad", "stage", "replay_launch", "fetch_start", "digest_queue",
                "digest_start", "commit"} <= set(phases)
        # Overlapped steps take about the graph's GPU time each, so a replay timed on its own can come
        # out a little above the median step (seen: 1.179 against 1.170 ms); far above it is wrong.
        assert 0 < r["graph_gpu_ms"] < 1.1 * phases["step"]
        slowest = r["slowest_steps"]
        assert len(slowest) == 5 and len({s["number"] for s in slowest}) == 5
        walls = [s["phase_ms"]["step"] for s in slowest]
        assert all(1 <= s["number"] <= 7 for s in slowest) and walls == sorted(walls, reverse=True)
        assert walls[0] >= round(phases["step"], 3)
        calls = {k["kernel"]: k["calls_per_step"] for k in r["kernels"]}
        assert calls["matmul_kernel"] == 49  # qkv, o, down per layer + lm_head (bf16: no split yet)
        assert calls["matmul_silu_kernel"] == 16 and "silu_mul_kernel" not in calls  # gate/up with SiLU·up
        assert calls["rms_norm_kernel"] == 33  # two per layer + the final norm
        # a KV of one segment (the graph of the narrowest table): attention in one kernel a layer
        assert calls["attention_prefill_kernel"] == 16 and "attention_partial_kernel" not in calls
        assert calls["rope_store_kv_kernel"] == 16  # q and k rotated, K/V written: one launch a layer
        assert "rope_kernel" not in calls and "store_kv_kernel" not in calls
    assert "| phase | ms (median) |" in (tmp_path / "decode_profile.md").read_text()
    assert "slowest steps" in (tmp_path / "decode_profile.md").read_text()


def test_engine_benchmark_counts_launches_and_splits_a_step_by_kernel(graphs):
    """bench/engine_gpu.py's decode_profile part: plan launches of the captured graph, profiler split."""
    from bench.engine_gpu_common import Budget
    from bench.engine_gpu_profile import decode_launch_profile, profile_markdown
    profile = decode_launch_profile(graphs, contexts=[0, 300], batch=4, budget=Budget(300.0))
    layers = graphs.spec.num_layers
    for context in ("0", "300"):
        r = profile[context]
        by_kernel = r["plan_launches_by_kernel"]
        assert by_kernel["matmul"] == 3 * layers + 1 and "matmul_split" not in by_kernel  # bf16: no split yet
        assert by_kernel["matmul_silu"] == layers and "silu_mul" not in by_kernel  # gate/up with SiLU·up
        # max_model_len 1,024: every table fits one segment, so attention is one kernel a layer
        assert r["plan_launches_per_step"] == 8 * layers + 3  # embedding, final norm, lm_head
        assert by_kernel == dict(sorted(graphs.runner.model.launches_per_forward(
            has_logits=True, one_kernel_attention=True).items()))
        assert r["cuda_kernels_per_step"] >= r["plan_launches_per_step"]
        shares = {g["kernel"]: g["share"] for g in r["split"]}
        assert {"matmul", "attention_prefill"} <= set(shares)
        assert abs(sum(shares.values()) - 1) < 1e-6 and 0 < r["graph_gpu_ms"]
    assert "| kernel | calls/step | µs/step | share |" in "\n".join(profile_markdown(profile))


def test_greedy_tokens_bench_checks_every_part_count(tmp_path):
    """bench/greedy_tokens.py: every part count's token equals argmax's, and the foreach copy's bytes the sources'."""
    from bench import greedy_tokens
    out = tmp_path / "greedy.json"
    assert greedy_tokens.main(["--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [g["parts"] for g in result["greedy"] if g["is_engine"]] == [256]
    assert all(g["equal_to_argmax"] and g["us"] > 0 for g in result["greedy"])
    assert result["slot_copies"]["foreach_equal"]
