"""Benchmark the HTML report on a large case: 10,000 nodes and 100,000 evidence items.

    python bench/report.py [--nodes 10000] [--items 100000] [--runs 3] [--no-diagram]

Builds a synthetic case (a top goal, ~1% sub-goals, the rest solutions, every 50th one
trusted) and evidence spread over the solutions (10% kernel proofs, 20% runtime checks, 70%
comparison results; 0.1% failing). Not timed: building the case and the evidence views.
Timed, per run: the status engine (``evaluate``), the adapter (``report_model``) and
rendering plus writing ``report.html`` (``write_report``, diagram included unless
``--no-diagram``). Prints each run, the medians and the file size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assurance.case_model import Case, Node  # noqa: E402
from assurance.ids import NodeId  # noqa: E402
from assurance.render.adapter import report_model  # noqa: E402
from assurance.render.html import RenderOptions, write_report  # noqa: E402
from assurance.status import evaluate  # noqa: E402
from evidence_db.views import EvidenceView  # noqa: E402

DEPLOYMENT = "sha256:" + "d" * 64
CATEGORY_SHARES = (("kernel_proof", 10), ("runtime_config_check", 20), ("test_result", 70))


def build_case(num_nodes: int) -> Case:
    """A top goal over ~1% sub-goals, each supported by an equal share of the solutions."""
    num_goals = max(1, num_nodes // 100)
    num_solutions = num_nodes - 2 - num_goals
    goals = [f"G.sub{g:04d}" for g in range(num_goals)]
    solutions: list[list[str]] = [[] for _ in goals]
    nodes = []
    for s in range(num_solutions):
        solutions[s % num_goals].append(f"Sn.{s:06d}")
    for g, goal in enumerate(goals):
        nodes.append(Node(id=NodeId(goal), kind="goal", text=f"Sub-claim {g}: kernel family {g} is batch-invariant",
                          supported_by=tuple(NodeId(s) for s in solutions[g]), line=10 + g))
    for s in range(num_solutions):
        node_id = NodeId(f"Sn.{s:06d}")
        if s % 50 == 49:
            nodes.append(Node(id=node_id, kind="solution", text=f"Trusted bridge {s}", is_trusted=True,
                              rationale="Taken on trust for the benchmark", obligations=(node_id,), line=s))
        else:
            category = ("kernel_proof", "runtime_config_check", "test_result")[s % 3]
            nodes.append(Node(id=node_id, kind="solution", text=f"Obligation {s} discharged by {category}",
                              obligations=(node_id,), any_of=(category,), line=s))
    top = Node(id=NodeId("G.top"), kind="goal", text="Traces agree by prefix comparability under D",
               supported_by=tuple(NodeId(g) for g in goals), in_context_of=(NodeId("C.d"),), line=1)
    context = Node(id=NodeId("C.d"), kind="context", text="Deployment configuration D", line=2)
    return Case(id="bench", title="Benchmark case", top=NodeId("G.top"), nodes=(top, context, *nodes))


def build_evidence(case: Case, num_items: int) -> list[EvidenceView]:
    """``num_items`` evidence views spread over the case's non-trusted solutions."""
    targets = [n for n in case.nodes if n.kind == "solution" and not n.is_trusted]
    items = []
    for i in range(num_items):
        node = targets[i % len(targets)]
        category = node.any_of[0]
        details = {"suite": f"suite-{i % 7}", "position": i % 128}
        if category == "kernel_proof":
            details = {"kernel": f"kernel_{i % 9}", "configuration": f"BLOCK_M=64,BLOCK_N={32 << (i % 3)}",
                       "verifier_version": "0.1.0", "num_obligations": 10 + i % 40, "time_s": round(0.01 * (i % 300), 2)}
        status = "fail" if i % 1000 == 999 else "pass"
        if status == "fail":
            details["first_mismatch"] = {"position": i % 128, "max_abs_diff": 1e-3}
        items.append(EvidenceView(
            item_id=f"ev-{i:06d}", category=category, obligation=node.obligations[0], status=status,
            summary=f"{category} for {node.id}: {status}", deployment_digest=DEPLOYMENT,
            produced_at=f"2026-11-{1 + i % 28:02d}T00:00:00Z", content_digest=f"sha256:{i:064x}",
            producer_tool="bench", producer_version="0.1.0", details=details, seq=i + 1))
    return items


def run_once(case: Case, evidence: list[EvidenceView], out_dir: Path, with_diagram: bool) -> dict:
    """Time the three stages once; return seconds per stage and the report size."""
    t0 = time.perf_counter()
    evaluation = evaluate(case, evidence=evidence, reviews=(), subjects={}, deployment_digest=DEPLOYMENT,
                          deployment_fields={"gpu": "bench"})
    t1 = time.perf_counter()
    model = report_model([(evaluation, {"gpu": "bench"}, ())], evidence=evidence, reviews=(),
                         store_ref="bench", case_ref="bench.toml")
    t2 = time.perf_counter()
    path = write_report(model, out_dir, RenderOptions(with_diagram=with_diagram))
    t3 = time.perf_counter()
    return {"evaluate_s": round(t1 - t0, 3), "adapter_s": round(t2 - t1, 3), "render_write_s": round(t3 - t2, 3),
            "report_s": round(t3 - t1, 3), "bytes": path.stat().st_size}


def main() -> None:
    """Run the benchmark and print JSON lines (one per run, then the medians)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-diagram", action="store_true")
    args = parser.parse_args()
    case = build_case(args.nodes)
    evidence = build_evidence(case, args.items)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            result = run_once(case, evidence, Path(tmp), not args.no_diagram)
            runs.append(result)
            print(json.dumps({"run": run + 1, **result}), flush=True)
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(json.dumps({"median": medians, "nodes": len(case.nodes), "items": len(evidence)}))


if __name__ == "__main__":
    main()
