#!/usr/bin/env bash
# The same doctest suite under ThreadSanitizer: the thread pool hands out jobs through atomics
# and polling, and every kernel runs on it with 1 to 8 threads in the tests.
set -euo pipefail
cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQKV_TSAN=ON > /dev/null
cmake --build build/tsan -j"$(nproc)" --target qkv_tests
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --test-dir build/tsan --output-on-failure
