#!/usr/bin/env bash
# The probe's positive control, timed: the default protocol against `bitcase serve` on the tiny model.
#
#   bench/conformance/bitcase_serve.sh WORK_DIR [RUNS] [more `bitcase probe` options]
#
# Makes the tiny checkpoint in WORK_DIR (outside the repository), serves it on CPU with the
# engine's defaults, runs `bitcase probe` RUNS times (default 3; --seed 1..RUNS) into WORK_DIR's
# store and bundles, and prints one line per run and the medians (total seconds, requests/s,
# seconds per scenario). Run from the repository root.
set -euo pipefail
work=${1:?usage: bench/conformance/bitcase_serve.sh WORK_DIR [RUNS] [probe options]}
runs=${2:-3}
shift $(( $# < 2 ? $# : 2 ))
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
port=${PORT:-8431}
chunk=512  # the engine's default max_num_batched_tokens: its prefill chunk
mkdir -p "$work"
[ -f "$work/tiny/config.json" ] || "${bitcase[@]}" model make --preset tiny "$work/tiny" >&2
db="sqlite:///$work/probe.db"
"${bitcase[@]}" db upgrade --db "$db" >&2
"${bitcase[@]}" serve --model "$work/tiny" --port "$port" --max-num-batched-tokens "$chunk" \
  > "$work/serve.log" 2>&1 &
servers+=($!)
wait_up "http://127.0.0.1:$port/health" 300 "$work/serve.log" "${servers[0]}"
for i in $(seq "$runs"); do
  timeout 900 "${bitcase[@]}" probe "http://127.0.0.1:$port/v1" --served-model-name tiny --chunk-size "$chunk" \
    --seed "$i" --db "$db" --out "$work/bitcase-serve-$i.jsonl" --json "$@" \
    > "$work/bitcase-serve-$i.json" 2> "$work/bitcase-serve-$i.err" || echo "run $i: exit $?" >&2
done
${PYTHON:-python3} - "$work" "$runs" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
done = [json.load(open(f"{work}/bitcase-serve-{i}.json")) for i in range(1, runs + 1)]
for i, s in enumerate(done, 1):
    per = ", ".join(f"{n} {x['status']} {x['seconds']:.1f} s" for n, x in s["scenarios"].items())
    print(f"run {i}: {s['requests']} requests in {s['seconds']:.1f} s ({s['requests_per_s']} requests/s): {per}")
median = lambda xs: statistics.median(xs)
print(f"median of {runs}: {median([s['seconds'] for s in done]):.1f} s, "
      f"{median([s['requests_per_s'] for s in done]):.2f} requests/s; per scenario: " + ", ".join(
          f"{n} {median([s['scenarios'][n]['seconds'] for s in done]):.1f} s" for n in done[0]["scenarios"]))
PY
