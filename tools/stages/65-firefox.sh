#!/usr/bin/env bash
# The browser checks in a second real browser, Firefox ESR (Debian's firefox-esr, driven by
# puppeteer-core over WebDriver BiDi; tests/browser/browsers.js): the JS API on the shared cases
# with and without cross-origin isolation (api.test.js, as stage 35 runs it in Chromium), WebGPU
# absent as it is in Firefox ('auto' runs wasm, 'webgpu' is a clear Error), and the demo smoke
# test on the site stage 60 built (built here when missing or older than its sources).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f dist/index.js ] && [ -f dist/wasm/qkv-simd-threads.wasm ] || bash tools/build.sh
if [ ! -f build/demo/index.html ] || [ -n "$(find dist web/demo web/models -newer build/demo/index.html -type f -print -quit)" ]; then
  npx --no-install vite build --config web/demo/vite.config.ts
fi
export QKV_BROWSER=firefox
node --test --test-concurrency=1 --test-reporter=spec \
  tests/browser/api.test.js tests/browser/webgpu-absent-firefox.test.js tests/browser/demo-smoke.test.js
