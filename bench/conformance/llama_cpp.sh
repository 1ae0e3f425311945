#!/usr/bin/env bash
# `bitcase probe` against llama.cpp's `llama-server`, --parallel 1 and --parallel 4, on a GGUF
# converted from a bitcase tiny checkpoint; both runs go into one example store.
#
#   bench/conformance/llama_cpp.sh WORK_DIR [more `bitcase probe` options]
#
# Run from the repository root. WORK_DIR (outside the repository) keeps the build
# (llama_cpp_build.sh, about 21 minutes of CPU on 2 cores the first time), the checkpoint, the
# GGUF, the server logs, the store WORK_DIR/example.db, the bundles WORK_DIR/llama-cpp-pN.jsonl,
# each run's JSON summary, and the report WORK_DIR/report/. PYTHON names the interpreter that has
# bitcase installed (default python3).
set -euo pipefail
work=${1:?usage: bench/conformance/llama_cpp.sh WORK_DIR [probe options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
python=${PYTHON:-python3}
"$here/llama_cpp_build.sh" "$work"
work=$(cd "$work" && pwd)
src=$work/llama.cpp
batch=128  # --batch-size and --ubatch-size: a prompt is prefilled in chunks of this many tokens
if [ ! -f "$work/tiny-f32.gguf" ]; then
  [ -f "$work/tiny/config.json" ] || "${bitcase[@]}" model make --preset tiny "$work/tiny" >&2
  # The converter gets the weights, config.json and a SentencePiece vocabulary of the same size.
  rm -rf "$work/tiny-spm" && mkdir -p "$work/tiny-spm"
  cp "$work/tiny/config.json" "$work/tiny/model.safetensors" "$work/tiny-spm/"
  PYTHONPATH=$work/convert-deps "$python" "$here/sentencepiece_vocab.py" "$work/tiny" "$work/tiny-spm"
  PYTHONPATH=$work/convert-deps timeout 600 "$python" "$src/convert_hf_to_gguf.py" "$work/tiny-spm" \
    --outtype f32 --outfile "$work/tiny-f32.gguf" > "$work/convert.log" 2>&1 \
    || { tail -20 "$work/convert.log" >&2; exit 1; }
fi
version=$("$src/build/bin/llama-server" --version 2>&1 | grep -m1 version || true)
db=${PROBE_DB:-sqlite:///$work/example.db}  # PROBE_DB: one store for several scripts
"${bitcase[@]}" db upgrade --db "$db" >&2
for parallel in 1 4; do
  port=$(( ${PORT:-8440} + parallel ))
  ctx=$(( 1024 * parallel ))  # 1024 positions per slot
  flags=(--parallel "$parallel" --ctx-size "$ctx" --batch-size "$batch" --ubatch-size "$batch" --threads 2
         --metrics --ignore-eos --alias tiny)
  log=$work/llama-server-p$parallel.log
  "$src/build/bin/llama-server" -m "$work/tiny-f32.gguf" --host 127.0.0.1 --port "$port" "${flags[@]}" \
    > "$log" 2>&1 &
  pid=$!
  servers+=("$pid")
  wait_up "http://127.0.0.1:$port/health" 120 "$log" "$pid"
  "$python" - "$work/deployment-p$parallel.json" "$version" "$batch" "${flags[*]}" <<'PY'
import json, sys
out, version, batch, flags = sys.argv[1:]
json.dump({"fields": {"engine": "llama.cpp llama-server", "build": version,
                      "source": "vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist, GGML_NATIVE=ON, CPU",
                      "model": "bitcase tiny preset (seed 0) converted with convert_hf_to_gguf.py --outtype f32",
                      "flags": flags, "chunk_size": int(batch)}}, open(out, "w"), indent=1)
PY
  rc=0
  timeout 1200 "${bitcase[@]}" probe "http://127.0.0.1:$port/v1" --served-model-name tiny --api llama.cpp \
    --deployment "$work/deployment-p$parallel.json" --db "$db" --out "$work/llama-cpp-p$parallel.jsonl" \
    --json "$@" > "$work/llama-cpp-p$parallel.json" 2> "$work/llama-cpp-p$parallel.err" || rc=$?
  echo "llama-server --parallel $parallel: bitcase probe exit $rc (1: findings)" >&2
  tail -3 "$work/llama-cpp-p$parallel.err" >&2
  stop_server "$pid"
done
rc=0  # report exits 1 when a claim is defeated: a finding, not a failure of this script
"${bitcase[@]}" report --case assurance/cases/external.toml --db "$db" --out "$work/report" >&2 || rc=$?
(( rc <= 1 )) || exit "$rc"
echo "report: $work/report/report.html" >&2
