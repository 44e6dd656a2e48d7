#!/usr/bin/env bash
# The benchmark programs refuse what they cannot run, on every rank and before anything is
# allocated or timed: each case expects an exit status and a message naming the flag, within
# a few seconds (a hang or the OOM killer is a failure). Found by a robustness sweep: a
# 100 GiB --alloc shared run that filled /dev/shm, launcher variables that ended in
# std::terminate, -b sizes that wrapped, NaN limits that switched checks off, an engine_soak
# too short to sample, flags refused in other words than the flag's.
# Usage: benchmarks_test.sh BUILD_DIR [MPIRUN]
set -uo pipefail
bench=$1/benchmarks
kolorun=$1/tools/kolorun
mpirun=${2:-}
out=$(mktemp)
trap 'rm -f "$out" "$out.x"' EXIT
failed=0

# expect STATUS TEXT COMMAND...: STATUS is a number or "nonzero"; TEXT must be in the output.
expect() {
  local status=$1 text=$2 rc
  shift 2
  timeout -k 2 20 "$@" >"$out" 2>&1
  rc=$?
  if { [ "$status" = nonzero ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ]; } ||
    [ "$rc" = "$status" ]; then
    if grep -qF -- "$text" "$out"; then
      echo "ok: $*"
      return
    fi
  fi
  echo "FAILED (exit $rc, expected $status and '$text'): $*"
  sed 's/^/    /' "$out" | head -20
  failed=1
}

bw=$bench/allreduce_bw
# Buffers larger than the host's memory: refused on every rank before they are allocated.
expect 2 "cannot allocate two buffers of 107374182400 bytes (--alloc shared) per rank for the 2 ranks on this host" \
  "$kolorun" -np 2 "$bw" -b 100G -e 100G -n 1 -w 0 --alloc shared
expect 2 "(private memory) per rank for the 2 ranks on this host" \
  "$kolorun" -np 2 "$bw" -b 1K -e 1000000G -f 1024 -n 1 -w 0
if [ -n "$mpirun" ]; then
  expect 2 "lower -e or the number of ranks on this host" \
    "$mpirun" --allow-run-as-root --oversubscribe --mca btl self,vader,tcp --mca btl_tcp_if_include lo \
    --mca oob_tcp_if_include lo -np 2 "$bw" -b 100G -e 100G -n 1 -w 0 --alloc shared
fi
# Flags that differ between ranks (a launcher passing each rank its own): refused on every rank
# naming both (a larger -e printed rank 0's table while rank 1 failed; --compare gloo on one rank
# left it in Gloo's connect for 5 minutes; --only left engine_overhead stalled for ever), and a
# usage error on rank 1 alone is printed by rank 1 (it exited 2 saying nothing).
per_rank='if [ "$KOLO_RANK" = 1 ]; then exec "$0" $2; else exec "$0" $1; fi'
expect 1 "[1] allreduce_bw: rank 1: kolo invalid argument error: the ranks were given different flags" \
  "$kolorun" -np 2 bash -c "$per_rank" "$bw" "-b 1K -e 64K -n 1 -w 0 --bound 0" \
  "-b 1K -e 128K -n 1 -w 0 --bound 0"
expect 1 "--compare '' --inplace 0" \
  "$kolorun" -np 2 bash -c "$per_rank" "$bw" "-b 1K -e 1K -n 1 -w 0 --compare gloo" "-b 1K -e 1K -n 1 -w 0"
expect 1 "rank 0 '-n 2 --only 1x8B', rank 1 '-n 2 --only 100x4KiB'" \
  "$kolorun" -np 2 bash -c "$per_rank" "$bench/engine_overhead" "-n 2 --only 1x8B" "-n 2 --only 100x4KiB"
expect 2 "allreduce_bw: rank 1: --coll: 'bogus' is not accepted" \
  "$kolorun" -np 2 bash -c "$per_rank" "$bw" "-b 1K -e 1K" "-b 1K -e 1K --coll bogus"

# Wrong launcher variables: the library's message and exit status 1, not std::terminate.
expect 1 "allreduce_bw: kolo invalid argument error: RANK=1 is not below WORLD_SIZE=1" \
  env RANK=1 WORLD_SIZE=1 "$bw" -b 1K -e 1K -n 1 -w 0
