#!/usr/bin/env bash
# The JS API in headless Chromium (tests/browser/api.test.js): the shared cases, the invalid-call
# table and a randomized run, on a crossOriginIsolated page (SIMD + threads) and on a plain page
# (single-thread fallback), plus forced variants; and the 4-bit matmul kernels in the page
# (matmul-q4.test.js: the relaxed build's int8 dot where the engine computes it right).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/build.sh   # incremental
node --test --test-reporter=spec tests/browser/api*.test.js tests/browser/matmul-q4.test.js
