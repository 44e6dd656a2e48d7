#!/usr/bin/env bash
# Builds all of kolo with one sanitizer (-DKOLO_SANITIZE=...) in build-asan/, build-ubsan/ or
# build-tsan/ and runs the whole ctest suite there; any sanitizer report fails the run. Slow (a
# full build, then the suite at 2-10x), so CI runs only scripts/tsan_engine.sh. See docs/testing.md.
#   scripts/sanitize.sh address|undefined|thread [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  address) build="build-asan" ;;
  undefined) build="build-ubsan" ;;
  thread) build="build-tsan" ;; # shared with scripts/tsan_engine.sh
  *)
    echo "usage: $0 address|undefined|thread [ctest arguments...]" >&2
    exit 2
    ;;
esac
sanitizer=$1
shift

# Tests that cannot run under this sanitizer, each with its reason (ctest -E, anchored names).
excluded=()
configure=()
case "$sanitizer" in
  address)
    # Judges RSS growth (under 10% over 20000 ops), but AddressSanitizer keeps up to 256 MiB of
    # freed memory in quarantine to catch use after free, so RSS grows by design (with
    # ASAN_OPTIONS=quarantine_size_mb=0 it passes, 5% growth).
    excluded+=(engine_soak_short)
    ;;
  undefined)
    # The Python package too (AUTO skips it in sanitizer builds): this runtime loads with the
    # module, python3 needs nothing preloaded.
    configure+=(-DKOLO_WITH_PYTHON=ON)
    ;;
  thread)
    # The same RSS judgement: ThreadSanitizer's shadow memory and access history grow with the
    # memory the soak touches (62.9 -> 79.4 MiB, 26%, over 20000 ops), while the heap does not.
    excluded+=(engine_soak_short)
    ;;
esac

# OpenBLAS as in the normal build (build-tsan/ may hold KOLO_WITH_OPENBLAS=OFF from older runs).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKOLO_WERROR=ON \
      -DKOLO_SANITIZE="$sanitizer" -DKOLO_WITH_OPENBLAS=AUTO "${configure[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"

# Reports go to files, one per process (reports/<tool>.<program>.<pid>), not to stderr: a report
# in a process that a test expects to fail (a refused batch size, a killed peer) would otherwise
# pass unnoticed. halt_on_error: the first report ends the process with a failing status.
reports=$PWD/$build/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
supp=$PWD/scripts/sanitize
common="halt_on_error=1:print_stacktrace=1:log_exe_name=1"
export ASAN_OPTIONS="$common:log_path=$reports/asan:detect_leaks=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
# Ranks that mpirun starts unwind allocation stacks in full: Open MPI is built without frame
# pointers, and its leaks are suppressed by its libraries' names, which only full stacks reach.
# Only there: fast_unwind_on_malloc=0 makes the trainer's programs 7x slower.
export OMPI_MCA_mca_base_env_list="ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0"
export UBSAN_OPTIONS="$common:log_path=$reports/ubsan:${UBSAN_OPTIONS:-}"
export TSAN_OPTIONS="$common:log_path=$reports/tsan:second_deadlock_stack=1:\
suppressions=$supp/tsan.supp:${TSAN_OPTIONS:-}"
# mpirun refuses to run as root unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

filter=()
if ((${#excluded[@]})); then
  filter=(-E "^($(IFS='|'; echo "${excluded[*]}"))\$")
fi
count() { ctest --test-dir "$build" -N "$@" | sed -n 's/^Total Tests: //p'; }
all=$(count "$@")
selected=$(count "${filter[@]}" "$@")
log=$build/sanitize-ctest.log
status=0
# Sanitized runs are 2-10x slower: a generous default timeout for tests that set none.
ctest --test-dir "$build" --output-on-failure --timeout 3600 "${filter[@]}" "$@" | tee "$log" ||
  status=1
failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of.*/\1/p' "$log")
if compgen -G "$reports/*" >/dev/null; then
  status=1
  for report in "$reports"/*; do
    echo "=== sanitizer report $report"
    cat "$report"
  done
fi
names=none
((all > selected)) && names=$(IFS=,; echo "${excluded[*]}")
echo "sanitize $sanitizer: $((selected - ${failed:-$selected})) tests passed," \
     "$((all - selected)) excluded ($names)"
if ! grep -q '^KOLO_WITH_PYTHON:STRING=ON$' "$build/CMakeCache.txt"; then
  echo "sanitize $sanitizer: the Python package and its tests (python_torch_*) are not built in" \
       "sanitizer builds (KOLO_WITH_PYTHON): python3 would need the sanitizer's runtime preloaded"
fi
exit $status
