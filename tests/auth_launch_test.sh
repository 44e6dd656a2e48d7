#!/usr/bin/env bash
# Authenticated by default, as launched for real (the hardening issue):
#  - torchrun-style ranks at a non-loopback rendezvous address without a secret are refused on
#    every rank, naming KOLO_SECRET and KOLO_INSECURE;
#  - KOLO_INSECURE=1 runs them, with a warning on every rank;
#  - KOLO_SECRET_FILE must be mode 0600 (a 0644 file is refused) and then authenticates;
#  - under mpirun with no secret set, rank 0 makes one and shares it over MPI;
#  - a KOLO_SECRET_FILE that does not exist is an error naming it, never an abort (rank 0's
#    store used to read it in its own thread): under kolorun, and under mpirun with the file
#    named on rank 0 only (rank 1 learns it from rank 0's broadcast instead of waiting in MPI
#    for ever).
# Usage: auth_launch_test.sh BUILD_DIR [MPIRUN]
set -euo pipefail
demo=$1/examples/c_api_demo
mpirun=${2:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
addr=$(ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
if [ -z "$addr" ]; then
  echo "auth_launch_test: this machine has no non-loopback IPv4 address to test with"
  exit 1
fi

# Runs two ranks torchrun-style at $addr with extra environment "$@"; status per rank in $out.
run2() {
  local port=$((20000 + RANDOM % 20000)) pids=()
  for r in 0 1; do
    env -u KOLO_SECRET -u KOLO_SECRET_FILE -u KOLO_INSECURE "$@" RANK=$r WORLD_SIZE=2 \
      LOCAL_RANK=$r MASTER_ADDR="$addr" MASTER_PORT=$port KOLO_TIMEOUT_SECONDS=30 \
      "$demo" >"$out/rank$r" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do
    if wait "${pids[$r]}"; then echo 0 >"$out/status$r"; else echo $? >"$out/status$r"; fi
  done
}
expect() {  # what, expected status, text every rank prints ("" for none)
  for r in 0 1; do
    if [ "$(cat "$out/status$r")" != "$2" ] || { [ -n "$3" ] && ! grep -q -- "$3" "$out/rank$r"; }; then
      echo "auth_launch_test: $1: rank $r exited $(cat "$out/status$r") (expected $2), output:"
      cat "$out/rank$r"
      exit 1
    fi
  done
  echo "auth_launch_test: $1: as expected on both ranks"
}

run2
expect "no secret at $addr" 1 "without a job secret: set KOLO_SECRET"
run2 KOLO_INSECURE=1
expect "KOLO_INSECURE=1 at $addr" 0 "KOLO_INSECURE=1: the store at $addr"
secret_file=$out/secret
echo "s3cret-from-a-file" >"$secret_file"
chmod 644 "$secret_file"
run2 KOLO_SECRET_FILE="$secret_file"
expect "a secret file of mode 0644" 1 "has mode 0644: it must be readable by its owner only"
chmod 600 "$secret_file"
run2 KOLO_SECRET_FILE="$secret_file"
expect "a secret file of mode 0600" 0 ""
grep -q "results correct" "$out/rank0" || { cat "$out/rank0"; exit 1; }
if [ -n "$mpirun" ]; then
  env -u KOLO_SECRET -u KOLO_SECRET_FILE KOLO_LOG_LEVEL=info "$mpirun" --allow-run-as-root \
    --oversubscribe --mca btl self,vader,tcp -np 2 "$demo" >"$out/mpi" 2>&1 || {
    cat "$out/mpi"; exit 1; }
  for origin in "this rank (made now)" "rank 0 over MPI"; do
    grep -q "the job secret comes from $origin" "$out/mpi" || {
      echo "auth_launch_test: mpirun: no rank says its secret comes from $origin"; cat "$out/mpi"
      exit 1; }
  done
  echo "auth_launch_test: mpirun without KOLO_SECRET: rank 0 made a secret and shared it"
  cat >"$out/rank0_bad.sh" <<EOF
#!/usr/bin/env bash
[ "\${OMPI_COMM_WORLD_RANK:-}" = 0 ] && export KOLO_SECRET_FILE=$out/missing
exec "$demo"
EOF
  chmod +x "$out/rank0_bad.sh"
  if env -u KOLO_SECRET -u KOLO_SECRET_FILE timeout 60 "$mpirun" --allow-run-as-root \
    --oversubscribe --mca btl self,vader,tcp -np 2 "$out/rank0_bad.sh" >"$out/mpi_bad" 2>&1; then
    echo "auth_launch_test: mpirun, rank 0's secret file missing: the job succeeded"; exit 1
  fi
  grep -q "rank 0 could not open the rendezvous over MPI: .*KOLO_SECRET_FILE .*cannot be opened" \
    "$out/mpi_bad" || { echo "auth_launch_test: mpirun, rank 0's secret file missing:"
    cat "$out/mpi_bad"; exit 1; }
  echo "auth_launch_test: mpirun, rank 0's secret file missing: an error on rank 1 too"
fi
kolorun=$(dirname "$demo")/../tools/kolorun
status=0
env -u KOLO_SECRET KOLO_SECRET_FILE="$out/missing" timeout 60 "$kolorun" -np 2 "$demo" \
  >"$out/kolorun_bad" 2>&1 || status=$?
# The first rank to fail ends the job (kolorun stops the other): an error, not a signal.
if [ "$status" != 1 ] || grep -q "killed by signal" "$out/kolorun_bad" ||
  ! grep -q "KOLO_SECRET_FILE $out/missing cannot be opened" "$out/kolorun_bad"; then
  echo "auth_launch_test: kolorun with a missing secret file: exit $status (expected 1), output:"
  cat "$out/kolorun_bad"; exit 1
fi
echo "auth_launch_test: kolorun with a missing secret file: an error naming it, exit 1"
echo "auth_launch_test: OK"
