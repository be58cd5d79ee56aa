#!/usr/bin/env bash
# npm start: install and build what is missing (Debian and npm packages, the wasm module +
# TypeScript API, the demo), then serve the demo with COOP/COEP headers and print its URL.
#   PORT=8080 npm start      choose the port (default 5173; the next free one if busy)
#   QKV_DEMO_REBUILD=1       rebuild the demo even when it looks up to date
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}   # Debian's emcc needs Debian's acorn

# The library (wasm variants + TypeScript API, after installing Debian and npm packages as npm
# test does): tools/build.sh is incremental, a few seconds when up to date.
bash tools/build.sh

# The demo: rebuilt when any input is newer than the last build.
bash tools/build-demo.sh

exec node tools/serve-demo.mjs "$@"
