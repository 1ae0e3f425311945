"""Benchmark the assurance graph: ``bitcase status --json`` on 10,000 nodes and 100,000 evidence items.

Generates a case (1 top goal, 99 sub-goals each with a strategy over 98 solutions: 10,000 nodes,
2% of solutions trusted), a SQLite store holding 100,000 evidence items (10 per solution: mixed
categories and statuses, code subjects fresh and stale, 5% under another deployment), then times

* the pure status engine (``assurance.status.evaluate``) in-process, with tracemalloc's peak, and
* ``bitcase status --json`` end to end in fresh processes (store read with the whole hash chain
  verified, case load, digests, evaluation, JSON), each with its own CPU time and peak RSS; one
  untimed run first writes the case cache, as any earlier command on the same case would have.

    python bench/status.py [--nodes 10000] [--evidence 100000] [--repeat 5] [--keep DIR]

The goal is ``bitcase status --json`` ≤ 3 s; results go in docs/performance.md ("Assurance graph").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evidence_db.bundle import Deployment, EvidenceRecord, Producer, Subject  # noqa: E402
from evidence_db.canonical import file_digest  # noqa: E402

CATEGORIES = ("kernel_proof", "test_result", "runtime_config_check")
# Subjects the generated evidence names; files that rarely change, so a kept store stays comparable.
CODE_FILES = ("assurance/__init__.py", "assurance/ids.py", "assurance/issues.py")


def write_case(path: Path, num_nodes: int) -> list[tuple[str, bool]]:
    """Write the case; return (solution id, is trusted) for every solution."""
    num_goals = 99
    per_goal = (num_nodes - 2 - 2 * num_goals) // num_goals
    lines = ['[case]', 'id = "bench"', 'title = "Generated benchmark case"', 'top = "G.top"', '',
             '[[node]]', 'id = "G.top"', 'kind = "goal"', 'text = "Top claim"', 'supported_by = ["S.top"]', '',
             '[[node]]', 'id = "S.top"', 'kind = "strategy"', 'text = "Argue over every part"',
             f'supported_by = [{", ".join(f"{chr(34)}G.{g}{chr(34)}" for g in range(num_goals))}]', '']
    solutions = []
    for g in range(num_goals):
        ids = [f"sn.{g}.{s}" for s in range(per_goal)]
        lines += ['[[node]]', f'id = "G.{g}"', 'kind = "goal"', f'text = "Part {g} holds"', f'source = "§{g}"',
                  f'supported_by = ["S.{g}"]', '',
                  '[[node]]', f'id = "S.{g}"', 'kind = "strategy"', f'text = "Argue over the parts of {g}"',
                  f'supported_by = [{", ".join(chr(34) + i + chr(34) for i in ids)}]', '']
        for i in ids:
            trusted = random.random() < 0.02
            lines += ['[[node]]', f'id = "{i}"', 'kind = "solution"', f'text = "Obligation {i}"']
            if trusted:
                lines += ['trusted = true', 'rationale = "Taken on trust for the benchmark"']
            else:
                lines += [f'any_of = ["{random.choice(CATEGORIES)}", "test_result"]',
                          'subjects = ["code:assurance/*.py", "deployment"]']
            lines.append('')
            solutions.append((i, trusted))
    path.write_text("\n".join(lines), encoding="utf-8")
    return solutions


def records(solutions: list[tuple[str, bool]], num_evidence: int, d: Deployment, other: Deployment):
    """Yield the evidence records, round-robin over solutions."""
    producer = Producer("bench", "1", "bench/status.py", "bench", "cpu", "2026-11-01T00:00:00Z", "2026-11-01T00:00:01Z")
    current = {f: file_digest(ROOT / f) for f in CODE_FILES}
    for n in range(num_evidence):
        obligation, _trusted = solutions[n % len(solutions)]
        code = CODE_FILES[n % len(CODE_FILES)]
        digest = current[code] if random.random() < 0.9 else "sha256:" + "0" * 64  # 10% stale
        status = "fail" if random.random() < 0.001 else "pass"
        yield EvidenceRecord(id=f"ev.{n}", category=random.choice(CATEGORIES), obligation=obligation,
                             status=status, summary=f"item {n}", producer=producer,
                             deployment=other if random.random() < 0.05 else d,
                             subjects=(Subject(f"code:{code}", digest), Subject(f"deployment:{d.digest}", d.digest)),
                             details={"n": n})


def build(workdir: Path, num_nodes: int, num_evidence: int) -> tuple[Path, Path, str]:
    """Create (or reuse) the case and the store under ``workdir``."""
    from evidence_db.migrate import ensure_store
    from evidence_db.session import open_session
    from evidence_db.store import ingest_records

    case_path, db, recorded = workdir / "case.toml", workdir / "bench.db", workdir / "code_digests.json"
    d = Deployment({"bench": "D", "accelerator": {"device_type": "cpu"}})
    current = json.dumps({f: file_digest(ROOT / f) for f in CODE_FILES}, sort_keys=True)
    if case_path.exists() and db.exists() and recorded.exists() and recorded.read_text() == current:
        return case_path, db, d.digest
    db.unlink(missing_ok=True)  # a kept store whose code subjects changed since would be all stale
    random.seed(20261101)
    solutions = write_case(case_path, num_nodes)
    ensure_store(f"sqlite:///{db}")
    started = time.perf_counter()
    with open_session(str(db), write=True) as session:
        ingest_records(session=session, records=records(solutions, num_evidence, d, Deployment({"bench": "other"})))
    recorded.write_text(current)
    print(f"setup: ingested {num_evidence} items in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return case_path, db, d.digest


def time_engine(case_path: Path, db: Path, digest: str) -> dict[str, float]:
    """In-process CPU seconds per stage: store reads, case load (cold, cached), evaluate(), JSON.

    CPU time rather than wall time, so a machine shared with other work still gives comparable
    figures. The cyclic GC is paused, as ``bitcase status`` pauses it. The store is read three
    times: as ``bitcase status`` reads it (the whole chain verified in the same pass, D's items,
    details only where the rules read them, counts under other configurations), the same without
    verification (the plain readers), and whole (every item and all details). The peak memory of
    evaluate() is measured in a second run under tracemalloc.
    """
    from assurance.scope import current_subjects, paused_gc, prepare_case
    from assurance.solution_status import RULE_DETAILS
    from assurance.status import evaluate
    from evidence_db.reviews import list_reviews
    from evidence_db.session import open_session
    from evidence_db.store import count_elsewhere, list_deployments, load_evidence
    from evidence_db.verified_read import read_verified

    with paused_gc(), open_session(str(db)) as session:
        started = time.process_time()
        fields = next(d.fields for d in list_deployments(session=session) if d.digest == digest)
        verified = read_verified(session=session, deployment_digest=digest, with_details=RULE_DETAILS)
        evidence, elsewhere, reviews = verified.evidence, verified.elsewhere, verified.reviews
        read = time.process_time() - started
        assert verified.chain.is_intact, verified.chain.first_bad
        started = time.process_time()
        load_evidence(session=session, deployment_digest=digest, with_details=RULE_DETAILS)
        count_elsewhere(session=session, deployment_digest=digest)
        list_reviews(session=session)
        read_plain = time.process_time() - started
        started = time.process_time()
        load_evidence(session=session)
        read_all = time.process_time() - started
    cache_dir = case_path.parent / "engine-cache"
    shutil.rmtree(cache_dir, ignore_errors=True)

    def run():
        return evaluate(case, evidence=evidence, reviews=reviews, subjects=current_subjects(case, fields),
                        deployment_digest=digest, deployment_fields=fields, elsewhere=elsewhere)

    with paused_gc():
        started = time.process_time()
        case, _ = prepare_case(case_path, deployment_fields=fields, cache_dir=cache_dir)
        parsed = time.process_time() - started
        started = time.process_time()
        prepare_case(case_path, deployment_fields=fields, cache_dir=cache_dir)
        cached = time.process_time() - started
        started = time.process_time()
        evaluation = run()
        evaluated = time.process_time() - started
        started = time.process_time()
        json.dumps(evaluation.to_json(), sort_keys=True, ensure_ascii=False)  # as `--json` writes it
        serialised = time.process_time() - started
    assert len(evaluation.nodes) >= 9_900, len(evaluation.nodes)
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"store_read_verified_cpu_s": round(read, 3), "store_read_unverified_cpu_s": round(read_plain, 3),
            "store_read_all_cpu_s": round(read_all, 3),
            "case_load_cold_cpu_s": round(parsed, 3), "case_load_cached_cpu_s": round(cached, 3),
            "evaluate_cpu_s": round(evaluated, 3), "to_json_and_dumps_cpu_s": round(serialised, 3),
            "evaluate_peak_mib": round(peak / 2**20, 1)}


# Runs the command given after the report path and writes its wall time and rusage there. A small
# process of its own starts the command, so the child's peak RSS is not the benchmark's: a forked
# child's ru_maxrss starts from its parent's resident memory.
_MEASURE = """
import json, os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as report:
    json.dump({"wall_s": time.perf_counter() - started, "cpu_s": usage.ru_utime + usage.ru_stime,
               "maxrss_kib": usage.ru_maxrss, "exit": os.waitstatus_to_exitcode(status)}, report)
