#!/usr/bin/env bash
# The same doctest suite under ThreadSanitizer: the thread pool hands out jobs through atomics
# and polling, and every kernel runs on it with 1 to 8 threads in the tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQKV_TSAN=ON > /dev/null
cmake --build build/tsan -j"$(nproc)" --target qkv_tests
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
log=build/tsan/last-run.log
if ! build/tsan/qkv_tests > "$log" 2>&1; then
  # Kernels with 32 bits of mmap randomness break older TSan runtimes before main() runs
  # ("unexpected memory mapping"); without address randomisation they work.
  if grep -q "unexpected memory mapping" "$log" && command -v setarch > /dev/null; then
    echo "tsan: this kernel's address randomisation trips TSan; rerunning without it (setarch -R)"
    setarch "$(uname -m)" -R build/tsan/qkv_tests > "$log" 2>&1 || { cat "$log"; exit 1; }
  else
    cat "$log"
    exit 1
  fi
fi
tail -3 "$log"
