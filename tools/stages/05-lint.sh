#!/usr/bin/env bash
# Lint first (seconds): C++ formatting against .clang-format, the TypeScript type checks, the
# docs' links, no history in the tree, and the generated benchmark tables up to date
# (tools/lint.sh, also `npm run lint`).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/lint.sh