"""


def _cli_env(home: Path) -> dict[str, str]:
    """The CLI's environment: bytecode caching on, as on a user's machine after the first run
    (the warm-up run writes the project's __pycache__; PYTHONDONTWRITEBYTECODE would make every
    run recompile every module of the project)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "BITCASE_HOME": str(home)}


def time_cli(case_path: Path, db: Path, digest: str, home: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS bytes) of one ``bitcase status --json`` in a fresh process."""
    with tempfile.TemporaryDirectory(prefix="bitcase-bench-run-") as tmp:
        report, out = Path(tmp) / "report.json", Path(tmp) / "out.json"
        command = [sys.executable, "-c", _MEASURE, str(report), sys.executable, "-c",
                   "from assurance.cli.main import main; main()",
                   "status", "--json", "--db", str(db), "--case", str(case_path), "--config", digest]
        with open(out, "wb") as stdout:
            run = subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                 env=_cli_env(home))
        measured = json.loads(report.read_text()) if report.exists() else {"exit": run.returncode}
        if measured["exit"] not in (0, 1):  # 1: the primary claim is not supported (some evidence fails)
            raise SystemExit(f"bitcase status failed ({measured['exit']}): {run.stderr}")
        doc = json.loads(out.read_bytes())
    assert doc["deployment_digest"] == digest and len(doc["nodes"]) >= 9_900
    return measured["wall_s"], measured["cpu_s"], measured["maxrss_kib"] * 1024  # KiB on Linux


def main() -> None:
    """Run the benchmark and print a JSON summary to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--evidence", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="reuse/keep the case and store in this directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bitcase-bench-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        case_path, db, digest = build(workdir, args.nodes, args.evidence)
        stages = time_engine(case_path, db, digest)
        home = workdir / "home"
        warmup = time_cli(case_path, db, digest, home)  # writes the case cache the timed runs read
        cli = [time_cli(case_path, db, digest, home) for _ in range(args.repeat)]
        summary = {
            "nodes": args.nodes, "evidence": args.evidence, "load_average": [round(x, 2) for x in os.getloadavg()],
            "in_process": stages,
            "cli_status_json_s": {"median": round(statistics.median(s for s, _, _ in cli), 3),
                                  "runs": [round(s, 3) for s, _, _ in cli]},
            "cli_cpu_s": {"median": round(statistics.median(c for _, c, _ in cli), 3),
                          "runs": [round(c, 3) for _, c, _ in cli]},
            "cli_peak_rss_mib": round(max(m for _, _, m in cli) / 2**20, 1),
            "cli_cold_case_cache": {"wall_s": round(warmup[0], 3), "cpu_s": round(warmup[1], 3),
                                    "peak_rss_mib": round(warmup[2] / 2**20, 1)},
            "goal_s": 3.0,
        }
        summary["meets_goal"] = summary["cli_status_json_s"]["median"] <= summary["goal_s"]
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
