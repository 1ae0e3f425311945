"""Two processes ingesting into one store lose nothing; a process killed mid-ingest leaves nothing."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import make_url

from evidence_db.canonical import canonical_json
from evidence_db.engine import create_store_engine
from evidence_db.session import open_session
from evidence_db.store import ingest_records, load_evidence
from evidence_db.verify import verify_chain
from tests.evidence_db.conftest import count_rows
from tests.evidence_db.factories import bundle, records

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def start_ingest(url: str, *paths: Path) -> subprocess.Popen:
    """`bitcase ingest PATHS --db URL` in a new process."""
    return subprocess.Popen([sys.executable, "-m", "tests.evidence_db.cli_main", "ingest", *map(str, paths),
                             "--db", url], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def write_lock_is_held(url: str) -> bool:
    """Whether some process holds the store's write lock right now."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(make_url(url).database, timeout=0)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.rollback()
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            conn.close()
    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                                        "AND pid <> pg_backend_pid()").scalar_one() > 0
    finally:
        engine.dispose()


def wait_for(condition, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def fifo_bundle(path: Path) -> Path:
    os.mkfifo(path)
    return path


def assert_store(url: str, expected_ids: set[str]) -> None:
    with open_session(url) as session:
        views = load_evidence(session=session)
        report = verify_chain(session=session)
    assert {v.item_id for v in views} == expected_ids
    assert [v.seq for v in views] == list(range(1, len(views) + 1))
    assert report.is_intact, report.faults


def test_concurrent_ingests_serialize_and_lose_nothing(store_url: str, tmp_path: Path) -> None:
    first_fifo = fifo_bundle(tmp_path / "first.jsonl")
    second = bundle(tmp_path / "second.jsonl", 1000, start=1000)
    same_again = bundle(tmp_path / "again.jsonl", 1000, start=1000)
    first = start_ingest(store_url, first_fifo)
    writer = open(first_fifo, "w", encoding="utf-8")  # the first ingest now holds the lock, waiting for input
    wait_for(lambda: write_lock_is_held(store_url), "the first ingest to take the write lock")
    others = [start_ingest(store_url, second), start_ingest(store_url, same_again)]
    time.sleep(1.0)
    assert all(p.poll() is None for p in others), "the other ingests must wait for the lock, not fail"
    feeder = threading.Thread(target=lambda: (writer.writelines(canonical_json(r.to_json_dict()) + "\n"
                                                               for r in records(1000)), writer.close()))
    feeder.start()
    outcomes = [p.communicate(timeout=120) + (p.returncode,) for p in (first, *others)]
    feeder.join()
    assert [rc for _, _, rc in outcomes] == [0, 0, 0], [err for _, err, _ in outcomes]
    summaries = sorted(err.decode().splitlines()[-1] for _, err, _ in outcomes[1:])
    assert summaries[0].startswith("ingested 0 added, 1000 unchanged")
    assert summaries[1].startswith("ingested 1000 added, 0 unchanged")
    assert_store(store_url, {f"proof:matmul:{i}" for i in range(2000)})


def test_killed_ingest_leaves_no_partial_bundle(store_url: str, tmp_path: Path) -> None:
    with open_session(store_url, write=True) as session:
        ingest_records(session=session, records=records(10, start=100))
    fifo = fifo_bundle(tmp_path / "killed.jsonl")
    victim = start_ingest(store_url, fifo)
    with open(fifo, "w", encoding="utf-8") as writer:
        # 3,000 records: a batch of 2,000 is inserted before the ingest blocks for more input
        writer.writelines(canonical_json(r.to_json_dict()) + "\n" for r in records(3000))
        writer.flush()
        wait_for(lambda: write_lock_is_held(store_url), "the ingest to hold the write lock")
        time.sleep(0.5)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    assert count_rows(store_url, "evidence_items") == 10
    assert count_rows(store_url, "subjects") == 20
    assert_store(store_url, {f"proof:matmul:{i}" for i in range(100, 110)})
    with open_session(store_url, write=True) as session:  # the lock was released with the process
        ingest_records(session=session, records=records(5))
    assert_store(store_url, {f"proof:matmul:{i}" for i in (*range(100, 110), *range(5))})
