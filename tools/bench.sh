#!/usr/bin/env bash
# npm run bench: the benchmarks, each printing a table and writing JSON to bench/results/.
#   JS/wasm attention (bench/js/): qkv scalar / SIMD / SIMD + 2 threads vs a naive JS loop and
#   onnxruntime-web's wasm backend, in Node (js-node.json), headless Chromium (js-chromium.json)
#   and headless Firefox ESR (js-firefox.json), with the machine's limit (bench/js/peak.js)
#   measured in the same run; on Linux the same qkv calls timed by their threads' CPU time,
#   which a busy machine does not distort (cpu-time.json); where Linux `perf` can sample, the
#   kernel's compiled loops and their share of its time (jit-profile-{chromium,node}.json).
# QKV_BENCH_QUICK=1 runs fewer repetitions; QKV_BENCH_SIZES=128,512 picks the lengths.
# Timings need a quiet machine: check `uptime` first (results record the load average).
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}
[ -f dist/index.js ] && [ -f dist/wasm/qkv-simd-threads.wasm ] || bash tools/build.sh
npx --no-install tsc -p tsconfig.json
node bench/js/node.mjs
node bench/js/browser.mjs
node bench/js/browser.mjs --browser firefox
if [ -r /proc/self/schedstat ]; then node bench/js/cpu-time.mjs; fi
if perf record -o /dev/null -q -- true 2>/dev/null; then node bench/js/jit-profile.mjs --calls 30; fi
node bench/webgpu/run.mjs ${QKV_BENCH_QUICK:+--Ls=128,256,512 --budget=5 --matmul=256,512}   # WebGPU vs wasm (bench/webgpu/README.md)
node bench/model/run.mjs ${QKV_BENCH_QUICK:+--reps 5 --tokens 100}   # GPT-2 model: prefill + KV-cache generation vs onnxruntime-web (bench/model/README.md)
bash bench/matmul/run.sh   # the model's matmul kernels vs the machine's bandwidth and mul+add peak (bench/matmul/README.md)
if [ "${QKV_BENCH_GPT2:-0}" = 1 ]; then   # GPT-2 small: 750 MB generated into build/ (Node) and /tmp (Chromium), ~15 minutes
  node bench/model/gpt2_small.mjs
  node bench/model/gpt2_small_browser.mjs
  node bench/model/int8_accuracy.mjs
fi
