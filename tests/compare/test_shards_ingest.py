"""Shards written as bundles and ingested: exactly the full counts; a duplicate comparison is rejected."""

from collections import Counter

import pytest

from evidence_db.bundle import write_bundle
from evidence_db.errors import RecordConflict
from evidence_db.ingest import ingest_paths
from evidence_db.migrate import upgrade
from evidence_db.session import open_session
from evidence_db.store import load_evidence


def _ingest(url, path):
    with open_session(url, write=True) as session:
        ingest_paths(session=session, paths=[path])


def test_all_shards_give_full_counts_and_duplicates_are_rejected(run_fake, tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    for i in (1, 2, 3):
        bundle = tmp_path / f"shard{i}.jsonl"
        write_bundle(bundle, run_fake(["chunk", "prefix"], shard=f"{i}/3"))
        _ingest(url, bundle)
    with open_session(url) as session:
        stored = load_evidence(session=session)
    units = [e for e in stored if "num_comparisons" in e.details]
    counts = Counter()
    for e in units:
        counts[e.obligation] += e.details["num_comparisons"]
    assert counts == {"suite.chunk": 90, "suite.prefix": 14}
    assert {e.details["shard"] for e in units} == {"1/3", "2/3", "3/3"}
    for e in units:  # every unit record says which units make its suite complete
        assert set(e.details["suite_units"]) == {u.details["unit"] for u in units if u.obligation == e.obligation}

    # the same comparisons again, from an overlapping sharding: same ids, new content -> rejected
    again = tmp_path / "again.jsonl"
    write_bundle(again, run_fake(["prefix"], shard="1/1"))
    with pytest.raises(RecordConflict, match="already stored"):
        _ingest(url, again)
    # a deliberate, labelled re-run gets its own ids
    labelled = tmp_path / "labelled.jsonl"
    write_bundle(labelled, run_fake(["prefix"], shard="1/1", label="nightly-2"))
    _ingest(url, labelled)
