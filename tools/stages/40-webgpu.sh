#!/usr/bin/env bash
# WebGPU backend: the embedded shaders are up to date with web/shaders/, then the tests in
# headless Chromium with SwiftShader WebGPU (tests/browser/webgpu-*.test.js): parity with the
# wasm path over >= 200 seeded cases, fallbacks and device loss, limits; and Node's 'auto'.
# Runs after the stages that build dist/; builds what is missing when run alone (QKV_STAGES=40).
set -euo pipefail
cd "$(dirname "$0")/../.."
node tools/webgpu/embed-shaders.mjs --check
if [ ! -f dist/wasm/qkv-simd.wasm ] || [ ! -f dist/wasm/qkv-simd-threads.wasm ]; then
  bash tools/build.sh
else
  npx --no-install tsc -p tsconfig.json   # incremental: brings dist/*.js up to date with web/lib
fi
node --test --test-concurrency=1 --test-reporter=spec \
  tests/browser/webgpu-node.test.js \
  tests/browser/webgpu-fallback.test.js \
  tests/browser/webgpu-limits.test.js \
  tests/browser/webgpu-parity.test.js