# Sizes whose suffix would shift bits out (2^34 G wrapped to 0, 2^34 G + 1 G to 1 GiB).
expect 2 "-b/--minbytes: '17179869184G' is not accepted" "$bw" -b 17179869184G
expect 2 "-b/--minbytes: '17179869185G' is not accepted" "$bw" -b 17179869185G
expect 2 "-e/--maxbytes: '4294967296G' is not accepted" "$bw" -e 4294967296G
expect 2 "--bytes: '17179869185G' is not accepted" "$bench/first_use" --bytes 17179869185G
# What --help lists is what is accepted; an -o that a collective would ignore is refused.
expect 0 "auto shm tcp mpi ucx" "$bw" --help
expect 2 "-o/--op: 'max' is not accepted; expected no -o/--op with --coll allgather" \
  "$kolorun" -np 2 "$bw" --coll allgather -o max -b 1K -e 1K
expect 0 "#wrong in all rows: 0" "$kolorun" -np 2 "$bw" --coll broadcast -b 1K -e 1K -n 1 -w 0 --bound 0
expect 0 "#wrong: not checked (-c 0)" "$kolorun" -np 2 "$bw" -b 1K -e 1K -n 1 -w 0 --bound 0 -c 0
# --transport mpi without mpirun: every rank names the cause (rank 0, which holds the store,
# left at once, and another rank still reading reported the lost store instead).
if [ -n "$mpirun" ]; then
  for r in 0 1; do
    expect 1 "[$r] allreduce_bw: rank $r: kolo invalid argument error: the mpi transport needs one MPI process per rank" \
      "$kolorun" -np 2 "$bw" -b 1K -e 1K --transport mpi
  done
fi
# Output files: a failed write is an error naming the file (it exited 0 with the figures lost),
# and one file for both formats is refused (the JSON replaced the CSV).
expect 1 "--json: writing '/dev/full' failed: No space left on device" \
  "$kolorun" -np 2 "$bw" -b 1K -e 1K -n 1 -w 0 --bound 0 --json /dev/full
expect 1 "--csv: writing '/dev/full' failed" "$kolorun" -np 2 "$bw" -b 1K -e 1K -n 1 -w 0 --bound 0 --csv /dev/full
expect 2 "--csv and --json name the same file" "$kolorun" -np 2 "$bw" -b 1K -e 1K --csv "$out.x" --json "$out.x"

# engine_soak: NaN is no limit; a run shorter than ten ops samples after its first group.
expect 2 "engine_soak: --max-rss-growth: 'nan' is not accepted" "$bench/engine_soak" --max-rss-growth nan
expect 0 "wrong results 0: PASS" "$kolorun" -np 2 "$bench/engine_soak" --ops 5
# A flag that does not parse: exit 2 (usage) naming the program, as kolorun and allreduce_bw do
# (CLI11's own handling exited 105 or 109 without the program's name).
expect 2 "first_use: The following argument was not expected: --bogus (see first_use --help)" \
  "$bench/first_use" --bogus
expect 2 "engine_overhead: --steps: Value 0 not in range" "$bench/engine_overhead" -n 0

tt=$bench/trainer_throughput
if [ -x "$tt" ]; then
  small=(--preset tiny --batch 2 --seq 8 --steps 1 --warmup 0 --dtypes float32)
  expect 2 "trainer_throughput: --dropout: 'nan' is not accepted" "$tt" --no-torch --dropout nan
  expect 2 "--dropout: '0.999' is not accepted; expected a finite number from 0 to below 0.999" \
    "$tt" --no-torch --dropout 0.999
  expect 1 "--seq: '513' is not accepted; expected 1 to 512 (max_position of --preset tiny)" \
    "$tt" --no-torch --preset tiny --seq 513
  expect 1 "--batch: '10000' is not accepted" "$tt" --no-torch --batch 10000
  # A --python given is asked for: its run failing is an error.
  expect 1 "--python /nonexistent: the PyTorch run failed" "$tt" --python /nonexistent "${small[@]}"
fi

if [ "$failed" = 0 ]; then echo "benchmarks_test: OK"; else echo "benchmarks_test: FAILED"; fi
exit "$failed"
