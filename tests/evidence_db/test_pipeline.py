"""Large files are prepared in a worker process: same rows, same errors, nothing left running."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import text

from evidence_db.canonical import canonical_json
from evidence_db.errors import BundleError, StoreError
from evidence_db.ingest import ingest_paths
from evidence_db.migrate import upgrade
from evidence_db.pipeline import can_use_worker, prepared_in_worker
from evidence_db.prepare import CheckedRecord, Preparer
from evidence_db.session import open_session
from evidence_db.store import BATCH_SIZE
from evidence_db.verify import verify_chain
from tests.evidence_db.conftest import count_rows
from tests.evidence_db.test_concurrency import start_ingest, wait_for, write_lock_is_held
from tests.evidence_db.factories import record_dict

pytestmark = pytest.mark.skipif(not can_use_worker(), reason="the worker process is used on Linux only")

IN_PROCESS, IN_WORKER = 1 << 60, 0  # worker_min_bytes: never / always use the worker


def new_store(tmp_path: Path, name: str) -> str:
    url = f"sqlite:///{tmp_path / name}.db"
    upgrade(url)
    return url


def write_bundle_lines(path: Path, values: list[dict]) -> Path:
    path.write_text("".join(canonical_json(v) + "\n" for v in values), encoding="utf-8")
    return path


def stored_rows(url: str) -> list[tuple]:
    with open_session(url) as session:
        assert verify_chain(session=session).is_intact
        return session.execute(text("SELECT seq, record_id, content_digest, chain_digest, details FROM evidence_items "
                                    "ORDER BY seq")).all()


def ingest_error(url: str, path: Path, worker_min_bytes: int) -> BundleError:
    with pytest.raises(BundleError) as info, open_session(url, write=True) as session:
        ingest_paths(session=session, paths=[path], worker_min_bytes=worker_min_bytes)
    return info.value


def test_worker_stores_exactly_what_a_single_process_stores(tmp_path: Path) -> None:
    worker_url, other_url = new_store(tmp_path, "worker"), new_store(tmp_path, "other")
    path = write_bundle_lines(tmp_path / "b.jsonl", [record_dict(i) for i in range(BATCH_SIZE + 50)])
    for url, worker_min_bytes in ((worker_url, IN_WORKER), (other_url, IN_PROCESS)):
        with open_session(url, write=True) as session:
            [(_, result)] = ingest_paths(session=session, paths=[path], worker_min_bytes=worker_min_bytes)
        assert (result.added, result.unchanged) == (BATCH_SIZE + 50, 0)
    assert stored_rows(worker_url) == stored_rows(other_url)


@pytest.mark.parametrize("bad_line", [1, BATCH_SIZE + 7])  # in the first batch; after one batch was appended
def test_a_bad_record_gives_the_same_error_and_writes_nothing(tmp_path: Path, bad_line: int) -> None:
    url = new_store(tmp_path, "store")
    values = [record_dict(i) for i in range(BATCH_SIZE + 20)]
    values[bad_line - 1] = {**values[bad_line - 1], "status": "passed"}
    path = write_bundle_lines(tmp_path / "bad.jsonl", values)
    in_worker, in_process = (ingest_error(url, path, size) for size in (IN_WORKER, IN_PROCESS))
    assert type(in_worker) is type(in_process) is BundleError
    assert (str(in_worker), in_worker.where, in_worker.field, in_worker.hint) == \
           (str(in_process), in_process.where, in_process.field, in_process.hint)
    assert in_worker.where == f"{path}:{bad_line} (id 'proof:matmul:{bad_line - 1}')"
    assert count_rows(url, "evidence_items") == 0


@pytest.mark.parametrize("later_problem", [{"status": "passed"}, {"summary": "\ud800"}])
def test_the_first_bad_record_is_reported_whichever_process_finds_it(tmp_path: Path, later_problem: dict) -> None:
    """Unpaired surrogates are found while hashing, in the inserting process; the first bad record still wins."""
    values = [record_dict(i) for i in range(30)]
    values[10] = {**values[10], "summary": "\udfff"}
    values[20] = {**values[20], **later_problem}
    path = tmp_path / "two-problems.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in values), encoding="ascii")
    in_worker, in_process = (ingest_error(new_store(tmp_path, f"s{size}"), path, size)
                             for size in (IN_WORKER, IN_PROCESS))
    assert str(in_worker) == str(in_process)
    assert in_worker.where.startswith(f"{path}:11 ") and "unpaired UTF-16 surrogate" in str(in_worker)


def test_unreadable_lines_and_conflicts_are_reported_as_in_one_process(tmp_path: Path) -> None:
    good = canonical_json(record_dict(0))
    for name, content in (("utf8", good.encode() + b"\n\xff\xfe\n"), ("json", good.encode() + b"\n{\"id\": 1,\n"),
                          ("conflict", (good + "\n" + json.dumps(record_dict(0, summary="x")) + "\n").encode())):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(content)
        errors = []
        for size in (IN_WORKER, IN_PROCESS):
            errors.append(ingest_error(new_store(tmp_path, f"{name}-{size}"), path, size))
        assert (type(errors[0]), str(errors[0]), errors[0].hint) == (type(errors[1]), str(errors[1]), errors[1].hint)


def _records(count: int) -> Iterator[CheckedRecord]:
    check = Preparer().check
    return (check(record_dict(i), f"record {i + 1}") for i in range(count))


def test_a_worker_that_dies_is_a_store_error() -> None:
    def die() -> Iterator[CheckedRecord]:
        yield from _records(3)
        os._exit(3)

    with pytest.raises(StoreError, match=r"stopped unexpectedly \(exit code 3\)"):
        with prepared_in_worker(die, batch_size=2) as records:
            list(records)


def test_a_bug_in_the_worker_is_reported_with_its_traceback() -> None:
    def broken() -> Iterator[CheckedRecord]:
        yield from _records(1)
        raise KeyError("no such thing")

    with pytest.raises(RuntimeError, match="KeyError: 'no such thing'"):
        with prepared_in_worker(broken, batch_size=10) as records:
            list(records)


def test_the_worker_stops_when_the_reader_fails_midway() -> None:
    # only this block's worker: other tests may keep processes of their own alive (a served engine)
    def workers() -> list:
        return [p for p in multiprocessing.active_children() if p.name == "bitcase-ingest-prepare"]

    with pytest.raises(ValueError, match="stop"):
        with prepared_in_worker(lambda: _records(10_000), batch_size=10) as records:
            next(records)
            [worker] = workers()
            assert worker.is_alive(), "the worker runs while records are read"
            raise ValueError("stop")
    assert not worker.is_alive() and worker.exitcode is not None and not workers()


def test_records_arrive_complete_and_in_order() -> None:
    with prepared_in_worker(lambda: _records(25), batch_size=4) as records:
        received = list(records)
    prepare = Preparer()
    assert received == [prepare(record_dict(i), f"record {i + 1}") for i in range(25)]


def _child_pids(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in children.read_text().split()] if children.exists() else []


def _is_gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the worker process through /proc (Linux)")
def test_killing_a_two_process_ingest_leaves_nothing_and_no_worker(tmp_path: Path) -> None:
    url = new_store(tmp_path, "killed")
    template = canonical_json(record_dict(0))
    path = tmp_path / "large.jsonl"  # ~40 MB: several seconds of ingest, far above the worker threshold
    path.write_text("".join(template.replace('"proof:matmul:0"', f'"proof:matmul:{i}"') + "\n"
                            for i in range(60_000)), encoding="utf-8")
    victim = start_ingest(url, path)
    wait_for(lambda: _child_pids(victim.pid) and write_lock_is_held(url), "the ingest's worker and write lock")
    [worker] = _child_pids(victim.pid)
    victim.kill()
    victim.wait(timeout=30)
    wait_for(lambda: _is_gone(worker), "the worker to exit", timeout_s=30)
    assert count_rows(url, "evidence_items") == 0
    with open_session(url) as session:
        assert verify_chain(session=session).is_intact
