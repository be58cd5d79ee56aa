#!/usr/bin/env bash
# The npm package (tests/browser/package*.test.js): npm pack -> tarball of built files only ->
# installed offline into a fresh temporary project -> Node import + call, a Vite-built page in
# Chromium (isolated and not), tsc --noEmit on a consumer file.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/build.sh   # incremental
node --test --test-reporter=spec tests/browser/package*.test.js
