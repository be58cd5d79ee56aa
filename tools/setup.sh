#!/usr/bin/env bash
# Installs what building and testing qkv needs on Debian 12: the toolchain from Debian's
# packages (as root: apt-get; otherwise prints the exact command and stops), then the npm
# packages from package-lock.json (npm ci, skipped when node_modules already matches).
set -euo pipefail
cd "$(dirname "$0")/.."

# package -> a file it installs, or a glob matching it (cheap presence check without
# dpkg-query per package)
declare -A NEEDS=(
  [cmake]=/usr/bin/cmake
  [ccache]=/usr/bin/ccache
  [g++]=/usr/bin/g++
  [clang]=/usr/bin/clang
  [clang-format]=/usr/bin/clang-format
  [libclang-rt-14-dev]='/usr/lib/llvm-14/lib/clang/14.*/lib/linux/libclang_rt.fuzzer-x86_64.a'
  [libxsimd-dev]=/usr/include/xsimd/xsimd.hpp
  [nlohmann-json3-dev]=/usr/include/nlohmann/json.hpp
  [doctest-dev]=/usr/include/doctest/doctest.h
  [emscripten]=/usr/bin/emcc
  [wabt]=/usr/bin/wasm-objdump
  [chromium]=/usr/bin/chromium
  [firefox-esr]=/usr/bin/firefox-esr
  [nodejs]=/usr/bin/node
  [npm]=/usr/bin/npm
)
missing=()
for pkg in "${!NEEDS[@]}"; do
  compgen -G "${NEEDS[$pkg]}" > /dev/null || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  cmd="apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    $cmd
  else
    echo "setup: missing Debian packages. Run as root:" >&2
    echo "  apt-get update && $cmd" >&2
    exit 1
  fi
fi

# npm packages: reinstall only when package-lock.json changed since the last install.
stamp=node_modules/.qkv-lock-sha
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if [ -L node_modules ]; then
    # a checkout sharing another's node_modules (a git worktree): npm ci would empty theirs
    echo "setup: node_modules is a link to $(readlink node_modules) installed from another package-lock.json;" >&2
    echo "  replace it with a directory of its own (rm node_modules && npm ci) rather than reinstalling through the link" >&2
    exit 1
  fi
  echo "setup: npm ci"
  npm ci --no-audit --no-fund
  echo "$want" > "$stamp"
fi
