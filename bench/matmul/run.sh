#!/usr/bin/env bash
# The matmul kernels against this machine's read bandwidth and mul+add peak, in wasm (Node)
# with 1 and 2 threads (bench/matmul/bench_matmul.cpp; README.md there). Builds its own two
# small wasm programs with em++ into build/bench-matmul/ (SIMD; SIMD + pthreads), then runs
# them; writes bench/results/matmul-wasm-1t.json and matmul-wasm-2t.json.
# QKV_BENCH_NATIVE=1 also runs the native build (build/native/qkv_bench_matmul); --build-only
# builds and stops; --relaxed runs only the GEMM, in the plain and the relaxed-SIMD build
# (bench/results/relaxed-matmul-simd.json, relaxed-matmul-relaxed.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}   # Debian's emcc needs Debian's acorn
out=build/bench-matmul
mkdir -p "$out/xsimd-include" bench/results
# the pthread worker Emscripten writes is CommonJS (<name>.worker.js): not this package's ESM
echo '{ "type": "commonjs" }' > "$out/package.json"
ln -sfn /usr/include/xsimd "$out/xsimd-include/xsimd"   # xsimd alone (not the host's libc headers)
srcs=(bench/matmul/bench_matmul.cpp bench/matmul/bench_limits.cpp bench/matmul/bench_int_prefill.cpp src/matmul/*.cpp src/thread_pool.cpp)
cflags=(-O3 -std=c++17 -Isrc -I"$out/xsimd-include" -msimd128 -msse4.2)
# linked at -O1 as the library is (no Binaryen pass: wasm/CMakeLists.txt says why)
lflags=(-O1 -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sENVIRONMENT=node -sNODERAWFS=1 -sEXIT_RUNTIME=1)
newer() { [ ! -f "$1" ] || [ -n "$(find src/matmul bench/matmul src/thread_pool.cpp src/simd.hpp src/simd_madd.hpp -newer "$1" -name '*.[ch]pp' | head -1)" ]; }
# build NAME OUTPUT [flags...]: the sources compiled into $out/NAME-obj/ (two at a time), then
# linked; of the flags, -D and -m go to the compiler, -s to the linker, the rest to both
build() {
  local name=$1 output=$2; shift 2
  local objs=() comp=() link=() src obj f
  for f in "$@"; do case $f in -D*|-m*) comp+=("$f") ;; -s*) link+=("$f") ;; *) comp+=("$f"); link+=("$f") ;; esac; done
  mkdir -p "$out/$name-obj"
  for src in "${srcs[@]}"; do
    obj=$out/$name-obj/$(basename "$src" .cpp).o
    objs+=("$obj")
    em++ "${cflags[@]}" "${comp[@]}" -c "$src" -o "$obj" &
    if [ "$(jobs -rp | wc -l)" -ge 2 ]; then wait -n; fi
  done
  wait
  em++ "${lflags[@]}" "${link[@]}" "${objs[@]}" -o "$output"
}
if newer "$out/bench-simd.cjs"; then
  build simd "$out/bench-simd.cjs" -sSINGLE_FILE=1
fi
if newer "$out/bench-threads.cjs"; then
  build threads "$out/bench-threads.cjs" -sSINGLE_FILE=1 -pthread -sPTHREAD_POOL_SIZE=2 -Wno-pthreads-mem-growth
fi
# the relaxed-SIMD twin of bench-simd (f32x4.relaxed_madd in the GEMM micro-kernel and the peak
# loop): its .wasm apart (not SINGLE_FILE) so that the fma rewrite can run on it, as in the
# shipped build (tools/wasm/relax-fma.mjs)
if newer "$out/bench-relaxed.cjs"; then
  build relaxed "$out/bench-relaxed.cjs" -mrelaxed-simd -DQKV_RELAXED_SIMD=1
  node tools/wasm/relax-fma.mjs "$out/bench-relaxed.wasm"
fi
[ "${1:-}" = --build-only ] && exit 0
if [ "${1:-}" = --relaxed ]; then
  # GEMM only (F32, F16, BF16, Q8; M = 32, 128, 512), plain SIMD then relaxed SIMD, each with
  # its own limit (the relaxed one's peak loop is relaxed_madd); Emscripten 3.1.6's loader
  # fetches a separate .wasm by path when fetch exists, so Node runs with fetch off
  node "$out/bench-simd.cjs" 1 bench/results/relaxed-matmul-simd.json gemm
  node --experimental-wasm-relaxed-simd --no-experimental-fetch "$out/bench-relaxed.cjs" 1 \
    bench/results/relaxed-matmul-relaxed.json gemm
  exit 0
fi
node "$out/bench-simd.cjs" 1 bench/results/matmul-wasm-1t.json
node "$out/bench-threads.cjs" 2 bench/results/matmul-wasm-2t.json
if [ "${QKV_BENCH_NATIVE:-0}" = 1 ] && [ -x build/native/qkv_bench_matmul ]; then
  build/native/qkv_bench_matmul 1 bench/results/matmul-native.json
fi
