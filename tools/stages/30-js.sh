#!/usr/bin/env bash
# The JS API in Node (node:test): every tests/js/*.test.js but the model's (stage 50) — the
# shared PyTorch cases on every variant (the relaxed-SIMD two included; sync and async), the fast kernel against the C++
# reference, the table of invalid calls, 10 000 random valid/invalid calls per variant with no
# trap and no heap growth, lifetimes.
set -euo pipefail
shopt -s extglob
cd "$(dirname "$0")/../.."
bash tools/build.sh   # incremental: a no-op when an earlier stage built dist/
# Node 20 runs relaxed SIMD only with this V8 flag (node --test passes it on to each test
# file); without it the relaxed variants' tests are skipped. Node 22+ has it by default.
relaxed=()
node --experimental-wasm-relaxed-simd -e 0 2> /dev/null && relaxed=(--experimental-wasm-relaxed-simd)
node "${relaxed[@]}" --test --test-reporter=spec tests/js/!(model*).test.js
# The relaxed builds' int8 dot for 4-bit weights runs only where the loader's probe finds it right;
# Node 20's baseline tier (Liftoff) computes it wrong and its optimizing tier right, so the kernels
# again with Liftoff off: there the relaxed variants take the dot (the test says which x it used)
if [ ${#relaxed[@]} -gt 0 ]; then
  node "${relaxed[@]}" --no-liftoff --test --test-reporter=spec tests/js/matmul.test.js
fi
