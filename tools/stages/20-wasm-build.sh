#!/usr/bin/env bash
# The wasm module in its three variants + the TypeScript API (tools/build.sh), then checks on
# the binaries themselves: both SIMD builds really contain f32x4 arithmetic (a silent fallback
# to scalar code cannot pass), the scalar build contains no SIMD at all, the threads build uses
# shared memory and atomics, and dist/ holds every file the loaders need.
set -euo pipefail
cd "$(dirname "$0")/../.."
# the committed shaders.generated.ts matches web/lib/webgpu/shaders/ (the build regenerates it)
node tools/webgpu/embed-shaders.mjs --check
bash tools/build.sh

count() {  # count <file.wasm> <regex>: instructions in the code section matching regex
  wasm-objdump -d "$1" | grep -c -E "$2" || true
}
for v in simd simd-threads; do
  n=$(count "dist/wasm/qkv-$v.wasm" 'f32x4\.(mul|add|max|sub)')
  echo "wasm-objdump: qkv-$v.wasm has $n f32x4 mul/add/max/sub instructions"
  [ "$n" -ge 100 ] || { echo "FAIL: qkv-$v.wasm lacks SIMD arithmetic (xsimd fell back to scalar?)" >&2; exit 1; }
done
n=$(count dist/wasm/qkv-scalar.wasm 'v128|[if](8x16|16x8|32x4|64x2)\.')
echo "wasm-objdump: qkv-scalar.wasm has $n SIMD instructions"
[ "$n" -eq 0 ] || { echo "FAIL: the scalar baseline contains SIMD instructions" >&2; exit 1; }
wasm-objdump -x -j Import dist/wasm/qkv-simd-threads.wasm | grep -q 'memory.*shared' \
  || { echo "FAIL: qkv-simd-threads.wasm does not import a shared memory" >&2; exit 1; }
n=$(count dist/wasm/qkv-simd-threads.wasm 'atomic')
echo "wasm-objdump: qkv-simd-threads.wasm has $n atomic instructions"
[ "$n" -ge 10 ] || { echo "FAIL: qkv-simd-threads.wasm has no atomics" >&2; exit 1; }
for f in index.js index.d.ts wasm/qkv-scalar.{mjs,node.cjs,wasm} wasm/qkv-simd.{mjs,node.cjs,wasm} \
         wasm/qkv-simd-threads.{mjs,node.cjs,wasm,worker.js,node.worker.cjs}; do
  [ -f "dist/$f" ] || { echo "FAIL: dist/$f missing" >&2; exit 1; }
done
echo "wasm build: 3 variants OK"
