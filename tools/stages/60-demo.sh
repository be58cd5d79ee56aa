#!/usr/bin/env bash
# The demo site: type-check it, build it with Vite exactly as `npm start` does, then drive every
# page in headless Chromium (tests/browser/demo.test.js). Screenshots: build/artifacts/demo/.
# Then the same build as `npm run site` publishes it (build/site/), on a plain static host with
# no COOP/COEP headers, isolated by its service worker (tests/browser/site.test.js).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/build.sh   # incremental
npx --no-install tsc -p web/demo/tsconfig.json
npx --no-install vite build --config web/demo/vite.config.ts
node --test --test-reporter=spec tests/browser/demo*.test.js
bash tools/site.sh --no-library
node --test --test-reporter=spec tests/browser/site.test.js
