#!/usr/bin/env bash
# npm run site [-- DIR]: the demo as a static site in DIR (default build/site/): the four pages,
# the wasm builds, the tiny models, the API reference (DIR/api/, tools/docs.sh) and the service
# worker that makes the pages cross-origin isolated on a host that sends no COOP/COEP headers
# (docs/site.md). Any static file server
# can host the folder as it is. Builds what is missing or stale first, as npm start does:
# the library (tools/build.sh; skipped with --no-library, for the test stages, which build it
# first) and the demo (tools/build-demo.sh), then copies build/demo/ to DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}   # Debian's emcc needs Debian's acorn
library=1
out=build/site
for arg in "$@"; do
  case $arg in
    --no-library) library= ;;
    -*) echo "site: unknown option '$arg' (usage: npm run site [-- [--no-library] DIR])" >&2; exit 2 ;;
    *) out=${arg%/} ;;
  esac
done
# DIR is emptied first: refuse anything but an empty folder or an earlier site
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/coi-sw.js" ]; then
  echo "site: $out/ exists and is not an earlier site (no coi-sw.js in it); choose another folder or empty it" >&2
  exit 1
fi
[ -n "$library" ] && bash tools/build.sh
bash tools/build-demo.sh
rm -rf "$out"
mkdir -p "$(dirname "$out")"
cp -a build/demo "$out"
bash tools/docs.sh "$out/api"
echo "site: $out/ ($(du -sh "$out" | cut -f1)): host it as it is with any static file server, e.g."
echo "  python3 -m http.server -d $out 8000   then open http://localhost:8000/"
