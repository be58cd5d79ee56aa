#!/usr/bin/env bash
# Builds the demo site (Vite, web/demo/vite.config.ts) into build/demo/ when any of its inputs
# (web/demo, web/lib, web/models, dist) is newer than the last build; dist/ must be built
# (tools/build.sh). QKV_DEMO_REBUILD=1 builds it regardless. Used by npm start and npm run site.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=build/demo/index.html
if [ -n "${QKV_DEMO_REBUILD:-}" ] || [ ! -f "$stamp" ] || \
   [ -n "$(find web/demo web/lib web/models dist -newer "$stamp" -type f -not -path '*/node_modules/*' 2>/dev/null | head -1)" ]; then
  echo "demo: building build/demo/ (vite)"
  npx --no-install vite build --config web/demo/vite.config.ts
fi
