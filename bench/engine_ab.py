"""Decode A/B on one GPU: this tree against another (a commit exported with `git archive`).

    PYTHONPATH=. python3 bench/engine_ab.py --base BASE_TREE --out DIR [--rounds 2] [--budget-s 80]

Makes one llama-1b checkpoint, then runs ``bench/engine_gpu.py --parts copy_rate,engine_decode,
decode_profile`` on it in this tree ("new"), in each ``--variant NAME=DIR`` and in BASE_TREE, one
process after another in that order every round, so every tree sees the same checkpoint, GPU and
drift of the machine. Writes each process's ``engine_gpu.json`` as ``DIR/TREE-N.json`` and
``DIR/ab.md``: per round, tree and context, decode tokens/s and step time (CUDA graphs, overlapped,
medians of the process's runs), the graph replay's GPU time and plan launches a step; then each tree's medians over
the rounds with their ratios to base's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _one(tree: Path, model_dir: Path, out: Path, budget_s: float, extra: list[str]) -> dict[str, Any]:
    """One engine_gpu.py process in ``tree``; its results (or the error it ended with)."""
    scratch = Path(tempfile.mkdtemp(prefix="engine-ab-"))
    command = [sys.executable, "bench/engine_gpu.py", "--out", str(scratch), "--model-dir", str(model_dir),
               "--parts", "checkpoint,copy_rate,engine_decode,decode_profile", "--budget-s", str(budget_s), *extra]
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(command, cwd=tree, env=env, timeout=budget_s + 240, capture_output=True, text=True)
        result = scratch / "engine_gpu.json"
        if not result.exists():
            return {"error": f"engine_gpu.py in {tree} exited {done.returncode}: {done.stderr[-2000:]}"}
        shutil.copy(result, out)
        return json.loads(result.read_text())
    except subprocess.TimeoutExpired:
        return {"error": f"engine_gpu.py in {tree} ran past {budget_s + 240:.0f} s"}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _decode(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per context: decode tokens/s and step ms (medians of the process's runs), graph replay ms and
    plan launches a step."""
    parts = results.get("parts", {})
    graphs = (parts.get("engine_decode", {}).get("result") or {}).get("graphs", {})
    profile = parts.get("decode_profile", {}).get("result") or {}
    out = {}
    for context in sorted({*graphs, *profile}, key=int):
        g, p = graphs.get(context, {}), profile.get(context, {})
        out[context] = {"tokens_per_s": (g.get("tokens_per_s") or {}).get("median"),
                        "step_ms": (g.get("step_ms") or {}).get("median"),
                        "graph_gpu_ms": p.get("graph_gpu_ms"), "launches": p.get("plan_launches_per_step"),
                        "not_run": g.get("skipped") or g.get("error")}
    return out


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def summary(rounds: list[dict[str, dict[str, Any]]]) -> str:
    """Markdown: every round's figures by tree, then each tree's medians over the rounds against base's."""
    sides = list(rounds[0])
    contexts = sorted({c for r in rounds for side in r.values() for c in side}, key=int)
    lines = ["| round | tree | " + " | ".join(f"{int(c):,}: tok/s, step ms, graph ms" for c in contexts)
             + " | launches |", "|---|---|" + "---|" * len(contexts) + "---|"]
    for i, r in enumerate(rounds, 1):
        for side in sides:
            cells = [f"{_fmt(r[side].get(c, {}).get('tokens_per_s'), ',.0f')}, "
                     f"{_fmt(r[side].get(c, {}).get('step_ms'), '.3f')}, "
                     f"{_fmt(r[side].get(c, {}).get('graph_gpu_ms'), '.3f')}" for c in contexts]
            launches = {r[side][c].get("launches") for c in r[side]} - {None}
            lines.append(f"| {i} | {side} | " + " | ".join(cells) + f" | {_fmt(max(launches, default=None), 'd')} |")
    # a dash from a decode the process did not run says why
    missing = [f"- round {i}, {side}, context {int(c):,}: decode not run: {r[side][c]['not_run']}"
               for i, r in enumerate(rounds, 1) for side in sides for c in contexts
               if r[side].get(c, {}).get("not_run")]
    if missing:
        lines += ["", "Not measured, with the reason the process gave (for a time budget, raise --budget-s):", "",
                  *missing]

    def median(side: str, c: str, key: str) -> float | None:
        values = [r[side].get(c, {}).get(key) for r in rounds]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None
    lines += ["", "Medians over the rounds, and their ratio to base's:", "",
              "| tree | " + " | ".join(f"{int(c):,}: tok/s (ratio), graph ms (ratio)" for c in contexts) + " |",
              "|---|" + "---|" * len(contexts)]
    for side in sides:
        cells = []
        for c in contexts:
            parts = []
            for key, spec in (("tokens_per_s", ",.0f"), ("graph_gpu_ms", ".3f")):
                value, base = median(side, c, key), median("base", c, key)
                ratio = f" ({value / base:.3f})" if value is not None and base else ""
                parts.append(_fmt(value, spec) + ratio)
            cells.append(", ".join(parts))
        lines.append(f"| {side} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the other tree (the repository at another commit)")
    parser.add_argument("--out", type=Path, required=True, help="directory for the JSON results and ab.md")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                        help="a further tree to time in every round (repeatable)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of one process per tree")
    parser.add_argument("--budget-s", type=float, default=80.0, help="engine_gpu.py's budget per process")
    parser.add_argument("--model-dir", type=Path, help="an existing llama-1b checkpoint (default: made once here)")
    args, extra = parser.parse_known_args(argv)
    trees = [("new", REPO)]
    for spec in args.variant:
        name, _, tree = spec.partition("=")
        if not name or name in ("new", "base") or not tree:
            parser.error(f"--variant {spec!r}: give NAME=DIR with a NAME other than new and base")
        trees.append((name, Path(tree).resolve()))
    trees.append(("base", args.base.resolve()))
    for name, tree in trees:
        if not (tree / "bench" / "engine_gpu.py").is_file():
            parser.error(f"{name} tree {tree}: no bench/engine_gpu.py there; export a commit with "
                         "`git archive REV | tar -x -C DIR`")
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = None
    model_dir = args.model_dir
    if model_dir is None:
        sys.path.insert(0, str(REPO))
        from engine.checkpoint import make_checkpoint

        scratch = Path(tempfile.mkdtemp(prefix="engine-ab-model-"))
        model_dir = make_checkpoint("llama-1b", scratch / "llama-1b", seed=0)
    rounds = []
    try:
        for i in range(1, args.rounds + 1):
            pair = {}
            for side, tree in trees:
                print(f"round {i}: {side}", file=sys.stderr, flush=True)
                results = _one(tree, Path(model_dir), args.out / f"{side}-{i}.json", args.budget_s, extra)
                if "error" in results:
                    print(results["error"], file=sys.stderr, flush=True)
                pair[side] = _decode(results)
            rounds.append(pair)
            (args.out / "ab.md").write_text(summary(rounds))
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(summary(rounds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
