#!/usr/bin/env bash
# hierarchical_bw.sh: allreduce_bw across the test bed (scripts/testbed.sh, network namespaces
# as hosts on links shaped to RATE), the hierarchical allreduce against the flat ring and Open
# MPI's MPI_Allreduce (tcp btl) in the same runs, at 2 hosts x 2 and 2 hosts x 4 ranks, with
# the ratio the link alone predicts next to each measured one. Needs root and mpirun.
#   benchmarks/multinode/hierarchical_bw.sh [BUILD_DIR] [SIZE] [RATE]   (build 64M 2gbit)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
size=${2:-64M}
rate=${3:-2gbit}
root=$(cd "$(dirname "$0")/../.." && pwd)
testbed="$root/scripts/testbed.sh"
"$testbed" up --hosts 2 --rate "$rate" >/dev/null
trap '"$testbed" down >/dev/null' EXIT

# One allreduce_bw run of 2 x PER_HOST ranks with ALGO; prints "kolo_us mpi_us".
run() {
  local per_host=$1 algo=$2
  mpirun --allow-run-as-root --oversubscribe -np $((2 * per_host)) \
    -H "kolo-h1:$per_host,kolo-h2:$per_host" --mca plm_rsh_agent "$testbed rsh" \
    --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    -x KOLO_TRANSPORT=tcp -x KOLO_ALGORITHM="$algo" \
    "$build/benchmarks/allreduce_bw" -b "$size" -e "$size" -n 5 -w 2 -c 1 --compare mpi |
    awk '$1 ~ /^[0-9]+$/ { print $6, $10 } /#wrong in all rows: [1-9]/ { exit 1 }'
}

echo "# allreduce_bw $size float32 sum, 2 hosts, links shaped to $rate, kolo over tcp"
printf '%-8s %12s %12s %12s %10s %8s %10s\n' layout hier_ms ring_ms mpi_ms hier/ring theory \
  hier/mpi
for per_host in 2 4; do
  read -r hier mpi_a < <(run "$per_host" hierarchical)
  read -r ring mpi_b < <(run "$per_host" ring)
  n=$((2 * per_host))
  # Over the link a host sends 2(n-1)/n S in the flat ring and 2(H-1)/H S = S hierarchically.
  awk -v l="2x$per_host" -v h="$hier" -v r="$ring" -v a="$mpi_a" -v b="$mpi_b" -v n="$n" 'BEGIN {
    m = (a < b ? a : b)
    printf "%-8s %12.1f %12.1f %12.1f %9.2fx %7.2fx %9.2fx\n", l, h / 1e3, r / 1e3, m / 1e3,
      r / h, 2 * (n - 1) / n, m / h }'
done
echo "# mpi_ms: the faster of the two MPI_Allreduce runs on the same buffers; theory: the ring's"
echo "# bytes over a host's link, 2(n-1)/n S, over the hierarchical algorithm's, 2(H-1)/H S = S"
