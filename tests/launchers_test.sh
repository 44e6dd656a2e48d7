#!/usr/bin/env bash
# One test program, four launchers, the same results: kolo_sweep runs under mpirun, kolorun, a
# torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and a
# Slurm-style one (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID + KOLO_ADDR/KOLO_PORT), 4 ranks
# each; every run must pass and print the same digest of all ranks' results.
# Usage: launchers_test.sh KOLORUN KOLO_SWEEP [MPIRUN]
set -uo pipefail
kolorun=$1
sweep=$2
mpirun=${3:-}
args=(--sizes 0,1,7,1000,65537)
np=4
passed=0
failed=0
digests=()

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }

# Starts np copies of the sweep with per-rank variables from $1 (a function name).
run_env_launch() {
  local set_env=$1 port
  port=$(free_port)
  local pids=() out
  out=$(mktemp)
  for r in $(seq 0 $((np - 1))); do
    ( $set_env "$r" "$port"; exec "$sweep" "${args[@]}" ) >"$out.$r" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$out.0"
  for r in $(seq 1 $((np - 1))); do sed "s/^/[rank $r] /" "$out.$r"; done
  rm -f "$out" "$out".*
  return $rc
}
torchrun_env() { export RANK=$1 WORLD_SIZE=$np LOCAL_RANK=$1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$2; }
slurm_env() { export SLURM_PROCID=$1 SLURM_NTASKS=$np SLURM_LOCALID=$1 KOLO_ADDR=127.0.0.1 KOLO_PORT=$2; }

check() {
  local name=$1 output=$2 rc=$3 digest
  digest=$(echo "$output" | grep -o 'digest=[0-9a-f]*' | head -1)
  echo "$output" | grep -E 'passed|FAILED|error' | head -5
  if [ "$rc" -eq 0 ] && [ -n "$digest" ]; then
    echo "ok: $name $digest"
    digests+=("$digest")
    passed=$((passed + 1))
  else
    echo "FAILED: $name (exit $rc)"
    failed=$((failed + 1))
  fi
}

out=$("$kolorun" -np $np "$sweep" "${args[@]}" 2>&1); check kolorun "$out" $?
out=$(run_env_launch torchrun_env); check torchrun "$out" $?
out=$(run_env_launch slurm_env); check slurm "$out" $?
if [ -n "$mpirun" ]; then
  out=$($mpirun --allow-run-as-root --oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np $np "$sweep" "${args[@]}" 2>&1); check mpirun "$out" $?
fi

# Under mpirun: a rank 0 that is late to kolo's init fails the others at their deadline naming
# it (they waited in MPI's broadcast for ever), and variables left from another launcher that
# make each process a job of one are refused (each ran alone and exited 0).
expect_failure() {
  local name=$1 pattern=$2 limit=$3 start out rc
  shift 3
  start=$(date +%s)
  out=$("$@" 2>&1)
  rc=$?
  local took=$(($(date +%s) - start))
  if [ "$rc" -ne 0 ] && echo "$out" | grep -q "$pattern" && [ "$took" -lt "$limit" ]; then
    echo "ok: $name (exit $rc after $took s)"
    passed=$((passed + 1))
  else
    echo "$out" | tail -5
    echo "FAILED: $name (exit $rc after $took s; wanted a failure naming '$pattern' within $limit s)"
    failed=$((failed + 1))
  fi
}
if [ -n "$mpirun" ]; then
  mpi=($mpirun --allow-run-as-root --oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np 2)
  expect_failure "mpirun, rank 0 late to init" "world rank 0 did not reach the rendezvous over MPI" 40 \
    env KOLO_TIMEOUT_SECONDS=3 "${mpi[@]}" "$sweep" --sizes 1 --late-rank0 60
  expect_failure "mpirun with SLURM_NTASKS=1 left over" "SLURM_NTASKS=1 makes this process a job of one" 60 \
    env SLURM_PROCID=0 SLURM_NTASKS=1 "${mpi[@]}" "$sweep" --sizes 1
fi

unique=$(printf '%s\n' "${digests[@]}" | sort -u | wc -l)
if [ "$unique" -eq 1 ] && [ "$failed" -eq 0 ]; then
  echo "ok: every launcher gave ${digests[0]}"
  passed=$((passed + 1))
else
  echo "FAILED: digests differ: ${digests[*]}"
  failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
