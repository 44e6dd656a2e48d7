#!/usr/bin/env bash
# Builds the engine's tests with ThreadSanitizer (-DKOLO_SANITIZE=thread) in build-tsan/ and runs
# them: the engine's loop thread, submitting threads, handles, statistics and the timeline
# writer must be free of data races. Extra arguments go to the test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKOLO_WERROR=ON \
      -DKOLO_SANITIZE=thread >/dev/null
cmake --build build-tsan -j "$(nproc)" --target kolo_unit_tests
# halt_on_error: the first race fails the run; second_deadlock_stack: readable lock reports.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
build-tsan/tests/kolo_unit_tests --gtest_filter='Engine*:Timeline*' "$@"
