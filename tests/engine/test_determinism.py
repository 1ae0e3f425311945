"""Bitwise determinism on the CPU: batch composition, order, chunk budgets, prefix reuse, preemption.

Every comparison is torch.equal on full float32 logit rows plus equal tokens and sampler states,
against singleton references (each request alone in a fresh engine, one chunk). Each scheduling
variant must show its witness (chunking, cache hits, preemption actually happened).
"""

import pytest
import torch

from engine.llm_engine import LLM, LLMEngine
from engine.config import EngineConfig
from engine.sampling_params import SamplingParams
from engine.trace import compare_traces
from tests.engine.conftest import P, SMALL_ENGINE

# Lengths around page boundaries (P - 1, P, P + 1, 2P, 3P + 1, 4P, 4P + 1). All but the run of 200s
# are prefixes of BASE, so they share page-aligned and unaligned prefixes; one adds a three-token
# tail to 2P + 1 shared tokens.
BASE = [11, 3, 250, 7, 7, 19, 100, 42, 8] + list(range(60, 60 + 4 * P - 8))
PROMPTS = [BASE[:4 * P + 1], BASE[:P - 1], BASE[:P], BASE[:P + 1], BASE[:2 * P], BASE[:2 * P + 1] + [5, 5, 5],
           [200] * (3 * P + 1), BASE[:4 * P]]
# P + 1 tokens: every request decodes across a page boundary (a decode step that needs a new page).
GREEDY = SamplingParams(max_tokens=P + 1, ignore_eos=True)
SAMPLED = [SamplingParams(max_tokens=P + 1, temperature=0.9, top_k=40, top_p=0.9, seed=s, ignore_eos=True)
           for s in range(len(PROMPTS))]


def singletons(model_dir, params, dtype="float32"):
    out = []
    for prompt, p in zip(PROMPTS, params):
        llm = LLM(model_dir, dtype=dtype, **{**SMALL_ENGINE, "enable_prefix_caching": False})
        out.append(llm.generate([prompt], p)[0])
    return out


@pytest.fixture(scope="module")
def greedy_refs(tiny_dir):
    return singletons(tiny_dir, [GREEDY] * len(PROMPTS))


@pytest.fixture(scope="module")
def sampled_refs(tiny_dir):
    return singletons(tiny_dir, SAMPLED)


def assert_bitwise_equal(outputs, references):
    for out, ref in zip(outputs, references):
        assert out.prompt_token_ids == ref.prompt_token_ids
        verdict = compare_traces(out.trace, ref.trace)
        assert verdict.agree and len(out.trace) == len(ref.trace), verdict.first_difference
        for a, b in zip(out.trace.entries, ref.trace.entries):
            assert torch.equal(a.logits, b.logits) and a.token == b.token and a.sampler_state == b.sampler_state
        assert out.token_ids == ref.token_ids and out.sampler_state == ref.sampler_state


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_batch_composition_and_order(tiny_dir, greedy_refs, order):
    index = list(range(len(PROMPTS)))[::(1 if order == "forward" else -1)]
    outs = LLM(tiny_dir, **SMALL_ENGINE).generate([PROMPTS[i] for i in index], GREEDY)
    assert_bitwise_equal(outs, [greedy_refs[i] for i in index])


def test_seeded_sampling_is_batch_invariant(tiny_dir, sampled_refs):
    outs = LLM(tiny_dir, **SMALL_ENGINE).generate(PROMPTS, SAMPLED)
    assert_bitwise_equal(outs, sampled_refs)
    assert any(o.token_ids != r.token_ids for o, r in zip(outs, singletons(tiny_dir, [GREEDY] * len(PROMPTS))))


@pytest.mark.parametrize("budget", [P, 3 * P])
def test_chunk_budgets(tiny_dir, greedy_refs, budget):
    outs = LLM(tiny_dir, **{**SMALL_ENGINE, "max_num_batched_tokens": budget}).generate(PROMPTS, GREEDY)
    assert_bitwise_equal(outs, greedy_refs)
    chunked = [o for o in outs if len(o.prefill_chunk_ends) > 1]
    assert chunked, "no prompt was split into chunks"
    assert all(end % P == 0 for o in chunked for end in o.prefill_chunk_ends[:-1])


