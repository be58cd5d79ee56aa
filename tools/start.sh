#!/usr/bin/env bash
# npm start: build what is missing (npm packages, the wasm module + TypeScript API, the demo),
# then serve the demo with COOP/COEP headers and print its URL.
#   PORT=8080 npm start      choose the port (default 5173; the next free one if busy)
#   QKV_DEMO_REBUILD=1       rebuild the demo even when it looks up to date
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}   # Debian's emcc needs Debian's acorn

if [ ! -d node_modules/vite ] || [ ! -d node_modules/d3 ]; then
  echo "start: installing npm packages"
  npm ci --no-audit --no-fund
fi

# The library: dist/ holds the wasm variants and the compiled API. Build when missing.
if [ -z "$(ls dist/wasm/*.wasm 2>/dev/null)" ] || [ ! -f dist/index.js ]; then
  if [ -f tools/build.sh ]; then
    echo "start: building the library (tools/build.sh)"
    bash tools/build.sh || echo "start: warning: the library build failed; the demo falls back to its TypeScript reference maths" >&2
  else
    echo "start: warning: tools/build.sh not found; the demo falls back to its TypeScript reference maths" >&2
  fi
fi
[ -f web/models/tiny-kjv/model.safetensors ] || \
  echo "start: note: web/models/tiny-kjv/ has no model yet; the model page will ask for a checkpoint to be dropped" >&2

# The demo: rebuild when any input is newer than the last build.
stamp=build/demo/index.html
if [ -n "${QKV_DEMO_REBUILD:-}" ] || [ ! -f "$stamp" ] || \
   [ -n "$(find web/demo web/lib web/shaders web/models dist -newer "$stamp" -type f -not -path '*/node_modules/*' 2>/dev/null | head -1)" ]; then
  echo "start: building the demo (vite)"
  npx --no-install vite build --config web/demo/vite.config.ts
fi

exec node tools/serve-demo.mjs "$@"
