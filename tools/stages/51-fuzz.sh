#!/usr/bin/env bash
# libFuzzer over the safetensors reader (tests/fuzz/fuzz_safetensors.cpp): clang, the whole
# library instrumented (-fsanitize=fuzzer-no-link,address), a fixed seed and a fixed number of
# executions from the committed seed corpus, so CI runs are short and repeatable.
# QKV_FUZZ_RUNS overrides the count (longer runs by hand: QKV_FUZZ_RUNS=2000000).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${QKV_FUZZ_RUNS:-20000}
dir=build/fuzz
if [ ! -f "$dir/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQKV_FUZZ=ON \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer" > /dev/null
fi
cmake --build "$dir" -j"$(nproc)" --target fuzz_safetensors
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# New inputs go to $work (first corpus dir); the committed seeds are only read.
status=0
ASAN_OPTIONS=detect_leaks=1 "$dir/fuzz_safetensors" -runs="$runs" -seed=1 -max_len=4096 \
  -dict=tests/fuzz/safetensors.dict -artifact_prefix="$dir/" -print_final_stats=1 \
  "$work" tests/fuzz/corpus/safetensors > "$work/log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  tail -n 60 "$work/log"
  echo "fuzz_safetensors: FAILED (exit $status); the crashing input is in $dir/" >&2
  exit 1
fi
grep -E 'DONE|stat::number_of_executed_units|stat::peak_rss' "$work/log" || true
echo "fuzz_safetensors: $runs runs, no crash"
