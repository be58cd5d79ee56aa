#!/usr/bin/env bash
# The npm package (tests/browser/api-package.test.js): npm pack -> tarball of built files only ->
# installed offline into a fresh temporary project -> Node import + call, a Vite-built page in
# Chromium (isolated and not), tsc --noEmit on a consumer file.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f dist/index.js ] && [ -f dist/wasm/qkv-simd-threads.wasm ] || bash tools/build.sh
npx --no-install tsc -p tsconfig.json
node --test --test-reporter=spec tests/browser/api-package.test.js
