#!/usr/bin/env bash
# `bitcase assure --gpu` end to end on a CUDA machine, timed, with what an auditor and the
# performance notes need collected in one directory.
#
#   bench/assure_gpu.sh OUT_DIR [more `bitcase assure` options]
#
# Uses every visible GPU (the comparison suites are split over them) and keeps its state in
# $BITCASE_HOME (default .bitcase-gpu: the llama-1b model made on first use, the bundles, the
# SQLite store), so running it again resumes or reuses. With ASSURE_LIMIT_S set, the run is
# stopped (SIGTERM) after that many seconds: every suite finished by then stays stored and the
# next run resumes at the first one missing. Writes to OUT_DIR: assure.json (the result), assure.log
# (progress, summary table, resource use), compare-summary.md (counts and seconds per suite),
# report.html, trust-boundary.dot and state.tar.gz (store and bundles, for `bitcase ingest` elsewhere).
set -uo pipefail
out=${1:?usage: bench/assure_gpu.sh OUT_DIR [assure options]}
shift
mkdir -p "$out"
export BITCASE_HOME=${BITCASE_HOME:-$PWD/.bitcase-gpu}
export BITCASE_DB=${BITCASE_DB:-sqlite:///$BITCASE_HOME/bitcase.db}
export BITCASE_OUT=$out/render PYTHONUNBUFFERED=1 COLUMNS=150
mkdir -p "$BITCASE_HOME"
{
  date -u +"started %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
} > "$out/assure.log" 2>&1
started=$(date +%s.%N)
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -v)
timeout -s TERM "${ASSURE_LIMIT_S:-0}" "${timer[@]}" python3 -m assurance.cli assure --gpu --json "$@" \
  > "$out/assure.json" 2>> "$out/assure.log"
rc=$?
elapsed=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')")
echo "bitcase assure --gpu: exit $rc after $elapsed s" | tee -a "$out/assure.log"
bundles=$(ls "$BITCASE_HOME"/bundles/*/compare-*.jsonl 2>/dev/null)
if [ -n "$bundles" ]; then
  python3 bench/compare_summary.py $bundles > "$out/compare-summary.md" 2>> "$out/assure.log"
fi
cp "$BITCASE_OUT/report.html" "$BITCASE_OUT/trust-boundary.dot" "$out/" 2>/dev/null
rm -rf "$BITCASE_OUT"
tar -czf "$out/state.tar.gz" -C "$BITCASE_HOME" --exclude=models . 2>> "$out/assure.log"
exit $rc
