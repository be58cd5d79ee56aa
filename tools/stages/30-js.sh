#!/usr/bin/env bash
# The JS API in Node (node:test, tests/js/*.test.js): the shared PyTorch cases on every variant
# (sync and async), the fast kernel against the C++ reference, the table of invalid calls,
# 10 000 random valid/invalid calls per variant with no trap and no heap growth, lifetimes.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f dist/index.js ] && [ -f dist/wasm/qkv-simd-threads.wasm ] || bash tools/build.sh
npx --no-install tsc -p tsconfig.json   # incremental: dist/*.js up to date with web/lib
node --test --test-reporter=spec tests/js/cases.test.js tests/js/reference.test.js tests/js/invalid.test.js \
  tests/js/fuzz.test.js tests/js/api.test.js tests/js/matmul.test.js
