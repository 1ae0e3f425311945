"""Counts and seconds of comparison-suite bundles: what the protocol ran, per suite, as a table.

    python bench/compare_summary.py BUNDLE.jsonl... [--json OUT.json]

Reads compare bundles (``bitcase compare`` output, or the ``compare-<suite>.jsonl`` bundles that
``bitcase assure`` writes) and prints, per obligation, the units, comparisons, passes, failures,
detections (negative control), errors and the summed unit seconds, as a markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.compare.summary import summarize  # noqa: E402
from evidence_db.bundle import EvidenceRecord  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="also write the summary as JSON here")
    args = parser.parse_args(argv)
    records = []
    for path in args.bundles:
        with open(path, encoding="utf-8") as f:
            records.extend(EvidenceRecord.from_json_dict(json.loads(line)) for line in f if line.strip())
    summary = summarize(records)
    for obligation, s in summary.items():
        s["unit_seconds"] = round(sum(r.details.get("seconds", 0.0) for r in records
                                      if r.obligation == obligation and "num_comparisons" in r.details), 1)
    columns = ("status", "units", "comparisons", "passed", "failed", "detected", "errors", "unit_seconds")
    print("| obligation | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for obligation, s in sorted(summary.items()):
        print(f"| {obligation} | " + " | ".join(str(s[c]) for c in columns) + " |")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, sort_keys=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