def test_prefix_reuse_in_one_engine_lifetime(tiny_dir, greedy_refs):
    # check mode on as well: its cold recomputations must not change any value
    engine = LLM(tiny_dir, check_mode=True, **SMALL_ENGINE).engine
    outs = {}
    for i in (0, 5, 0, 7):  # donor, partial sharer, full repeat, long sharer
        rid = engine.add_request(PROMPTS[i], GREEDY)
        outs[rid] = (i, {o.request_id: o for o in engine.run()}[rid])
    assert sum(o.num_cached_tokens for _, o in outs.values()) > 0, "no prefix-cache hit"
    assert engine.block_manager.num_evictions == 0
    for i, out in outs.values():
        assert_bitwise_equal([out], [greedy_refs[i]])


def test_preemption_and_eviction_under_page_pressure(tiny_dir, greedy_refs):
    engine = LLM(tiny_dir, **{**SMALL_ENGINE, "num_pages": 16}).engine
    ids = [engine.add_request(p, GREEDY) for p in PROMPTS]
    preempted, evicted, done = 0, 0, {}
    while engine.has_unfinished():
        step = engine.step()
        preempted += len(step.preempted)
        evicted += step.num_evicted_pages
        done.update({o.request_id: o for o in step.finished})
    assert preempted > 0 and evicted > 0
    assert_bitwise_equal([done[i] for i in ids], greedy_refs)


def test_staggered_arrivals_with_the_step_api(tiny_dir, greedy_refs):
    engine = LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE))
    arrivals = {0: [0, 1], 1: [2], 3: [3, 4], 4: [5], 6: [6, 7]}
    ids, done, step = {}, {}, 0
    while step <= max(arrivals) or engine.has_unfinished():
        for i in arrivals.get(step, []):
            ids[i] = engine.add_request(PROMPTS[i], GREEDY)
        done.update({o.request_id: o for o in engine.step().finished})
        step += 1
    assert_bitwise_equal([done[ids[i]] for i in range(len(PROMPTS))], greedy_refs)


def test_forced_hash_collisions_never_change_values(tiny_dir, greedy_refs):
    llm = LLM(tiny_dir, page_hash=lambda parent, tokens: 42, **SMALL_ENGINE)
    assert_bitwise_equal(llm.generate(PROMPTS + PROMPTS, GREEDY), greedy_refs + greedy_refs)


def test_decode_rows_equal_teacher_forced_prefill(tiny_dir, greedy_refs):
    ref = greedy_refs[0]
    engine = LLMEngine(tiny_dir, EngineConfig(**{**SMALL_ENGINE, "enable_prefix_caching": False}))
    for i in (1, 3, 6, P - 1):  # the last one's history fills its pages exactly
        rid = engine.add_request(list(ref.prompt_token_ids) + list(ref.token_ids[:i]),
                                 SamplingParams(max_tokens=1, ignore_eos=True))
        (forced,) = engine.run()
        assert forced.request_id == rid
        assert torch.equal(forced.trace.entries[0].logits, ref.trace.entries[i].logits)


def test_bfloat16_batch_matches_singletons(tiny_dir):
    refs = singletons(tiny_dir, [GREEDY] * 4, dtype="bfloat16")
    outs = LLM(tiny_dir, dtype="bfloat16", **{**SMALL_ENGINE, "max_num_batched_tokens": 2 * P}).generate(
        PROMPTS[:4], GREEDY)
    assert_bitwise_equal(outs, refs)


def test_negative_control_a_batch_dependent_op_is_detected(tiny_dir, greedy_refs, monkeypatch):
    """The comparison has power: a projection whose result depends on the batch row count fails it."""
    import engine.model as model
    import kernels.ops as real_ops

    class PerturbedOps:
        def __getattr__(self, name):
            return getattr(real_ops, name)

        @staticmethod
        def linear(x, weight, bias=None, **kw):
            out = real_ops.linear(x, weight, bias, **kw)
            return out + out.new_tensor(1e-6 * x.shape[0])

    monkeypatch.setattr(model, "ops", PerturbedOps())
    outs = LLM(tiny_dir, **SMALL_ENGINE).generate(PROMPTS, GREEDY)
    with pytest.raises(AssertionError):
        assert_bitwise_equal(outs, greedy_refs)
