#!/usr/bin/env bash
# Builds kolo's libFuzzer targets (tests/fuzz/, Clang with AddressSanitizer and
# UndefinedBehaviorSanitizer) in build-fuzz/ and runs each for SECONDS from its seeds
# (tests/fuzz/seeds/TARGET/) and what earlier runs found (build-fuzz/corpus/TARGET/). CI runs
# `scripts/fuzz.sh all 20`; a longer run finds more.
#   scripts/fuzz.sh TARGET|all SECONDS [libFuzzer arguments...]
# Prints one line per target:
#   fuzz TARGET: N execs, cov C, ft F, S s, clean
# or, when an input crashes, hangs or breaks a check, the report, the input's file and exit 1.
# Reproduce a finding with: build-fuzz/tests/fuzz/TARGET CRASH_FILE
set -euo pipefail
cd "$(dirname "$0")/.."

all=(fuzz_store_protocol fuzz_handshake fuzz_engine_wire fuzz_safetensors fuzz_config fuzz_mail
     fuzz_checkpoint_index)
# SECONDS >= 1: libFuzzer reads -max_total_time=0 as no limit.
if [ $# -lt 2 ] || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 TARGET|all SECONDS [libFuzzer arguments...]  (targets: ${all[*]})" >&2
  exit 2
fi
target=$1
seconds=$2
shift 2
if [ "$target" = all ]; then
  targets=("${all[@]}")
elif [[ " ${all[*]} " == *" $target "* ]]; then
  targets=("$target")
else
  echo "fuzz.sh: unknown target '$target' (one of: all ${all[*]})" >&2
  exit 2
fi

# Longest input per target: a few frames or Hellos, a header, a config, a long mail.
declare -A max_len=([fuzz_store_protocol]=4096 [fuzz_handshake]=512 [fuzz_engine_wire]=4096
                    [fuzz_safetensors]=4096 [fuzz_config]=4096 [fuzz_mail]=32768
                    [fuzz_checkpoint_index]=4096)

# Only the fuzz targets are built; the dependencies they do not use are off.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKOLO_FUZZ=ON -DKOLO_WITH_OPENBLAS=OFF -DKOLO_WITH_MPI=OFF -DKOLO_WITH_GLOO=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"

failed=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus" build-fuzz/findings
  log=build-fuzz/findings/$t.log
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  start=$(date +%s)
  rc=0
  # New inputs go to the first folder (the corpus); the seeds are only read.
  build-fuzz/tests/fuzz/"$t" -max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-fuzz/findings/"$t"- \
    "${dict[@]}" "$@" "$corpus" "tests/fuzz/seeds/$t" >"$log" 2>&1 || rc=$?
  took=$(( $(date +%s) - start ))
  # libFuzzer's last status line: "#1234567 DONE   cov: 345 ft: 1234 corp: ..."
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true)
  if [ "$rc" -eq 0 ] && [ -n "$done_line" ]; then
    execs=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$done_line")
    cov=$(sed -E 's/.* cov: ([0-9]+).*/\1/' <<<"$done_line")
    ft=$(sed -E 's/.* ft: ([0-9]+).*/\1/' <<<"$done_line")
    echo "fuzz $t: $execs execs, cov $cov, ft $ft, $took s, clean"
  else
    failed=1
    # The report's first lines (long stack frames cut), then where the input was saved.
    pattern='==ERROR|runtime error|check failed|ALARM|out-of-memory|deadly signal|terminate called'
    grep -E -m 1 -A 16 "$pattern" "$log" | cut -c 1-160 >&2 || tail -n 20 "$log" >&2
    artifact=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -n 1 | cut -d' ' -f5 || true)
    echo "fuzz $t: FAILED (exit $rc) after $took s; input: ${artifact:-none saved}; log: $log"
  fi
done
exit $failed
