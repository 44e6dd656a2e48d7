#!/usr/bin/env bash
# Tests of scripts/testbed.sh and of kolo across its hosts: a 2-host bed of network namespaces
# comes up with distinct hostnames, the hosts reach each other, a 2 hosts x 2 ranks
# allreduce_bw over it is right, a reduced collective sweep passes over tcp (allreduce:
# hierarchical), over ucx (UCX_TLS=tcp) and over mpi (mpirun); a store address that drops SYNs
# fails at the deadline, tcp listens where the store is reached from, a loopback KOLO_TCP_ADDR
# across hosts is refused; a link taken down mid-collective fails every rank within the deadline, so do the survivors of a host whose ranks are killed, and `down` leaves nothing
# behind. Replaces any bed already up.
# kolorun --hosts starts the ranks of every host from one place through the bed's remote shell.
# Usage: testbed_test.sh ALLREDUCE_BW KOLO_SWEEP KOLORUN [WITH_UCX]
#        (exit 0: passed, 77: skipped, not root or no netns)
set -u

BENCH=${1:?usage: testbed_test.sh ALLREDUCE_BW KOLO_SWEEP}
SWEEP=${2:?usage: testbed_test.sh ALLREDUCE_BW KOLO_SWEEP KOLORUN}
KOLORUN=${3:?usage: testbed_test.sh ALLREDUCE_BW KOLO_SWEEP KOLORUN [WITH_UCX]}
WITH_UCX=${4:-0}  # 1: kolo was built with the ucx transport
TESTBED="$(cd "$(dirname "$0")/.." && pwd)/scripts/testbed.sh"
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root"; exit 77; fi
if ! ip netns list >/dev/null 2>&1; then echo "SKIP: 'ip netns' is unavailable"; exit 77; fi

TMP=$(mktemp -d)
trap '"$TESTBED" down >/dev/null 2>&1; rm -rf "$TMP"' EXIT
# shellcheck source=common/check.sh
source "$(dirname "$0")/common/check.sh"

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

# 2 hosts x 2 ranks, torchrun-style, with a job secret: run_job NAME CMD... runs CMD as the
# four ranks (rank r on host r / 2 + 1), each one's output in $TMP/NAME.rankR; returns the
# number of ranks that failed.
secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
run_job() {
  local name=$1 pids=() rank failures=0
  shift
  for rank in 0 1 2 3; do
    "$TESTBED" exec "kolo-h$((rank / 2 + 1))" env RANK=$rank WORLD_SIZE=4 \
      LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=29500 \
      KOLO_SECRET="$secret" timeout 300 "$@" >"$TMP/$name.rank$rank" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failures=$((failures + 1)); done
  return "$failures"
}

run_job bw "$BENCH" -b 1M -e 64M -f 4 -n 5 -c 1
check "2x2 allreduce_bw exits 0" test $? -eq 0
check "2x2 allreduce_bw: #wrong in all rows: 0" grep -q "#wrong in all rows: 0" "$TMP/bw.rank0"
check "2x2 allreduce_bw sees 2 hosts (tcp)" grep -q "ranks 4, transport tcp" "$TMP/bw.rank0"
check "2x2 allreduce_bw picks hierarchical" grep -q " hierarchical " "$TMP/bw.rank0"

sizes=0,1,1000,65536,1048579
run_job sweep_tcp "$SWEEP" --sizes "$sizes"
check "2x2 sweep over tcp (hierarchical allreduce) exits 0" test $? -eq 0
check "2x2 sweep over tcp: 0 failed" grep -q " 0 failed" "$TMP/sweep_tcp.rank0"

# UCX over its TCP transport (its shared memory would bypass the bed's links).
if [ "$WITH_UCX" = 1 ]; then
  run_job sweep_ucx env UCX_TLS=tcp KOLO_TRANSPORT=ucx "$SWEEP" --sizes "$sizes"
  check "2x2 sweep over ucx (UCX_TLS=tcp) exits 0" test $? -eq 0
  check "2x2 sweep over ucx: 0 failed" grep -q " 0 failed" "$TMP/sweep_ucx.rank0"
fi

if command -v mpirun >/dev/null; then
  timeout 600 mpirun --allow-run-as-root --oversubscribe -np 4 -H kolo-h1:2,kolo-h2:2 \
    --mca plm_rsh_agent "$TESTBED rsh" --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 "$SWEEP" --transport mpi --sizes "$sizes" \
    >"$TMP/sweep_mpi.out" 2>&1
  check "2x2 sweep over mpi (mpirun across the hosts) exits 0" test $? -eq 0
  check "2x2 sweep over mpi: 0 failed" grep -q " 0 failed" "$TMP/sweep_mpi.out"
fi

timeout 300 "$KOLORUN" --hosts 10.77.0.1:2,10.77.0.2:2 --rsh "$TESTBED rsh {host}" "$SWEEP" \
  --sizes "$sizes" --collectives allreduce,reduce_scatter,allgather,broadcast \
  >"$TMP/kolorun_hosts.out" 2>&1
