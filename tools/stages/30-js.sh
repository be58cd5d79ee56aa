#!/usr/bin/env bash
# The JS API in Node (node:test): every tests/js/*.test.js but the model's (stage 50) — the
# shared PyTorch cases on every variant (sync and async), the fast kernel against the C++
# reference, the table of invalid calls, 10 000 random valid/invalid calls per variant with no
# trap and no heap growth, lifetimes.
set -euo pipefail
shopt -s extglob
cd "$(dirname "$0")/../.."
bash tools/build.sh   # incremental: a no-op when an earlier stage built dist/
node --test --test-reporter=spec tests/js/!(model*).test.js
