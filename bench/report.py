"""Benchmark the HTML report on the 10,000-node, 100,000-item case of ``bench/status.py``.

Reuses that benchmark's generator (a case of 10,000 nodes and a SQLite store of 100,000
evidence items; ingesting them is setup, not timed), then times

* in-process CPU seconds per stage: reading the store and evaluating the case under D
  (``load_state``), the adapter (``report_model``), and rendering plus writing
  ``report.html`` with its diagram (``write_report``);
* ``bitcase report --config D`` end to end in a fresh process: wall and CPU seconds, and
  the size of the file it writes.

    python bench/report.py [--nodes 10000] [--evidence 100000] [--repeat 3] [--keep DIR]

The goal is ``bitcase report`` ≤ 10 s; results go in docs/performance.md ("Report").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from status import build  # noqa: E402  (bench/status.py: the shared case and store generator)

GOAL_S = 10.0


def time_stages(case_path: Path, db: Path, digest: str, out_dir: Path) -> dict[str, float]:
    """In-process CPU and wall seconds of each stage of one report, and the report's size."""
    from assurance.render.adapter import report_model
    from assurance.render.html import RenderOptions, write_report
    from assurance.render.loading import load_state

    figures: dict[str, float] = {}

    def timed(name, fn):
        cpu, wall = time.process_time(), time.perf_counter()
        value = fn()
        figures[f"{name}_cpu_s"] = round(time.process_time() - cpu, 3)
        figures[f"{name}_wall_s"] = round(time.perf_counter() - wall, 3)
        return value

    state = timed("store_read_and_evaluate", lambda: load_state(db=str(db), case_path=case_path, config=digest))
    model = timed("adapter", lambda: report_model(
        [(s.evaluation, s.fields, s.notes) for s in state.scopes], evidence=state.evidence, reviews=state.reviews,
        store_ref=state.store_ref, case_ref=state.case_ref, case_digest=state.case_digest))
    path = timed("render_and_write", lambda: write_report(model, out_dir, RenderOptions()))
    assert len(model.scopes[0].nodes) >= 9_900 and len(model.scopes[0].evidence) >= 90_000
    figures["report_bytes"] = path.stat().st_size
    return figures


def time_cli(case_path: Path, db: Path, digest: str, out_dir: Path, home: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``bitcase report`` in a fresh process."""
    command = [sys.executable, "-c", "from assurance.cli.main import main; main()", "report",
               "--db", str(db), "--case", str(case_path), "--config", digest, "--out", str(out_dir)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "BITCASE_HOME": str(home)})
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):  # 1: a top claim is not supported, which the generated case may be
        raise SystemExit(f"bitcase report failed ({out.returncode}): {out.stderr}")
    assert Path(out.stdout.strip()) == out_dir / "report.html"
    return seconds, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    """Run the benchmark and print a JSON summary to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--evidence", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="reuse/keep the case and store in this directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bitcase-report-bench-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        case_path, db, digest = build(workdir, args.nodes, args.evidence)
        stages = time_stages(case_path, db, digest, Path(tmp) / "in-process")
        cli = [time_cli(case_path, db, digest, Path(tmp) / f"cli-{i}", workdir / "home") for i in range(args.repeat)]
        wall = statistics.median(s for s, _ in cli)
        summary = {
            "nodes": args.nodes, "evidence": args.evidence, "load_average": [round(x, 2) for x in os.getloadavg()],
            "in_process": stages,
            "cli_report_s": {"median": round(wall, 3), "runs": [round(s, 3) for s, _ in cli]},
            "cli_cpu_s": {"median": round(statistics.median(c for _, c in cli), 3), "runs": [round(c, 3) for _, c in cli]},
            "goal_s": GOAL_S, "meets_goal": wall <= GOAL_S,
        }
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
