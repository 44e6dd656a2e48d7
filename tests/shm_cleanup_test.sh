#!/usr/bin/env bash
# A rank killed while the shared-memory transport is being set up (right after it created its
# segment, before every peer mapped it; KOLO_FAULT_INJECT=shm_created:<rank>) leaves nothing in
# /dev/shm once the job is over (the hardening issue: its segment leaked):
#  - under kolorun with one rank killed (the survivors or kolorun remove the names);
#  - under kolorun with every rank killed (kolorun removes them);
#  - torchrun-style, without kolorun, with one rank killed (the survivor removes them).
# Runs alone (RUN_SERIAL): it compares the kolo entries of /dev/shm before and after.
# Usage: shm_cleanup_test.sh BUILD_DIR
set -euo pipefail
kolorun=$1/tools/kolorun
demo=$1/examples/c_api_demo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
list() { find /dev/shm -maxdepth 1 -name 'kolo-*' -printf '%f\n' | sort; }
list >"$work/before"
check() {  # what
  list >"$work/after"
  local left
  left=$(comm -13 "$work/before" "$work/after")
  if [ -n "$left" ]; then
    echo "shm_cleanup_test: $1: left in /dev/shm: $left"
    exit 1
  fi
  echo "shm_cleanup_test: $1: nothing left in /dev/shm"
}
export KOLO_TIMEOUT_SECONDS=5
if KOLO_FAULT_INJECT=shm_created:1 "$kolorun" -np 3 "$demo" >"$work/out1" 2>&1; then
  echo "shm_cleanup_test: the job with a killed rank succeeded"; cat "$work/out1"; exit 1
fi
check "kolorun -np 3, rank 1 killed during setup"
if KOLO_FAULT_INJECT=shm_created:all "$kolorun" -np 3 "$demo" >"$work/out2" 2>&1; then
  echo "shm_cleanup_test: the job with every rank killed succeeded"; cat "$work/out2"; exit 1
fi
grep -q "kolorun: removed [0-9]* shared-memory segment(s)" "$work/out2" || { cat "$work/out2"; exit 1; }
check "kolorun -np 3, every rank killed during setup"
port=$((20000 + RANDOM % 20000))
pids=()
for r in 0 1; do
  KOLO_FAULT_INJECT=shm_created:1 RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$port KOLO_SECRET=cleanup "$demo" >"$work/rank$r" 2>&1 &
  pids+=($!)
done
for r in 0 1; do
  if wait "${pids[$r]}"; then echo "shm_cleanup_test: torchrun-style rank $r succeeded"; exit 1; fi
done
check "torchrun-style, rank 1 killed during setup, rank 0 survives"
echo "shm_cleanup_test: OK"
