#!/usr/bin/env bash
# Lint first (seconds): C++ formatting against .clang-format and the TypeScript type checks
# (tools/lint.sh, also `npm run lint`).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/lint.sh
