"""The engine under the run-time finiteness check: a poisoned request ends, its neighbour is bitwise unaffected.

Poison is injected at the ops the model calls (kernels.ops.rope_store_kv / paged_attention), into
the rows of one request, at one chosen step, so the kernels see exactly what a broken upstream
kernel or a bad activation would hand them.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from engine.checks import KernelConfigViolation
from engine.llm_engine import LLMEngine
from engine.config import EngineConfig
from engine.sampling_params import SamplingParams
from kernels import ops
from tests.engine.conftest import P, SMALL_ENGINE

PROMPTS = {"victim": [(7 * i + 3) % 256 for i in range(2 * P + 5)], "other": [(5 * i + 1) % 256 for i in range(P + 9)]}
PARAMS = SamplingParams(max_tokens=6, ignore_eos=True)


class Poison:
    """Breaks the rows of one request in the ops of a step's forward, while armed (never in check
    mode's cold recomputations)."""

    def __init__(self, engine: LLMEngine, kind: str) -> None:
        self.engine, self.kind, self.hits = engine, kind, 0
        self.armed = self._in_launch = False

    @property
    def active(self) -> bool:
        return self.armed and self._in_launch

    def launch(self, real):
        def wrapped(*args, **kwargs):
            self._in_launch = True
            try:
                return real(*args, **kwargs)
            finally:
                self._in_launch = False
        return wrapped

    def _victim(self):
        return next(s for s in self.engine.scheduler.running if s.request_id == "victim")

    def _rows_of_victim(self, block_table: torch.Tensor, query_start_loc: torch.Tensor) -> range:
        first_page = self._victim().page_table[0]
        b = next(i for i in range(block_table.shape[0]) if int(block_table[i, 0]) == first_page)
        return range(int(query_start_loc[b]), int(query_start_loc[b + 1]))

    def rope_store_kv(self, real):
        def wrapped(q, k, v, positions, cos_sin, k_cache, v_cache, slot_mapping, nonfinite=None):
            if self.active and self.kind in ("k_nan", "v_inf", "k_inf", "overflow"):
                size, pages = self.engine.config.page_size, set(self._victim().page_table)
                rows = [i for i, s in enumerate(slot_mapping.tolist()) if s // size in pages]
                k, v = k.clone(), v.clone()
                last = rows[-1]
                if self.kind == "k_nan":
                    k[last, 0, 0] = float("nan")
                elif self.kind == "k_inf":
                    k[last, -1, 3] = float("-inf")
                elif self.kind == "v_inf":
                    v[last, 0, 5] = float("inf")
                else:  # finite, so rope_store_kv passes it; the score against the same q row overflows
                    k[last] = 1e20
                self.hits += 1
            return real(q, k, v, positions, cos_sin, k_cache, v_cache, slot_mapping, nonfinite)
        return wrapped

    def paged_attention(self, real):
        def wrapped(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, scale, seq_idx=None, nonfinite=None,
                    **options):
            if self.active and self.kind in ("q_nan", "q_inf", "overflow"):
                last = self._rows_of_victim(block_table, query_start_loc)[-1]
                q = q.clone()
                if self.kind == "q_nan":
                    q[last, 1, 2] = float("nan")
                elif self.kind == "q_inf":
                    q[last, 0, 0] = float("inf")
                else:
                    q[last] = 1e20
                self.hits += 1
            return real(q, k_cache, v_cache, block_table, query_start_loc, seq_lens, scale, seq_idx, nonfinite, **options)
        return wrapped


@contextlib.contextmanager
def poisoned(monkeypatch, engine: LLMEngine, kind: str):
    poison = Poison(engine, kind)
    monkeypatch.setattr(ops, "rope_store_kv", poison.rope_store_kv(ops.rope_store_kv))
    monkeypatch.setattr(ops, "paged_attention", poison.paged_attention(ops.paged_attention))
    monkeypatch.setattr(engine.runner, "launch", poison.launch(engine.runner.launch))
    yield poison


def _engine(tiny_dir, **overrides) -> LLMEngine:
    return LLMEngine(tiny_dir, EngineConfig(**{**SMALL_ENGINE, **overrides}))


def _alone(tiny_dir):
    engine = _engine(tiny_dir)
    engine.add_request(PROMPTS["other"], PARAMS, request_id="other")
    return engine.run()[0]


def _run_poisoned(tiny_dir, monkeypatch, kind: str, *, poison_step: int, **overrides):
    """victim and other together; the victim's rows are poisoned in step ``poison_step``."""
    engine = _engine(tiny_dir, **overrides)
    outputs, results = {}, []
    with poisoned(monkeypatch, engine, kind) as poison:
        for rid in ("victim", "other"):
            engine.add_request(PROMPTS[rid], PARAMS, request_id=rid)
        while engine.has_unfinished():
            poison.armed = engine.num_steps == poison_step
            result = engine.step()
            results.append(result)
            outputs.update({o.request_id: o for o in result.finished})
    assert poison.hits, "the poison was never injected"
    return engine, outputs, results


def _same_trace(a, b) -> bool:
    return a.token_ids == b.token_ids and [e.logits_digest for e in a.trace.entries] == \
        [e.logits_digest for e in b.trace.entries]


@pytest.mark.parametrize("kind", ["k_nan", "k_inf", "v_inf", "q_nan", "q_inf", "overflow"])
def test_a_poisoned_decode_step_ends_the_request_and_spares_its_neighbour(tiny_dir, monkeypatch, kind):
    engine, outputs, results = _run_poisoned(tiny_dir, monkeypatch, kind, poison_step=3)
    victim = outputs["victim"]
    assert victim.finish_reason == "error"
    assert "attention finiteness check flagged this request at step 3" in victim.error
    produced_before = sum(1 for r in results[:3] for p in r.produced if p.request_id == "victim")
    assert len(victim.token_ids) == produced_before, "the poisoned step produced a token"
    assert [(e.request_id, e.step_index) for e in engine.nonfinite_events] == [("victim", 3)]
    assert results[3].nonfinite == tuple(engine.nonfinite_events)
    assert outputs["other"].finish_reason == "length"
    assert _same_trace(outputs["other"], _alone(tiny_dir)), "the neighbour's trace changed"


def test_nothing_of_a_poisoned_prefill_step_is_published(tiny_dir, monkeypatch):
    engine = _engine(tiny_dir)
    with poisoned(monkeypatch, engine, "v_inf") as poison:
        for rid in ("victim", "other"):
            engine.add_request(PROMPTS[rid], PARAMS, request_id=rid)
        poison.armed = True
        first = engine.step()  # both prompts prefill in this step: 3 full pages would be published
        poison.armed = False
        assert [o.request_id for o in first.finished] == ["victim"] and first.finished[0].finish_reason == "error"
        assert not any(p.has_provenance for p in engine.block_manager.pages)
        while engine.has_unfinished():
            engine.step()
    # the neighbour's pages are published by its later, clean steps
    engine.add_request(PROMPTS["other"][:P + 2], PARAMS, request_id="again")
    assert engine.run()[0].num_cached_tokens == P


def test_with_the_check_off_d_says_so_and_a_poisoned_request_runs_on(tiny_dir, monkeypatch):
    engine, outputs, _ = _run_poisoned(tiny_dir, monkeypatch, "v_inf", poison_step=3, check_finite=False)
    assert engine.deployment.fields["engine"]["check_finite"] is False
    assert _engine(tiny_dir).deployment.fields["engine"]["check_finite"] is True
    assert engine.deployment.digest != _engine(tiny_dir).deployment.digest
    assert outputs["victim"].finish_reason == "length" and not engine.nonfinite_events


def test_check_mode_accepts_what_the_run_time_check_ended(tiny_dir, monkeypatch):
    engine, outputs, _ = _run_poisoned(tiny_dir, monkeypatch, "q_nan", poison_step=3, check_mode=True)
    assert outputs["victim"].finish_reason == "error" and outputs["other"].finish_reason == "length"


def test_check_mode_without_the_run_time_check_fails_loudly(tiny_dir, monkeypatch):
    with pytest.raises(KernelConfigViolation, match="not all finite"):
        _run_poisoned(tiny_dir, monkeypatch, "k_nan", poison_step=3, check_mode=True, check_finite=False)
