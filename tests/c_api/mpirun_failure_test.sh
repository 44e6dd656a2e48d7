#!/usr/bin/env bash
# Under mpirun, a rank that exits with an error right after kolo_init ends the job at once: the
# others are stopped by mpirun well before KOLO_TIMEOUT_SECONDS (60 here). Before, the failed
# rank waited in MPI_Finalize at exit for the others, who waited in a collective for it.
# Usage: mpirun_failure_test.sh MPIRUN LIFECYCLE_BINARY
set -uo pipefail
mpirun=$1
program=$2
start=$(date +%s)
out=$(KOLO_TIMEOUT_SECONDS=60 timeout 120 "$mpirun" --allow-run-as-root --oversubscribe \
  --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np 2 "$program" rank-1-fails 2>&1)
rc=$?
took=$(($(date +%s) - start))
echo "$out" | grep -v '^-*$' | head -8
echo "exit $rc after ${took}s"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAILED: the job should fail, at once"; exit 1; }
[ "$took" -lt 30 ] || { echo "FAILED: the job took ${took}s to end (the deadline is 60 s)"; exit 1; }
echo "$out" | grep -q "rank 1 fails on purpose" || { echo "FAILED: rank 1's message is missing"; exit 1; }
echo "ok"
