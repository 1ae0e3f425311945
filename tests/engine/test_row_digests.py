"""Logit-row digests computed by worker threads equal the trace's digest of the row, and start when asked."""

import hashlib
from concurrent.futures import Future

import pytest
import torch

from engine.row_digests import DigestQueue, PendingEntry, resolve_entries
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
