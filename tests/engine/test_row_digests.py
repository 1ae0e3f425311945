"""Logit-row digests computed by worker threads equal the trace's digest of the row."""

import hashlib
from concurrent.futures import Future

import pytest
import torch

from engine.row_digests import PendingEntry, digest_later, resolve_entries
from engine.sampling_params import SamplerState
from engine.trace import TraceEntry, row_digest


def test_the_digest_is_sha256_of_the_rows_float32_bytes():
    row = torch.randn(4, 1000)[2]  # a view into a larger tensor, as a step's rows are
    row[3] = float("nan")
    expected = "sha256:" + hashlib.sha256(row.contiguous().numpy().tobytes()).hexdigest()
    assert row_digest(row) == expected == digest_later(row).result()


def test_pending_entries_resolve_in_place_to_trace_entries():
    rows = [torch.randn(50) for _ in range(3)]
    state = SamplerState(7, 1)
    entries = [PendingEntry(i, 10 + i, state, digest_later(r), r if i else None) for i, r in enumerate(rows)]
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