check "kolorun --hosts across the bed exits 0" test $? -eq 0
check "kolorun --hosts: 4 ranks, 0 failed" grep -q "^\[0\] .* 0 failed" "$TMP/kolorun_hosts.out"

# A store address that drops every SYN (a firewall): the connect gives up at the deadline (a
# blocking connect waited out the kernel's ~130 s of SYN retries) and names the variable.
ip -n kolo-h2 neigh replace 10.77.0.3 lladdr 02:00:00:00:00:99 dev eth0 nud permanent
start=$(date +%s)
"$TESTBED" exec kolo-h2 env RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.77.0.3 KOLO_SECRET="$secret" \
  KOLO_TIMEOUT_SECONDS=4 timeout 120 "$BENCH" -b 1K -e 1K -n 1 >"$TMP/blackhole.out" 2>&1
elapsed=$(($(date +%s) - start))
check "blackholed store: gives up within the deadline (took $elapsed s)" test "$elapsed" -lt 15
check "blackholed store: names MASTER_ADDR and rank 0's store" \
  grep -q "the rendezvous store, which rank 0 hosts, was not reached (MASTER_ADDR=10.77.0.3" \
  "$TMP/blackhole.out"
# A host whose first non-loopback address the others cannot reach (an address on lo): the tcp
# transport listens where this rank reaches the store from (the first address was advertised,
# and the other host waited out its deadline).
ip -n kolo-h1 addr add 192.168.99.1/32 dev lo
run_2x1() {
  local name=$1 pids=() rank failures=0
  shift
  for rank in 0 1; do
    "$TESTBED" exec "kolo-h$((rank + 1))" env RANK=$rank WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 \
      MASTER_PORT=29501 KOLO_SECRET="$secret" KOLO_TIMEOUT_SECONDS=8 "$@" \
      >"$TMP/$name.rank$rank" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failures=$((failures + 1)); done
  return "$failures"
}
run_2x1 autoaddr timeout 60 "$BENCH" -b 1K -e 64K -n 2
check "a stray address on h1's lo: the 2-host job runs" test $? -eq 0
ip -n kolo-h1 addr del 192.168.99.1/32 dev lo
# KOLO_TCP_ADDR on loopback in a job across hosts: refused naming it (every rank waited).
run_2x1 tcp_lo env KOLO_TCP_ADDR=127.0.0.1 timeout 60 "$BENCH" -b 1K -e 1K -n 1
check "KOLO_TCP_ADDR=127.0.0.1 across hosts is refused" grep -q \
  "KOLO_TCP_ADDR=127.0.0.1 is a loopback address, but the job spans hosts" "$TMP/tcp_lo.rank0"

# A link taken down mid-collective: every rank fails within the deadline (10 s without
# progress) and says which peer it lost or waited for.
start=$(date +%s)
run_job linkdown env KOLO_TIMEOUT_SECONDS=10 "$BENCH" -b 64M -e 64M -n 1000 -w 0 -c 0 &
job=$!
sleep 4
ip link set kolo-h2v down
wait "$job"
failed_ranks=$?
elapsed=$(($(date +%s) - start))
check "link down: all 4 ranks fail (got $failed_ranks)" test "$failed_ranks" -eq 4
check "link down: within 60 s (took $elapsed s)" test "$elapsed" -lt 60
for rank in 0 1 2 3; do
  check "link down: rank $rank names the rank it lost or waited for" \
    grep -qE "(peer lost|timeout).*rank [0-9]" "$TMP/linkdown.rank$rank"
done
# A host's ranks killed mid-collective: the other host's ranks fail within the deadline, naming
# a lost rank on that host.
ip link set kolo-h2v up
start=$(date +%s)
run_job killed env KOLO_TIMEOUT_SECONDS=10 "$BENCH" -b 64M -e 64M -n 1000 -w 0 -c 0 &
job=$!
sleep 4
ip netns pids kolo-h2 | xargs -r kill -9
wait "$job"
elapsed=$(($(date +%s) - start))
check "killed host: done within 60 s (took $elapsed s)" test "$elapsed" -lt 60
for rank in 0 1; do
  check "killed host: rank $rank fails naming a rank on kolo-h2" \
    grep -qE "kolo (peer lost|timeout) error: .*rank [0-9].* on host kolo-h2" "$TMP/killed.rank$rank"
done

if [ "$failed" -gt 0 ]; then tail -c 1500 "$TMP"/*.rank* "$TMP"/*.out >&2 2>/dev/null; fi

check "testbed down" "$TESTBED" down
check "no kolo-h* namespace left" sh -c '! ip netns list | grep -q "^kolo-h"'
check "no kolo-br0 left" sh -c '! ip link show kolo-br0 >/dev/null 2>&1'
check "no kolo veth left" sh -c '! ip -o link show | grep -q "kolo-h[0-9]*v"'

echo "testbed_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
