"""Logit-row digests computed by worker threads equal the trace's digest of the row, and start when asked."""

import hashlib
from concurrent.futures import Future

import pytest
import torch

from engine.row_digests import DigestQueue, PendingEntry, PendingTraces, resolve_entries
from engine.sampling_params import SamplerState
from engine.trace import TraceEntry, row_digest


def test_the_digest_is_sha256_of_the_rows_float32_bytes():
    row = torch.randn(4, 1000)[2]  # a view into a larger tensor, as a step's rows are
    row[3] = float("nan")
    expected = "sha256:" + hashlib.sha256(row.contiguous().numpy().tobytes()).hexdigest()
    queue = DigestQueue()
    future = queue.add(row)
    queue.start()
    assert row_digest(row) == expected == future.result(timeout=30)
    assert row_digest(row.double()) == row_digest(row.clone()) == expected  # converted to contiguous float32 first


def test_queued_digests_start_only_when_the_queue_is_started():
    queue = DigestQueue()
    rows = [torch.randn(1000) for _ in range(5)]
    futures = [queue.add(r) for r in rows]
    assert len(queue) == 5 and not any(f.done() for f in futures)
    queue.start()
    assert len(queue) == 0
    assert [f.result(timeout=30) for f in futures] == [row_digest(r) for r in rows]
    queue.start()  # nothing queued: nothing happens


def test_a_digest_that_fails_on_a_worker_fails_its_future():
    queue = DigestQueue()
    future = queue.add("not a tensor")  # type: ignore[arg-type]
    queue.start()
    with pytest.raises(AttributeError):
        future.result(timeout=30)


def test_pending_entries_resolve_in_place_to_trace_entries():
    rows = [torch.randn(50) for _ in range(3)]
    state = SamplerState(7, 1)
    queue = DigestQueue()
    entries = [PendingEntry(i, 10 + i, state, queue.add(r), r if i else None) for i, r in enumerate(rows)]
    queue.start()
    done = TraceEntry(3, 1, state, row_digest(rows[0]))
    trace = entries + [done]
    assert resolve_entries(trace) is trace
    assert trace[3] is done
    for i, entry in enumerate(trace[:3]):
        assert isinstance(entry, TraceEntry) and entry.logits_digest == row_digest(rows[i])
        assert (entry.position, entry.token, entry.sampler_state) == (i, 10 + i, state)
    assert trace[0].logits is None and trace[1].logits is rows[1]


def test_a_failed_digest_surfaces_when_the_entry_resolves():
    failed: Future = Future()
    failed.set_exception(RuntimeError("hash worker died"))
    with pytest.raises(RuntimeError, match="hash worker died"):
        resolve_entries([PendingEntry(0, 1, SamplerState(0, 1), failed, None)])


def test_pending_traces_resolve_the_done_entries_and_keep_watching_the_rest():
    state = SamplerState(7, 1)
    done: Future = Future()
    done.set_result("sha256:aa")
    running: Future = Future()
    failed: Future = Future()
    failed.set_exception(RuntimeError("hash worker died"))
    first = [PendingEntry(0, 5, state, done, None), PendingEntry(1, 6, state, running, None)]
    second = [PendingEntry(0, 9, state, failed, None)]
    watched = PendingTraces()
    for trace in (first, second):
        for index in range(len(trace)):
            watched.add(trace, index)
    watched.resolve_done()
    assert first[0] == TraceEntry(0, 5, state, "sha256:aa") and isinstance(first[1], PendingEntry)
    assert isinstance(second[0], PendingEntry) and len(watched) == 1  # a failure is left to the output
    with pytest.raises(RuntimeError, match="hash worker died"):
        resolve_entries(second)
    running.set_result("sha256:bb")
    watched.resolve_done()
    assert first[1] == TraceEntry(1, 6, state, "sha256:bb") and len(watched) == 0


def test_the_engine_resolves_a_running_requests_trace_as_it_goes(tmp_path):
    """Digests done a step or more ago are trace entries already; the output is the same as without."""
    from engine.checkpoint import make_checkpoint
    from engine.config import EngineConfig
    from engine.llm_engine import LLMEngine
    from engine.sampling_params import SamplingParams

    engine = LLMEngine(make_checkpoint("tiny", tmp_path / "m", seed=0), EngineConfig(device="cpu", dtype="float32"))
    engine.add_request([1, 2, 3], SamplingParams(max_tokens=12, ignore_eos=True))
    for _ in range(8):
        engine.step()
    (seq,) = engine.scheduler.running
    engine.digests.start()  # the last step's row is queued until the next step starts it
    for entry in seq.trace:
        if isinstance(entry, PendingEntry):
            entry.digest.result(timeout=30)
    engine.step()
    assert sum(isinstance(e, PendingEntry) for e in seq.trace) <= 1  # at most the row of the step just run
    outputs = engine.run()
    alone = LLMEngine(engine.model_dir, EngineConfig(device="cpu", dtype="float32"))
    alone.pending_traces.resolve_done = lambda: None  # every entry resolved only by the output
    alone.add_request([1, 2, 3], SamplingParams(max_tokens=12, ignore_eos=True))
    assert [e.logits_digest for e in outputs[0].trace.entries] == \
        [e.logits_digest for e in alone.run()[0].trace.entries]
    assert len(outputs[0].trace.entries) == 12
    engine.pending_traces.resolve_done()  # entries the outputs resolved are no longer watched
    assert len(engine.pending_traces) == 0
