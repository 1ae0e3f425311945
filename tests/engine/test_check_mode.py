"""Check mode: the four invariants hold on real runs and each one stops the engine when broken."""

import pytest

from engine.checks import (InvariantViolation, KernelConfigViolation, KVValueViolation, LayoutViolation,
                           WriteIsolationViolation)
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from kernels.launch import LaunchRecord
from tests.engine.conftest import P, SMALL_ENGINE

PARAMS = SamplingParams(max_tokens=5, ignore_eos=True)
DONOR = list(range(2 * P + 3, 0, -1))  # two full pages and three tokens


def checked_engine(tiny_dir, **overrides) -> LLMEngine:
    config = {**SMALL_ENGINE, "check_mode": True, "check_kv_pages_per_step": 64, **overrides}
    return LLMEngine(tiny_dir, EngineConfig(**config))


def engine_with_cached_donor(tiny_dir) -> LLMEngine:
    engine = checked_engine(tiny_dir)
    engine.add_request(DONOR, PARAMS)
    engine.run()
    assert engine.block_manager.num_cached_pages > 0
    return engine


def test_invariants_hold_through_reuse_chunking_and_preemption(tiny_dir):
    engine = checked_engine(tiny_dir, num_pages=16, max_num_batched_tokens=2 * P, check_kv_pages_per_step=3)
    # The prompts reserve 15 of the 16 pages; each request then decodes into two more pages.
    prompts = [DONOR, DONOR[:2 * P + 1] + [1, 2], [4] * (3 * P + 2), DONOR, [3, 1, 4, 1, 5] * 3 + [9, 2]]
    for prompt in prompts:
        engine.add_request(prompt, SamplingParams(max_tokens=2 * P, ignore_eos=True))
    preempted, outputs = 0, []
    while engine.has_unfinished():
        step = engine.step()
        preempted += len(step.preempted)
        outputs.extend(step.finished)
    assert preempted > 0
    assert any(o.num_cached_tokens for o in outputs), "no prefix-cache hit"
    assert any(len(o.prefill_chunk_ends) > 1 for o in outputs), "no prompt was split into chunks"
    assert engine.block_manager.num_available_pages == 16


def test_a_corrupted_cached_page_breaks_kv_value_consistency(tiny_dir):
    engine = engine_with_cached_donor(tiny_dir)
    pid = next(p.page_id for p in engine.block_manager.pages if p.has_provenance)
    engine.runner.kv.k[0, pid, 1, 0, 0] += 1.0
    engine.add_request([1, 2, 3], PARAMS)
    with pytest.raises(KVValueViolation, match="KV-value consistency"):
        engine.step()
    with pytest.raises(RuntimeError, match="stopped after an earlier failure"):
        engine.step()


def test_a_write_into_a_published_page_breaks_write_isolation(tiny_dir, monkeypatch):
    engine = engine_with_cached_donor(tiny_dir)
    pid = next(p.page_id for p in engine.block_manager.pages if p.has_provenance)
    real_collect = engine.runner.collect

    def collect_and_scribble(launched):
        logits = real_collect(launched)
        engine.runner.kv.v[1, pid, 0, 0, 0] += 1.0
        return logits

    monkeypatch.setattr(engine.runner, "collect", collect_and_scribble)
    engine.add_request([1, 2, 3], PARAMS)
    with pytest.raises(WriteIsolationViolation, match=f"page {pid}"):
        engine.step()


def test_a_chunk_targeting_a_shared_page_is_refused_before_the_forward(tiny_dir, monkeypatch):
    engine = engine_with_cached_donor(tiny_dir)
    real_schedule = engine.scheduler.schedule

    def schedule_over_the_cached_prefix():
        plan = real_schedule()
        seq = plan.chunks[0].seq
        assert seq.num_cached_tokens > 0
        seq.num_computed_tokens = seq.num_cached_tokens = 0  # as if the hit were recomputed in place
        chunk = plan.chunks[0]
        return type(plan)((type(chunk)(seq, 0, chunk.end, chunk.is_sampled),), plan.admitted, plan.preempted, 0)

    monkeypatch.setattr(engine.scheduler, "schedule", schedule_over_the_cached_prefix)
    engine.add_request(DONOR, PARAMS)
    with pytest.raises(WriteIsolationViolation, match="published True"):
        engine.step()


