#!/usr/bin/env bash
# The browser checks in a second real browser, Firefox ESR (Debian's firefox-esr, driven by
# puppeteer-core over WebDriver BiDi; tests/browser/browsers.js): the JS API on the shared cases
# with and without cross-origin isolation (api.test.js, as stage 35 runs it in Chromium), WebGPU
# absent as it is in Firefox ('auto' runs wasm, 'webgpu' is a clear Error), the demo smoke
# test on the site stage 60 built (built here when missing or older than its sources), and the
# static site (npm run site) on a host without COOP/COEP, isolated by its service worker.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f dist/index.js ] && [ -f dist/wasm/qkv-simd-threads.wasm ] || bash tools/build.sh
bash tools/site.sh --no-library   # builds build/demo/ when stale (tools/build-demo.sh), copies it to build/site/
export QKV_BROWSER=firefox
node --test --test-concurrency=1 --test-reporter=spec \
  tests/browser/api.test.js tests/browser/matmul-q4.test.js tests/browser/webgpu-absent-firefox.test.js tests/browser/demo-smoke.test.js \
  tests/browser/site.test.js
