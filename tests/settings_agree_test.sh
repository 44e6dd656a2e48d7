#!/usr/bin/env bash
# Settings every rank must share (found by the hardening issue: a different
# KOLO_SHM_BUFFER_BYTES gave SIGBUS or silent corruption, a different KOLO_FUSION_THRESHOLD
# or KOLO_CACHE_CAPACITY wrong results, a different KOLO_DEVICE_HIERARCHICAL a wait in the
# device sets' splits; another KOLO_ALGORITHM other message sizes, another
# KOLO_TRANSPORT a hang in setup, another KOLO_SHM_STAGED_PASSES waits at other barriers): two ranks started torchrun-style with one setting
# different both fail with exit status 1 and a message naming the setting and both values.
# Usage: settings_agree_test.sh BUILD_DIR
set -euo pipefail
demo=$1/examples/c_api_demo
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
check() {  # setting, value on rank 0, value on rank 1, expected text
  local port=$((20000 + RANDOM % 20000)) pids=()
  for r in 0 1; do
    local value=$2
    [ "$r" = 1 ] && value=$3
    env "$1=$value" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      KOLO_SECRET=agree KOLO_TIMEOUT_SECONDS=30 "$demo" >"$out/$1.$r" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do
    if wait "${pids[$r]}"; then echo "rank $r exited 0 with $1=$2/$3"; exit 1; fi
    grep -q "$4" "$out/$1.$r" || { cat "$out/$1.$r"; exit 1; }
  done
  echo "settings_agree_test: $1 ($2 vs $3): refused on both ranks"
}
check KOLO_SHM_BUFFER_BYTES 4194304 1048576 "KOLO_SHM_BUFFER_BYTES differs between ranks: rank 0 uses 4194304 bytes, rank 1 uses 1048576"
check KOLO_FUSION_THRESHOLD 67108864 1048576 "KOLO_FUSION_THRESHOLD differs between ranks: rank 0 uses 67108864, rank 1 uses 1048576"
check KOLO_CACHE_CAPACITY 1024 0 "KOLO_CACHE_CAPACITY differs between ranks: rank 0 uses 1024, rank 1 uses 0"
check KOLO_DEVICE_HIERARCHICAL 1 0 "KOLO_DEVICE_HIERARCHICAL differs between ranks: rank 0 uses 1, rank 1 uses 0"
check KOLO_SHM_STAGED_PASSES 1 2 "KOLO_SHM_STAGED_PASSES differs between ranks: rank 0 uses 1, rank 1 uses 2"
check KOLO_ALGORITHM ring tree "KOLO_ALGORITHM differs between ranks: rank 0 uses ring, rank 1 uses tree"
check KOLO_TRANSPORT shm tcp "the transport (KOLO_TRANSPORT, or the program's transport option) differs between ranks: rank 0 uses shm, rank 1 uses tcp"
echo "settings_agree_test: OK"
