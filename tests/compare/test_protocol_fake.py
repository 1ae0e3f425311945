"""The protocol on the fake engine: witnesses enforced, injected faults reported exactly, control power."""

from collections import Counter

import pytest


def by_id(records):
    return {r.id.split(".", 2)[2]: r for r in records}


def test_clean_run_passes_with_exact_counts(run_fake):
    records = run_fake(["chunk", "prefix", "schedule"])
    assert all(r.status == "pass" for r in records), [r.summary for r in records if r.status != "pass"]
    counts = Counter()
    for r in records:
        counts[r.obligation] += r.details["num_comparisons"]
    assert counts == {"suite.chunk": 90, "suite.prefix": 14, "suite.schedule": 48}
    chunk = by_id(records)["chunk.b16"]
    boundaries = chunk.details["witnesses"]["chunk.b16.c00"]["chunk_boundaries"]
    assert len(boundaries) >= 2 and boundaries[-1] == 95  # the boundaries actually used are recorded
    assert chunk.details["witnesses"]["chunk.b16.c00"]["reference_chunk_boundaries"] == [95]
    assert by_id(records)["prefix.partial"].details["witnesses"]["prefix.partial.r00"]["cached_tokens"] > 0


@pytest.mark.parametrize("switch,unit,witness", [
    ("chunking", "chunk.b32", "chunked"),
    ("cache", "prefix.partial", "cache_hit"),
    ("eviction", "schedule.eviction", "evicted"),
])
def test_missing_witness_is_an_error_not_a_pass(run_fake, monkeypatch, switch, unit, witness):
    monkeypatch.setenv("BITCASE_FAKE_WITNESS_OFF", switch)
    suite = {"chunk.b32": "chunk", "prefix.partial": "prefix", "schedule.eviction": "schedule"}[unit]
    records = by_id(run_fake([suite]))
    assert records[unit].status == "error"
    text = " ".join(records[unit].details["problems"]) + " ".join(
        p for f in records[unit].details["findings"] for p in f.get("problems", []))
    assert witness in text
    assert not any(r.status == "fail" for r in records.values()), "a missing witness is not a mismatch"


def test_injected_fault_is_reported_exactly(run_fake, monkeypatch):
    # element 5 of position 1 gets +1e-3 for every request that ran in a batch of 8
    monkeypatch.setenv("BITCASE_FAKE_FAULT", "batch:8:1:5")
    records = by_id(run_fake(["batch"], shard="1/1"))
    for unit in ("batch.g2-forward", "batch.g4-shuffled", "batch.fresh"):
        assert records[unit].status == "pass"
    for order in ("forward", "reversed", "shuffled"):
        unit = records[f"batch.g8-{order}"]
        assert unit.status == "fail" and unit.details["num_failed"] == 32
    finding = records["batch.g8-reversed.p17"]
    assert finding.status == "fail" and finding.obligation == "suite.batch"
    m = finding.details["mismatch"]
    assert (m["first_differing_position"], m["element_index"]) == (1, 5)
    assert m["largest_difference"] == pytest.approx(1e-3, rel=1e-3)
    assert finding.details["request"] == "p17" and "position 1, element 5" in finding.summary
    assert sum(r.status == "fail" for r in records.values()) == 3 + 96


def test_negative_control_detects(run_fake):
    from engine.compare.summary import summarize

    records = by_id(run_fake(["negative-control"]))
    assert len(records) == 5, "control units emit no per-mismatch records"
    assert all(r.status == "pass" and r.details["num_failed"] > 0 for r in records.values()), [
        (r.summary, r.details["problems"], r.details["findings"][:1]) for r in records.values() if r.status != "pass"]
    summary = summarize(records.values())["suite.negative_control"]
    assert summary["comparisons"] == 196 and summary["detected"] > 0
    assert summary["passed"] == summary["failed"] == 0, "detections are not failures of the control"


def test_control_without_detection_fails(run_fake, monkeypatch):
    monkeypatch.setenv("BITCASE_FAKE_PERTURBATION_OFF", "1")
    records = by_id(run_fake(["negative-control"], shard="2/5"))
    (unit,) = records.values()
    assert unit.status == "fail" and unit.details["num_failed"] == 0
    assert "did NOT detect" in unit.summary
