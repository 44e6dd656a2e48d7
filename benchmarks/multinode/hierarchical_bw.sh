#!/usr/bin/env bash
# hierarchical_bw.sh: allreduce_bw across the test bed (scripts/testbed.sh, network namespaces
# as hosts on links shaped to RATE), the hierarchical algorithm against the flat ring and Open
# MPI (tcp btl: MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather) in the same runs, at 2
# hosts x 2 and 2 hosts x 4 ranks, with the ratio the link alone predicts next to each measured
# one. Needs root and mpirun.
#   benchmarks/multinode/hierarchical_bw.sh [BUILD_DIR] [SIZE] [RATE] [COLLECTIVES]
#   (defaults: build 64M 2gbit "allreduce reduce_scatter allgather")
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
size=${2:-64M}
rate=${3:-2gbit}
collectives=${4:-allreduce reduce_scatter allgather}
root=$(cd "$(dirname "$0")/../.." && pwd)
testbed="$root/scripts/testbed.sh"
"$testbed" up --hosts 2 --rate "$rate" >/dev/null
trap '"$testbed" down >/dev/null' EXIT

# One allreduce_bw run of COLL on 2 x PER_HOST ranks with ALGO; prints "kolo_us mpi_us".
run() {
  local coll=$1 per_host=$2 algo=$3
  mpirun --allow-run-as-root --oversubscribe -np $((2 * per_host)) \
    -H "kolo-h1:$per_host,kolo-h2:$per_host" --mca plm_rsh_agent "$testbed rsh" \
    --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    -x KOLO_TRANSPORT=tcp -x KOLO_ALGORITHM="$algo" \
    "$build/benchmarks/allreduce_bw" --coll "$coll" -b "$size" -e "$size" -n 5 -w 2 -c 1 \
    --compare mpi |
    awk '$1 ~ /^[0-9]+$/ { print $6, $10 } /#wrong in all rows: [1-9]/ { exit 1 }'
}

echo "# allreduce_bw $size float32 (sum), 2 hosts, links shaped to $rate, kolo over tcp"
printf '%-15s %-6s %10s %10s %10s %10s %8s %10s\n' collective layout hier_ms ring_ms mpi_ms \
  hier/ring theory hier/mpi
for coll in $collectives; do
  for per_host in 2 4; do
    read -r hier mpi_a < <(run "$coll" "$per_host" hierarchical)
    read -r ring mpi_b < <(run "$coll" "$per_host" ring)
    n=$((2 * per_host))
    # Over its link a host sends 2(n-1)/n S in the flat ring allreduce and 2(H-1)/H S = S
    # hierarchically; (n-1)/n S and (H-1)/H S = S/2 in a reduce-scatter or allgather: at 2
    # hosts the ratio is 2(n-1)/n for all three.
    awk -v c="$coll" -v l="2x$per_host" -v h="$hier" -v r="$ring" -v a="$mpi_a" -v b="$mpi_b" \
      -v n="$n" 'BEGIN {
      m = (a < b ? a : b)
      printf "%-15s %-6s %10.1f %10.1f %10.1f %9.2fx %7.2fx %9.2fx\n", c, l, h / 1e3, r / 1e3,
        m / 1e3, r / h, 2 * (n - 1) / n, m / h }'
  done
done
echo "# mpi_ms: the faster of the two MPI runs on the same buffers; theory: the bytes over a"
echo "# host's link of the flat ring over those of the hierarchical algorithm"
