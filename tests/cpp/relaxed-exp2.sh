#!/usr/bin/env bash
# exp2's error-bound test (test_simd_exp2.cpp) in the relaxed-SIMD wasm build, where its
# Horner steps are f32x4.relaxed_madd (src/simd_madd.hpp): the native test suite never builds
# that path. Builds build/relaxed-exp2/ with em++ (-mrelaxed-simd, the fma rewrite as in the
# shipped build) and runs it in Node with relaxed SIMD on.
set -euo pipefail
cd "$(dirname "$0")/../.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}   # Debian's emcc needs Debian's acorn
out=build/relaxed-exp2
mkdir -p "$out/include"
echo '{ "type": "commonjs" }' > "$out/package.json"
ln -sfn /usr/include/xsimd "$out/include/xsimd"     # header-only libraries alone, not the host's libc
ln -sfn /usr/include/doctest "$out/include/doctest"
em++ -O2 -std=c++17 -Isrc -I"$out/include" -msimd128 -msse4.2 -mrelaxed-simd -DQKV_RELAXED_SIMD=1 \
  -sENVIRONMENT=node -sEXIT_RUNTIME=1 -sALLOW_MEMORY_GROWTH=1 \
  tests/cpp/main.cpp tests/cpp/test_simd_exp2.cpp -o "$out/exp2.cjs"
node tools/wasm/relax-fma.mjs "$out/exp2.wasm"
n=$(wasm-objdump -d "$out/exp2.wasm" | grep -c 'f32x4\.relaxed_madd' || true)
[ "$n" -ge 5 ] || { echo "FAIL: $out/exp2.wasm holds $n f32x4.relaxed_madd (want exp2's 5)" >&2; exit 1; }
echo "relaxed exp2: $n f32x4.relaxed_madd in the test module"
# Emscripten 3.1.6's loader fetches the .wasm by path when fetch exists: Node 18+ needs it off
node --experimental-wasm-relaxed-simd --no-experimental-fetch "$out/exp2.cjs" --success=false
