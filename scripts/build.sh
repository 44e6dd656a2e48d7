#!/usr/bin/env bash
# Configures and builds kolo into build/ (warnings are errors). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKOLO_WERROR=ON "$@" >/dev/null
then
  # A configure that failed once (no compiler on PATH, say) leaves answers in build/CMakeCache.txt
  # that make every later one fail the same way.
  echo "build.sh: configuring build/ failed (above). If an earlier configure failed too, remove" \
    "build/ and run this again." >&2
  exit 1
fi
cmake --build build -j "$(nproc)"
