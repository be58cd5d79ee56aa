#!/usr/bin/env bash
# WebGPU backend: the tests in headless Chromium with SwiftShader WebGPU (tests/browser/webgpu-*.test.js): parity with the
# wasm path over >= 200 seeded cases, fallbacks and device loss, limits; and Node's 'auto'.
# Runs after the stages that build dist/; builds what is missing when run alone (QKV_STAGES=40).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/build.sh   # incremental
node --test --test-concurrency=1 --test-reporter=spec tests/browser/webgpu-*.test.js
