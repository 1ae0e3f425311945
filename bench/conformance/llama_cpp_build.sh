#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the source vendored in the llama-cpp-python sdist, and
# installs what its GGUF converter imports, all under WORK_DIR (outside the repository).
#
#   bench/conformance/llama_cpp_build.sh WORK_DIR
#
# Idempotent: a finished step is skipped when run again. Takes about 21 minutes of CPU on 2 cores;
# run it under `nice -n 19` on a shared machine. Leaves WORK_DIR/llama.cpp/build/bin/llama-server,
# WORK_DIR/llama.cpp/convert_hf_to_gguf.py and WORK_DIR/convert-deps (a --target install).
set -euo pipefail
work=${1:?usage: bench/conformance/llama_cpp_build.sh WORK_DIR}
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
python=${PYTHON:-python3}
jobs=${BUILD_JOBS:-2}
mkdir -p "$work"
work=$(cd "$work" && pwd)
src=$work/llama.cpp
if [ ! -f "$src/CMakeLists.txt" ]; then
  echo "fetching the llama-cpp-python==$version sdist" >&2
  timeout 900 "$python" -m pip download --no-deps --no-binary llama-cpp-python -d "$work/sdist" \
    "llama-cpp-python==$version"
  tar -xzf "$work/sdist/llama_cpp_python-$version.tar.gz" -C "$work"
  mv "$work/llama_cpp_python-$version/vendor/llama.cpp" "$src"
  rm -rf "$work/llama_cpp_python-$version"
fi
if [ ! -x "$src/build/bin/llama-server" ]; then
  echo "configuring and building llama-server (-j$jobs)" >&2
  # The UI flags keep the build from downloading a web UI; the rest is the server alone.
  cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF > "$work/cmake-configure.log" 2>&1 \
    || { tail -30 "$work/cmake-configure.log" >&2; exit 1; }
  cmake --build "$src/build" --target llama-server -j"$jobs" > "$work/cmake-build.log" 2>&1 \
    || { tail -30 "$work/cmake-build.log" >&2; exit 1; }
fi
if [ ! -d "$work/convert-deps/transformers" ]; then
  echo "installing the converter's imports into $work/convert-deps" >&2
  # A --target install: the converter runs with these beside the project's interpreter, which
  # stays untouched. gguf comes from the same vendored tree as the converter.
  timeout 1200 "$python" -m pip install --quiet --target "$work/convert-deps" \
    "transformers>=4.45,<5" sentencepiece "$src/gguf-py"
fi
"$src/build/bin/llama-server" --version 2>&1 | sed -n 1,2p >&2
