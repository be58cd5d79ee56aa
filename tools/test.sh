#!/usr/bin/env bash
# npm test: set up, then run every stage in tools/stages/ in order (NN-name.sh).
# QKV_STAGES="10 20" runs only the stages whose names start with those numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export NODE_PATH=/usr/share/nodejs   # Debian's emcc requires Debian's acorn
for stage in tools/stages/[0-9]*.sh; do
  name=$(basename "$stage" .sh)
  if [ -n "${QKV_STAGES:-}" ] && ! [[ " $QKV_STAGES " == *" ${name%%-*} "* ]]; then continue; fi
  echo "=== stage $name ==="
  start=$SECONDS
  bash "$stage"
  echo "=== stage $name passed in $((SECONDS - start)) s ==="
done
echo "npm test: all stages passed"
