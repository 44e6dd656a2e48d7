#!/usr/bin/env bash
# The quick start's test command (and exactly what CI runs): installs what kolo needs, fetches
# the trainer's data sets (npm), builds with warnings as errors, checks formatting, and runs the
# whole test suite with ctest, after the layer check (scripts/check_layers.py), the engine's
# tests under ThreadSanitizer (scripts/tsan_engine.sh) and a short run of the parsers' fuzz
# targets (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/install_deps.sh
bash scripts/fetch_data.sh
echo "test.sh: dependencies and data took $(( $(date +%s) - start )) s"
start=$(date +%s)
bash scripts/build.sh
echo "test.sh: build took $(( $(date +%s) - start )) s"
bash scripts/format --check
python3 scripts/check_layers.py
# The engine's threads under ThreadSanitizer (its own build in build-tsan/).
start=$(date +%s)
bash scripts/tsan_engine.sh
echo "test.sh: ThreadSanitizer build and engine tests took $(( $(date +%s) - start )) s"
# The parsers under libFuzzer, 20 s each (Clang; its own build in build-fuzz/).
start=$(date +%s)
bash scripts/fuzz.sh all 20
echo "test.sh: fuzz build and runs took $(( $(date +%s) - start )) s"
# mpirun refuses to run as root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s)
ctest --test-dir build --output-on-failure --timeout 1200 "$@"
echo "test.sh: ctest took $(( $(date +%s) - start )) s"
