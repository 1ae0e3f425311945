#!/usr/bin/env bash
# The comparison protocol at full scale for one preset on one CUDA GPU, shard by shard.
#
#   bench/protocol_gpu.sh PRESET OUT_DIR [SHARDS [FIRST [LAST]]]
#
# Makes the preset's random checkpoint (seed 0) under $BITCASE_HOME/models/PRESET unless it is
# there, pins D once (`bitcase check-config --write-deployment`, kept under $BITCASE_HOME so every
# shard of the run, in this call or a later one on the same checkpoint and commit, names the same
# D), then runs shards FIRST..LAST of SHARDS (default 1: the whole run) of `bitcase compare --scale
# full --device cuda`, one after another. A shard's bundle is written when the shard ends, so on a
# machine lent for a few minutes at a time pick SHARDS so that one shard fits, and run the rest in
# later calls (every shard's units are fixed by SHARDS alone, and the shards' bundles together are
# the whole run). A shard stopped at SHARD_LIMIT_S writes the units it finished; calling the script
# again with the same OUT_DIR resumes it (`bitcase compare --resume`, from the bundles it has, into
# compare-K.rN.jsonl) and skips shards that ended with exit 0 (marked shard-K.done). Shards are not
# run side by side on one GPU: each shard starts its own cold-reference worker processes, each
# with its own engine and K/V pool, and four shards of qwen3-0.6b side by side took all 140 GiB of
# an H200 and failed most units out of memory.
# SUITES (default "all") picks suites, e.g. SUITES="batch chunk prefill-decode prefix fidelity";
# SHARD_LIMIT_S (default 540) bounds every shard; SCALE=ci DEVICE=cpu tries the script on a
# machine without a GPU. Writes to OUT_DIR: compare-K.jsonl and shard-K.log per shard,
# check-config.jsonl, deployment.json, summary.md (counts and seconds per suite,
# bench/compare_summary.py) and protocol.log (times, exit codes, peak GPU memory). Exit 0 when
# every shard exited 0.
set -uo pipefail
preset=${1:?usage: bench/protocol_gpu.sh PRESET OUT_DIR [SHARDS [FIRST [LAST]]]}
out=${2:?usage: bench/protocol_gpu.sh PRESET OUT_DIR [SHARDS [FIRST [LAST]]]}
shards=${3:-1}
first=${4:-1}
last=${5:-$shards}
home=${BITCASE_HOME:-$PWD/.bitcase-gpu}
device=${DEVICE:-cuda}
scale=${SCALE:-full}
model=$home/models/$preset
mkdir -p "$out" "$home/models"
export PYTHONUNBUFFERED=1 COLUMNS=150
log=$out/protocol.log
bitcase=(python3 -m assurance.cli)
stamp() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$log"; }

stamp "preset $preset, $scale scale on $device, shards $first..$last of $shards, suites ${SUITES:-all}"
has_smi() { command -v nvidia-smi > /dev/null; }  # absent on a machine without a GPU (SCALE=ci DEVICE=cpu)
has_smi && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> "$log" 2>&1
if [ ! -f "$model/config.json" ]; then
  stamp "making $model"
  "${bitcase[@]}" model make "$model" --preset "$preset" >> "$log" 2>&1 || { stamp "model make failed"; exit 1; }
fi
if [ ! -f "$home/deployment-$preset.json" ]; then
  "${bitcase[@]}" check-config --model "$model" --device "$device" --scale "$scale" --out "$out/check-config.jsonl" \
    --write-deployment "$home/deployment-$preset.json" >> "$log" 2>&1 || stamp "check-config exited $?"
fi
cp "$home/deployment-$preset.json" "$out/deployment.json"
suite_args=()
for s in ${SUITES:-all}; do suite_args+=(--suite "$s"); done

sampler=
: > "$out/.memory"
has_smi && { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 1000 > "$out/.memory" 2>/dev/null &
             sampler=$!; }
started=$(date +%s)
rc=0
for k in $(seq "$first" "$last"); do
  if [ -f "$out/shard-$k.done" ]; then stamp "shard $k/$shards already done"; continue; fi
  parts=$(ls "$out/compare-$k.jsonl" "$out"/compare-$k.r*.jsonl 2>/dev/null)
  resume=() target=$out/compare-$k.jsonl
  if [ -n "$parts" ]; then  # an earlier call stopped this shard: run the units its bundles lack
    cat $parts > "$out/.resume-$k.jsonl"
    target=$out/compare-$k.r$(echo "$parts" | wc -l).jsonl
    resume=(--resume "$out/.resume-$k.jsonl")
    stamp "shard $k/$shards resumes from" $parts
  fi
  timeout -s TERM "${SHARD_LIMIT_S:-540}" "${bitcase[@]}" compare --model "$model" --device "$device" --scale "$scale" \
    --shard "$k/$shards" "${suite_args[@]}" --deployment "$home/deployment-$preset.json" "${resume[@]}" \
    --out "$target" > /dev/null 2>> "$out/shard-$k.log"
  code=$?
  rm -f "$out/.resume-$k.jsonl"
  stamp "shard $k/$shards exited $code after $(( $(date +%s) - started )) s"
  if [ "$code" -eq 0 ]; then touch "$out/shard-$k.done"; else rc=1; fi
done
[ -n "$sampler" ] && kill "$sampler" 2>/dev/null
peak=$(sort -n "$out/.memory" | tail -1)
stamp "peak GPU memory ${peak:-(not sampled)}${peak:+ MiB}; all shards: $(( $(date +%s) - started )) s"
rm -f "$out/.memory"
bundles=$(ls "$out"/compare-*.jsonl 2>/dev/null)
[ -n "$bundles" ] && python3 bench/compare_summary.py $bundles > "$out/summary.md" 2>> "$log"
exit $rc