def test_a_launch_outside_the_sealed_plan_breaks_kernel_configuration(tiny_dir, monkeypatch):
    engine = checked_engine(tiny_dir)
    real_collect = engine.runner.collect

    def collect_with_an_unsealed_launch(launched):
        logits = real_collect(launched)
        record = engine.runner.last_launches[0]
        engine.runner.last_launches[0] = LaunchRecord(record.kernel, record.key, {**record.config, "num_warps": 16})
        return logits

    monkeypatch.setattr(engine.runner, "collect", collect_with_an_unsealed_launch)
    engine.add_request([1, 2, 3], PARAMS)
    with pytest.raises(KernelConfigViolation, match="kernel configuration consistency"):
        engine.step()


def test_a_missing_launch_breaks_kernel_configuration(tiny_dir, monkeypatch):
    engine = checked_engine(tiny_dir)
    real_collect = engine.runner.collect

    def collect_dropping_attention(launched):  # one layer's attention launch, of either form
        logits = real_collect(launched)
        records = engine.runner.last_launches
        del records[next(i for i, r in enumerate(records) if r.kernel in ("paged_attention", "attention_prefill"))]
        return logits

    monkeypatch.setattr(engine.runner, "collect", collect_dropping_attention)
    engine.add_request([1, 2, 3], PARAMS)
    with pytest.raises(KernelConfigViolation, match="launch counts"):
        engine.step()


def test_a_split_k_partial_whose_fold_is_missing_breaks_kernel_configuration(tiny_dir, monkeypatch):
    engine = checked_engine(tiny_dir)
    real_collect = engine.runner.collect

    def collect_dropping_folds(launched):
        logits = real_collect(launched)
        # tiny's o and down projections leave split-K partials that the next residual norm folds
        assert any(r.kernel == "matmul_combine_norm" for r in engine.runner.last_launches)
        engine.runner.last_launches[:] = [r for r in engine.runner.last_launches if r.kernel != "matmul_combine_norm"]
        return logits

    monkeypatch.setattr(engine.runner, "collect", collect_dropping_folds)
    engine.add_request([1, 2, 3], PARAMS)
    with pytest.raises(KernelConfigViolation, match="launch counts"):
        engine.step()


def test_a_wrong_reference_count_breaks_layout_consistency(tiny_dir):
    engine = engine_with_cached_donor(tiny_dir)
    engine.add_request([1, 2, 3, 4, 5, 6], PARAMS)
    engine.step()
    running = engine.scheduler.running[0]
    engine.block_manager.pages[running.page_table[0]].ref_count += 1
    with pytest.raises(LayoutViolation, match="ref_count"):
        engine.step()


def test_violations_share_one_base_type():
    for kind in (LayoutViolation, KVValueViolation, WriteIsolationViolation, KernelConfigViolation):
        assert issubclass(kind, InvariantViolation)
    assert len({k.invariant for k in (LayoutViolation, KVValueViolation, WriteIsolationViolation,
                                      KernelConfigViolation)}) == 4


def test_non_finite_logits_break_the_attention_premise(tiny_dir, monkeypatch):
    engine = checked_engine(tiny_dir)
    real_collect = engine.runner.collect

    def collect_with_nan(launched):
        logits = real_collect(launched).clone()  # a normal tensor: the forward returns inference tensors
        logits[0, 3] = float("nan")
        return logits

    monkeypatch.setattr(engine.runner, "collect", collect_with_nan)
    engine.add_request([1, 2, 3], PARAMS)
    with pytest.raises(KernelConfigViolation, match="not all finite"):
        engine.step()
