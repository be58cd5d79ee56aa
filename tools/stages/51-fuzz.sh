#!/usr/bin/env bash
# libFuzzer over the safetensors reader (tests/fuzz/fuzz_safetensors.cpp) and the GGUF reader
# (tests/fuzz/fuzz_gguf.cpp): clang, the whole library instrumented
# (-fsanitize=fuzzer-no-link,address), a fixed seed and a fixed number of executions from each
# committed seed corpus (tests/fuzz/corpus/<name>; GGUF's from tools/fuzz/make_gguf_corpus.mjs),
# so CI runs are short and repeatable.
# QKV_FUZZ_RUNS overrides the count (longer runs by hand: QKV_FUZZ_RUNS=2000000); the GGUF
# target, whose inputs load models (~100 executions a second), runs a quarter of it.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${QKV_FUZZ_RUNS:-20000}
dir=build/fuzz
if [ ! -f "$dir/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQKV_FUZZ=ON \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer" > /dev/null
fi
cmake --build "$dir" -j"$(nproc)" --target fuzz_safetensors fuzz_gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# fuzz <target> <corpus name> <dictionary> <max input bytes> <runs>
fuzz() {
  local target=$1 corpus=$2 dict=$3 max_len=$4 runs=$5
  mkdir -p "$work/$corpus"
  # New inputs go to $work/<corpus> (first corpus dir); the committed seeds are only read.
  local status=0
  ASAN_OPTIONS=detect_leaks=1 "$dir/$target" -runs="$runs" -seed=1 -max_len="$max_len" \
    -dict="$dict" -artifact_prefix="$dir/" -print_final_stats=1 \
    "$work/$corpus" "tests/fuzz/corpus/$corpus" > "$work/$corpus.log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$work/$corpus.log"
    echo "$target: FAILED (exit $status); the crashing input is in $dir/" >&2
    exit 1
  fi
  grep -E 'DONE|stat::number_of_executed_units|stat::peak_rss' "$work/$corpus.log" || true
  echo "$target: $runs runs, no crash"
}
fuzz fuzz_safetensors safetensors tests/fuzz/safetensors.dict 4096 "$runs"
fuzz fuzz_gguf gguf tests/fuzz/gguf.dict 9216 $((runs / 4))
