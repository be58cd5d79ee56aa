#!/usr/bin/env bash
# The JS API in headless Chromium (tests/browser/api.test.js): the shared cases, the invalid-call
# table and a randomized run, on a crossOriginIsolated page (SIMD + threads) and on a plain page
# (single-thread fallback), plus forced variants.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f dist/index.js ] && [ -f dist/wasm/qkv-simd-threads.wasm ] || bash tools/build.sh
npx --no-install tsc -p tsconfig.json
node --test --test-reporter=spec tests/browser/api.test.js
