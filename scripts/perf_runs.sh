#!/usr/bin/env bash
# Runs the allreduce_bw measurements behind docs/performance.md: every run compares kolo with
# MPI and Gloo in the same process run; each measurement is repeated REPS times (default 5)
# and scripts/perf_summary.py reports medians. Usage: scripts/perf_runs.sh OUT_DIR [REPS]
# Takes roughly 10 minutes on an idle 2-core machine with the default REPS=5 (estimated from
# docs/performance.md's times: mostly mpirun start-ups and MPI/Gloo at 64-256 MiB, at about
# 40 s per repetition of the points and a minute per table repetition); keep the machine
# otherwise idle.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: perf_runs.sh OUT_DIR [REPS]}
reps=${2:-5}
if ! [[ "$reps" =~ ^[1-9][0-9]*$ ]]; then
  echo "perf_runs: REPS='$reps' is not a whole number >= 1" >&2
  exit 2
fi
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bw=build/benchmarks/allreduce_bw
lo="--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"  # loopback only
mpi() { local np=$1; shift; mpirun --oversubscribe $lo -np "$np" "$@" >/dev/null; }

for rep in $(seq 1 "$reps"); do
  echo "perf_runs: repetition $rep of $reps"
  # Point measurements (the must-show figures), np=2 unless named.
  mpi 2 $bw -b 8 -e 8 -n 20000 -w 1000 --compare mpi,gloo --json "$out/p2_8B.$rep.json"
  mpi 2 $bw -b 64M -e 64M -n 5 -w 2 --compare mpi,gloo --json "$out/p2_64M.$rep.json"
  mpi 2 $bw -b 32M -e 32M -n 5 -w 2 -d float16 --compare gloo --json "$out/p2_fp16_16M.$rep.json"
  mpi 2 $bw -b 64M -e 64M -n 5 -w 2 --coll reduce_scatter --compare mpi --json "$out/p2_rs_64M.$rep.json"
  mpi 2 $bw -b 64M -e 64M -n 5 -w 2 --coll allgather --compare mpi --json "$out/p2_ag_64M.$rep.json"
  # The same on kolo::alloc_shared buffers (peers map them), allgather also in place.
  mpi 2 $bw -b 64M -e 64M -n 5 -w 2 --coll reduce_scatter --alloc shared --compare mpi \
    --json "$out/p2_rs_shared_64M.$rep.json"
  mpi 2 $bw -b 64M -e 64M -n 5 -w 2 --coll allgather --alloc shared --inplace 1 --compare mpi \
    --json "$out/p2_ag_shared_inplace_64M.$rep.json"
  mpirun --oversubscribe $lo -np 2 --mca btl tcp,self $bw -b 64M -e 64M -n 5 -w 2 --transport tcp \
    --compare mpi --json "$out/p2_tcp_64M.$rep.json" >/dev/null
  mpi 4 $bw -b 32M -e 32M -n 5 -w 2 --compare mpi,gloo --json "$out/p4_32M.$rep.json"
  mpi 8 $bw -b 32M -e 32M -n 3 -w 1 --compare mpi,gloo --json "$out/p8_32M.$rep.json"
done
# The size table (fewer repetitions: MPI and Gloo take seconds per operation at 256 MiB).
for rep in $(seq 1 "$(( reps < 3 ? reps : 3 ))"); do
  echo "perf_runs: table repetition $rep"
  mpi 2 $bw -b 16 -e 256M -f 4 -n 5 -w 1 --compare mpi,gloo --json "$out/t2.$rep.json"
  mpi 4 $bw -b 16 -e 256M -f 16 -n 5 -w 1 --compare mpi,gloo --json "$out/t4.$rep.json"
  mpi 8 $bw -b 16 -e 256M -f 16 -n 3 -w 1 --compare mpi,gloo --json "$out/t8.$rep.json"
done
/usr/bin/python3 scripts/perf_summary.py "$out"
