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
trap 'rm -f "$out"' EXIT
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
  # Ranks passing different alltoall counts over the mpi transport: kMismatch from the header
  # (the larger message was handed to MPI, truncated, and the heap corrupted: 3 of 3 runs).
  a2a=(--transport mpi --coll alltoall -n 3 -w 1 --bound 0)
  expect nonzero "the ranks passed different counts" \
    "$mpirun" --allow-run-as-root --oversubscribe --mca btl self,vader,tcp --mca btl_tcp_if_include lo \
    --mca oob_tcp_if_include lo -np 2 "$bw" "${a2a[@]}" -b 12K -e 12K : -np 1 "$bw" "${a2a[@]}" -b 24K -e 24K
  if grep -qE "corrupt|double free|signal" "$out"; then
    echo "FAILED: the mismatched alltoall over mpi broke a process:"
    sed 's/^/    /' "$out" | head -20
    failed=1
  fi
fi
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

# engine_soak: NaN is no limit; a run shorter than ten ops samples after its first group.
expect nonzero "--max-rss-growth: 'nan' is not accepted" "$bench/engine_soak" --max-rss-growth nan
expect 0 "wrong results 0: PASS" "$kolorun" -np 2 "$bench/engine_soak" --ops 5

tt=$bench/trainer_throughput
if [ -x "$tt" ]; then
  small=(--preset tiny --batch 2 --seq 8 --steps 1 --warmup 0 --dtypes float32)
  expect nonzero "--dropout: 'nan' is not accepted" "$tt" --no-torch --dropout nan
  expect nonzero "--dropout: '0.999' is not accepted; expected a finite number from 0 to below 0.999" \
    "$tt" --no-torch --dropout 0.999
  expect 1 "--seq: '513' is not accepted; expected 1 to 512 (max_position of --preset tiny)" \
    "$tt" --no-torch --preset tiny --seq 513
  expect 1 "--batch: '10000' is not accepted" "$tt" --no-torch --batch 10000
  # A --python given is asked for: its run failing is an error.
  expect 1 "--python /nonexistent: the PyTorch run failed" "$tt" --python /nonexistent "${small[@]}"
fi

if [ "$failed" = 0 ]; then echo "benchmarks_test: OK"; else echo "benchmarks_test: FAILED"; fi
exit "$failed"
