#!/usr/bin/env bash
# The wasm module in its five variants + the TypeScript API (tools/build.sh), then checks on
# the binaries themselves: the SIMD builds really contain f32x4 arithmetic (a silent fallback
# to scalar code cannot pass), the scalar build contains no SIMD at all, the threads builds use
# shared memory and atomics, the relaxed-SIMD builds validate with relaxed SIMD and hold
# f32x4.relaxed_madd (rewritten after the link from LLVM 14's pre-standard fma by
# tools/wasm/relax-fma.mjs) while the plain SIMD builds hold none, and dist/ holds every file
# the loaders need.
set -euo pipefail
cd "$(dirname "$0")/../.."
# the committed shaders.generated.ts matches web/lib/webgpu/shaders/ (the build regenerates it)
node tools/webgpu/embed-shaders.mjs --check
bash tools/build.sh

count() {  # count <file.wasm> <regex>: instructions in the code section matching regex
  wasm-objdump -d "$1" | grep -c -E "$2" || true
}
for v in simd simd-threads simd-relaxed simd-relaxed-threads; do
  n=$(count "dist/wasm/qkv-$v.wasm" 'f32x4\.(mul|add|max|sub)')
  echo "wasm-objdump: qkv-$v.wasm has $n f32x4 mul/add/max/sub instructions"
  [ "$n" -ge 100 ] || { echo "FAIL: qkv-$v.wasm lacks SIMD arithmetic (xsimd fell back to scalar?)" >&2; exit 1; }
done
n=$(count dist/wasm/qkv-scalar.wasm 'v128|[if](8x16|16x8|32x4|64x2)\.')
echo "wasm-objdump: qkv-scalar.wasm has $n SIMD instructions"
[ "$n" -eq 0 ] || { echo "FAIL: the scalar baseline contains SIMD instructions" >&2; exit 1; }
for v in simd-threads simd-relaxed-threads; do
  wasm-objdump -x -j Import "dist/wasm/qkv-$v.wasm" | grep -q 'memory.*shared' \
    || { echo "FAIL: qkv-$v.wasm does not import a shared memory" >&2; exit 1; }
  n=$(count "dist/wasm/qkv-$v.wasm" 'atomic')
  echo "wasm-objdump: qkv-$v.wasm has $n atomic instructions"
  [ "$n" -ge 10 ] || { echo "FAIL: qkv-$v.wasm has no atomics" >&2; exit 1; }
done
# Relaxed SIMD: wabt validates the rewritten modules, and the micro-kernels' multiply-adds are
# there (accumulate_block's instances: at least 9); the plain builds have no relaxed op at all.
for v in simd-relaxed simd-relaxed-threads; do
  wasm-validate --enable-relaxed-simd --enable-threads "dist/wasm/qkv-$v.wasm" \
    || { echo "FAIL: qkv-$v.wasm does not validate with relaxed SIMD" >&2; exit 1; }
  n=$(count "dist/wasm/qkv-$v.wasm" 'f32x4\.relaxed_madd')
  echo "wasm-objdump: qkv-$v.wasm has $n f32x4.relaxed_madd instructions"
  [ "$n" -ge 9 ] || { echo "FAIL: qkv-$v.wasm lacks f32x4.relaxed_madd (was the fma rewritten?)" >&2; exit 1; }
done
for v in scalar simd simd-threads; do
  n=$(count "dist/wasm/qkv-$v.wasm" 'relaxed')
  [ "$n" -eq 0 ] || { echo "FAIL: qkv-$v.wasm holds $n relaxed-SIMD instructions" >&2; exit 1; }
done
echo "wasm-objdump: the scalar and plain SIMD builds hold no relaxed-SIMD instruction"
for f in index.js index.d.ts wasm/qkv-scalar.{mjs,node.cjs,wasm} wasm/qkv-simd.{mjs,node.cjs,wasm} \
         wasm/qkv-simd-threads.{mjs,node.cjs,wasm,worker.js,node.worker.cjs} wasm/qkv-simd-relaxed.{mjs,node.cjs,wasm} \
         wasm/qkv-simd-relaxed-threads.{mjs,node.cjs,wasm,worker.js,node.worker.cjs}; do
  [ -f "dist/$f" ] || { echo "FAIL: dist/$f missing" >&2; exit 1; }
done
echo "wasm build: 5 variants OK"
# exp2's error bound where its polynomial is f32x4.relaxed_madd (no native build runs that path)
bash tests/cpp/relaxed-exp2.sh
