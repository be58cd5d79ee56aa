#!/usr/bin/env bash
# npm run build: the five wasm variants (Emscripten, through the top-level CMakeLists.txt)
# and the TypeScript API (tsc), assembled into dist/:
#   dist/*.js, *.d.ts            the package's API (from web/lib/)
#   dist/wasm/qkv-<v>.mjs        browser/bundler loader (ES module)
#                                v = scalar | simd | simd-threads | simd-relaxed | simd-relaxed-threads
#   dist/wasm/qkv-<v>.node.cjs   Node loader (CommonJS, loaded with createRequire)
#   dist/wasm/qkv-<v>.wasm       the module (one binary shared by both loaders)
#   dist/wasm/qkv-<v>.worker.js, qkv-<v>.node.worker.cjs   pthread workers (the two threads variants)
# Incremental: cmake/ninja rebuild only what changed, tsc is incremental, files are copied
# only when they differ. QKV_VARIANTS="simd" builds a subset (default: all five).
# On a fresh clone it first installs what it needs (tools/setup.sh: Debian packages as root,
# else the one apt-get line to run; npm ci when node_modules does not match the lock).
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}   # Debian's emcc needs Debian's acorn
bash tools/setup.sh
# ccache under emcc's clang (a rebuilt tree or a clean clone recompiles only what changed)
# (paths hashed relative to the checkout, so that a clone elsewhere hits the same entries)
if [ -z "${QKV_NO_CCACHE:-}" ] && command -v ccache > /dev/null; then
  export EM_COMPILER_WRAPPER=ccache CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
fi

variants=${QKV_VARIANTS:-"scalar simd simd-threads simd-relaxed simd-relaxed-threads"}
jobs=${QKV_JOBS:-$(nproc)}
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)

xsimd_host=${QKV_XSIMD_INCLUDE:-/usr/include}
[ -f "$xsimd_host/xsimd/xsimd.hpp" ] || { echo "build: xsimd headers not found in $xsimd_host (apt-get install libxsimd-dev)" >&2; exit 1; }
json_host=${QKV_JSON_INCLUDE:-/usr/include}
[ -f "$json_host/nlohmann/json.hpp" ] || { echo "build: nlohmann-json headers not found in $json_host (apt-get install nlohmann-json3-dev)" >&2; exit 1; }

mkdir -p dist/wasm
copy_if_changed() {  # src dst
  if ! cmp -s "$1" "$2"; then cp "$1" "$2.tmp" && mv "$2.tmp" "$2"; fi
}

for v in $variants; do
  case $v in
    scalar) flags=(-DQKV_SIMD=OFF -DQKV_WASM_THREADS=OFF) ;;
    simd) flags=(-DQKV_SIMD=ON -DQKV_WASM_THREADS=OFF) ;;
    simd-threads) flags=(-DQKV_SIMD=ON -DQKV_WASM_THREADS=ON) ;;
    simd-relaxed) flags=(-DQKV_SIMD=ON -DQKV_WASM_THREADS=OFF -DQKV_RELAXED=ON) ;;
    simd-relaxed-threads) flags=(-DQKV_SIMD=ON -DQKV_WASM_THREADS=ON -DQKV_RELAXED=ON) ;;
    *) echo "build: unknown variant '$v'" >&2; exit 1 ;;
  esac
  dir=build/wasm-$v
  # xsimd and nlohmann-json are header-only; hand Emscripten directories holding only their
  # headers (the host's /usr/include on an Emscripten compile line would put glibc's headers
  # over Emscripten's libc). A tree configured before nlohmann-json was used is configured again.
  if [ ! -f "$dir/CMakeCache.txt" ] || ! grep -q '^NLOHMANN_JSON_INCLUDE_DIR:.*/json-include$' "$dir/CMakeCache.txt"; then
    mkdir -p "$dir/xsimd-include" "$dir/json-include"
    ln -sfn "$xsimd_host/xsimd" "$dir/xsimd-include/xsimd"
    ln -sfn "$json_host/nlohmann" "$dir/json-include/nlohmann"
    emcmake cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DQKV_WASM_VARIANT="$v" \
      -DXSIMD_INCLUDE_DIR="$PWD/$dir/xsimd-include" -DNLOHMANN_JSON_INCLUDE_DIR="$PWD/$dir/json-include" \
      "${flags[@]}" > /dev/null
  fi
  echo "build: wasm $v"
  cmake --build "$dir" -j"$jobs" | { grep -v -E '^\[[0-9/ ]+\]|^ninja: no work' || true; }
  out=$dir/out
  # Both loaders must have linked the same module: ship one .wasm.
  if ! cmp -s "$out/qkv-$v.wasm" "$out/qkv-$v.node.wasm"; then
    echo "build: $v: the node and web links produced different .wasm files" >&2; exit 1
  fi
  copy_if_changed "$out/qkv-$v.wasm" "dist/wasm/qkv-$v.wasm"
  copy_if_changed "$out/qkv-$v.mjs" "dist/wasm/qkv-$v.mjs"
  copy_if_changed "$out/qkv-$v.node.cjs" "dist/wasm/qkv-$v.node.cjs"
  if [ -f "$out/qkv-$v.worker.js" ]; then
    copy_if_changed "$out/qkv-$v.worker.js" "dist/wasm/qkv-$v.worker.js"
    # The package is "type": "module"; the Node worker is CommonJS, so it gets a .cjs name
    # (the loader maps the glue's request for <name>.node.worker.js to it).
    copy_if_changed "$out/qkv-$v.node.worker.js" "dist/wasm/qkv-$v.node.worker.cjs"
  fi
done

# WGSL kernels -> web/lib/webgpu/shaders.generated.ts (written only when a .wgsl changed)
node tools/webgpu/embed-shaders.mjs
echo "build: tsc"
# tsc -b style incrementality trusts its build info; when dist/ was removed, start over.
[ -f dist/index.js ] || rm -f build/tsc/tsbuildinfo.json
npx --no-install tsc -p tsconfig.json
