#!/usr/bin/env bash
# Native C++: build the library, doctest suite and benchmark; run the suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build/native -j"$(nproc)"
ctest --test-dir build/native --output-on-failure
