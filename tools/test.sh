#!/usr/bin/env bash
# npm test: set up, then run every stage in tools/stages/ (NN-name.sh) in two lanes at once:
#   native  the C++ builds and suites (10 native, 11 ASan+UBSan, 12 TSan, 51 libFuzzer)
#   web     everything over the wasm build (05 lint, 20 wasm build, 30 JS, 35-40 browsers,
#           50 models, 60 demo, 65 Firefox)
# Each lane runs its stages in order; no stage of one lane reads what the other builds. Much
# of each lane is one busy core (a test binary, a browser, a single-threaded node --test), so
# on a 2-core machine the lanes together take ~the longer lane instead of their sum
# (docs/testing.md, "Time"). Each stage's output goes to build/test-logs/NN-name.log and is
# printed whole when the stage ends; a failure stops both lanes.
#   QKV_STAGES="10 20"  only the stages whose names start with those numbers
#   QKV_SERIAL=1        one stage at a time, output as it comes (the old way)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export NODE_PATH=/usr/share/nodejs   # Debian's emcc requires Debian's acorn
# ccache under every C++ compile: the native trees through CMake's launcher (read when a tree
# is first configured), the wasm ones through emcc's wrapper (tools/build.sh). A rerun, or a
# clean clone on a machine that built before, recompiles only what changed. QKV_NO_CCACHE=1: off.
# Paths under the checkout are hashed relative to it (CCACHE_BASEDIR, CCACHE_NOHASHDIR), so a
# clone in another folder hits the same entries.
if [ -z "${QKV_NO_CCACHE:-}" ] && command -v ccache > /dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
fi

selected() {  # selected <stage file>: in QKV_STAGES (or no filter)
  local name
  name=$(basename "$1" .sh)
  [ -z "${QKV_STAGES:-}" ] || [[ " $QKV_STAGES " == *" ${name%%-*} "* ]]
}
native=() web=()
for stage in tools/stages/[0-9]*.sh; do
  selected "$stage" || continue
  case $(basename "$stage") in
    1[0-9]-* | 51-*) native+=("$stage") ;;
    *) web+=("$stage") ;;
  esac
done
total=$((${#native[@]} + ${#web[@]}))

if [ -n "${QKV_SERIAL:-}" ]; then
  for stage in "${native[@]}" "${web[@]}"; do
    name=$(basename "$stage" .sh)
    echo "=== stage $name ==="
    start=$SECONDS
    bash "$stage"
    echo "=== stage $name passed in $((SECONDS - start)) s ==="
  done
  echo "npm test: all stages passed"
  echo "stages: $total passed, 0 failed"
  exit 0
fi

logs=build/test-logs
mkdir -p "$logs"
rm -f "$logs"/*.log "$logs"/failed
touch "$logs/.print"

# print <text...>: one block at a time from either lane
print() { flock "$logs/.print" cat "$@"; }

lane() {  # lane <stage>...: the stages in order; stops at the first that fails
  local stage name start log
  for stage in "$@"; do
    name=$(basename "$stage" .sh)
    log=$logs/$name.log
    start=$SECONDS
    echo "=== stage $name started ===" | print
    if bash "$stage" > "$log" 2>&1; then
      { echo "=== stage $name ==="; cat "$log"; echo "=== stage $name passed in $((SECONDS - start)) s ==="; } | print
    else
      { echo "=== stage $name ==="; cat "$log"; echo "=== stage $name FAILED after $((SECONDS - start)) s ==="; } | print
      echo "$name" >> "$logs/failed"
      return 1
    fi
  done
}

start=$SECONDS
pids=()
# set -m: each lane in its own process group, so a failure can stop the other lane's children
set -m
[ ${#native[@]} -eq 0 ] || { lane "${native[@]}" & pids+=($!); }
[ ${#web[@]} -eq 0 ] || { lane "${web[@]}" & pids+=($!); }
set +m
status=0
for _ in "${pids[@]}"; do
  if ! wait -n; then
    status=1
    for pid in "${pids[@]}"; do kill -- -"$pid" 2> /dev/null || true; done
    break
  fi
done
wait 2> /dev/null || true
if [ "$status" -ne 0 ] || [ -s "$logs/failed" ]; then
  failed=$(sort -u "$logs/failed" 2> /dev/null | tr '\n' ' ')
  echo "npm test: FAILED: ${failed:-a lane stopped} (logs: $logs/)"
  echo "stages: $(ls "$logs"/*.log 2> /dev/null | wc -l) run, $(sort -u "$logs/failed" 2> /dev/null | wc -l) failed"
  exit 1
fi
echo "npm test: all stages passed in $((SECONDS - start)) s (two lanes: native, web)"
echo "stages: $total passed, 0 failed"
