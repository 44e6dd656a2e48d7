#!/usr/bin/env bash
# Tests of scripts/testbed.sh: a 2-host bed of network namespaces comes up with distinct
# hostnames, the hosts reach each other, a 2 hosts x 2 ranks allreduce_bw over it is right, and
# `down` leaves nothing behind. Replaces any bed already up.
# Usage: testbed_test.sh /path/to/allreduce_bw   (exit 0: passed, 77: skipped, not root or no netns)
set -u

BENCH=${1:?usage: testbed_test.sh /path/to/allreduce_bw}
TESTBED="$(cd "$(dirname "$0")/.." && pwd)/scripts/testbed.sh"
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root"; exit 77; fi
if ! ip netns list >/dev/null 2>&1; then echo "SKIP: 'ip netns' is unavailable"; exit 77; fi

TMP=$(mktemp -d)
trap '"$TESTBED" down >/dev/null 2>&1; rm -rf "$TMP"' EXIT
passed=0
failed=0
check() {  # check NAME CONDITION...: runs the condition, records pass/fail
  local name=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name" >&2
  fi
}

if ! "$TESTBED" up --hosts 2 --rate 2gbit; then echo "FAIL: testbed up" >&2; exit 1; fi

h1=$("$TESTBED" exec kolo-h1 hostname)
h2=$("$TESTBED" exec kolo-h2 hostname)
check "each host has its own hostname (h1=$h1 h2=$h2)" \
  test "$h1" = kolo-h1 -a "$h2" = kolo-h2 -a "$h1" != "$(hostname)"

# A TCP connect from h1 to a listener in h2.
"$TESTBED" exec kolo-h2 timeout 20 python3 -c '
import socket
s = socket.socket(); s.bind(("10.77.0.2", 29600)); s.listen(1); s.accept()[0].close()' &
listener=$!
connected=1
for _ in $(seq 50); do
  if "$TESTBED" exec kolo-h1 python3 -c '
import socket; socket.create_connection(("10.77.0.2", 29600), 1).close()' 2>/dev/null; then
    connected=0
    break
  fi
  sleep 0.1
done
check "h1 reaches h2 over TCP" test "$connected" -eq 0
wait "$listener"

# 2 hosts x 2 ranks, torchrun-style, with a job secret.
secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
pids=()
for rank in 0 1 2 3; do
  host=kolo-h$((rank / 2 + 1))
  "$TESTBED" exec "$host" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) \
    LOCAL_WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=29500 KOLO_SECRET="$secret" \
    timeout 120 "$BENCH" -b 1M -e 64M -f 4 -n 5 -c 1 >"$TMP/rank$rank.out" 2>&1 &
  pids+=($!)
done
job_rc=0
for pid in "${pids[@]}"; do wait "$pid" || job_rc=1; done
check "2x2 allreduce_bw exits 0" test "$job_rc" -eq 0
check "2x2 allreduce_bw: #wrong in all rows: 0" grep -q "#wrong in all rows: 0" "$TMP/rank0.out"
check "2x2 allreduce_bw sees 2 hosts (tcp)" grep -q "ranks 4, transport tcp" "$TMP/rank0.out"
if [ "$failed" -gt 0 ]; then head -c 3000 "$TMP"/rank*.out >&2; fi

check "testbed down" "$TESTBED" down
check "no kolo-h* namespace left" sh -c '! ip netns list | grep -q "^kolo-h"'
check "no kolo-br0 left" sh -c '! ip link show kolo-br0 >/dev/null 2>&1'
check "no kolo veth left" sh -c '! ip -o link show | grep -q "kolo-h[0-9]*v"'

echo "testbed_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
