"""Verifier speed: every (kernel, configuration) of a sealed plan, one after another on one core.

    PYTHONPATH=. python3 bench/verify.py [--plan llama-1b] [--json OUT.json]

Per plan entry: the verdict, the number of obligations, the CPU time of the verification in
this process (``time.process_time``, which includes Z3, since the solver runs on the calling
thread) and its wall time. CPU time is the figure to compare with the budget (2 s per entry,
60 s for the plan); wall time also counts waiting for a shared core. One cold pass: the
verifier's caches (layout splits, term analyses) start empty, as in ``bitcase verify``. Prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="llama-1b", help="sealed plan preset (tiny, small, llama-1b)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()

    from kernels.plan import preset_plan
    from proofs.planrun import targets_from_plan, verify_target

    start_cpu, start_wall = time.process_time(), time.perf_counter()
    targets = targets_from_plan(preset_plan(args.plan))
    rows = {}
    for t in targets:
        cpu, wall = time.process_time(), time.perf_counter()
        result = verify_target(t)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        rows[t.key] = {"key": t.key, "verdict": result.verdict, "obligations": len(result.obligations),
                       "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
    total_cpu = sum(r["cpu_s"] for r in rows.values())
    print(f"| entry ({args.plan}) | verdict | obligations | CPU s | wall s |")
    print("|---|---|---:|---:|---:|")
    for r in rows.values():
        print(f"| {r['key']} | {r['verdict']} | {r['obligations']} | {r['cpu_s']:.2f} | {r['wall_s']:.2f} |")
    print(f"| **total** | | {sum(r['obligations'] for r in rows.values())} | {total_cpu:.2f} | "
          f"{sum(r['wall_s'] for r in rows.values()):.2f} |")
    print(f"\nprocess: {time.process_time() - start_cpu:.2f} s CPU, {time.perf_counter() - start_wall:.2f} s wall "
          "(plan construction included)")
    if args.json:
        args.json.write_text(json.dumps(list(rows.values()), indent=2), encoding="utf-8")
    return 0 if all(r["verdict"] == "VERIFIED" for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
