#!/usr/bin/env bash
# Builds the engine's tests with ThreadSanitizer (-DKOLO_SANITIZE=thread) in build-tsan/ and runs
# them: the engine's loop thread, submitting threads, handles, statistics and the timeline
# writer must be free of data races; so must the trainer kernels' thread pool (the
# KernelsParallel tests). Extra arguments go to the engine's test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKOLO_WERROR=ON \
      -DKOLO_SANITIZE=thread >/dev/null
# Only the test binaries that run here (tests/CMakeLists.txt): the engine's and timeline's tests,
# and the kernels' pool where the trainer is built (KOLO_WITH_OPENBLAS).
targets=(kolo_engine_tests)
if grep -q '^kolo_trainer_parallel_tests:' <(cmake --build build-tsan --target help 2>/dev/null | tr -d ' '); then
  targets+=(kolo_trainer_parallel_tests)
fi
cmake --build build-tsan -j "$(nproc)" --target "${targets[@]}"
# halt_on_error: the first race fails the run; second_deadlock_stack: readable lock reports.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
build-tsan/tests/kolo_engine_tests "$@"
if [[ " ${targets[*]} " == *" kolo_trainer_parallel_tests "* ]]; then
  build-tsan/tests/trainer/kolo_trainer_parallel_tests
fi
