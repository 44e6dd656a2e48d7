#!/usr/bin/env bash
# A test bed of 2 to 4 "hosts" on this machine: one network namespace each, joined to a bridge by
# a veth pair shaped with tbf to RATE in both directions, for multi-node tests of kolo.
# Run as root. See docs/testbed.md; `scripts/testbed.sh --help` for the commands.
set -euo pipefail

readonly prefix=kolo-h bridge=kolo-br0 subnet=10.77.0 bridge_ip=10.77.0.254
self=$(readlink -f "$0")
readonly self

usage() {
  cat <<EOF
Usage: $0 COMMAND
  up [--hosts H] [--rate RATE]  build hosts ${prefix}1..${prefix}H (H = 2..4, default 2) at
                                ${subnet}.1..${subnet}.H, each link shaped to RATE both ways
                                (tc rate: 500mbit, 2gbit, ...; default 2gbit); replaces any bed
  down                          remove every namespace, veth and the bridge (never fails)
  status                        show the hosts, their addresses and qdiscs
  exec HOST CMD [ARGS...]       run CMD in HOST (${prefix}N, hN, N or ${subnet}.N) with its own
                                hostname and this environment
  rsh HOST WORDS...             like ssh: run the words joined by spaces in sh -c in HOST

Remote-shell templates for launchers ({host} is the host name):
  $self exec {host} CMD...
  mpirun --mca plm_rsh_agent "$self rsh" -H ${prefix}1,${prefix}2 ...
EOF
}

die() { echo "testbed: $*" >&2; exit 1; }

require_root() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces, veth and tc need it)"
  ip netns list >/dev/null 2>&1 || die "'ip netns' is unavailable (iproute2 without netns?)"
}

# Runs one setup step; on failure names the step and what the command said.
step() {
  local what=$1 out
  shift
  out=$("$@" 2>&1) || die "step '$what' failed: $* -> $out"
}

hosts_present() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}[0-9]+$" | sort || true
}

# "h2", "2", "kolo-h2" or "10.77.0.2" -> "kolo-h2".
host_name() {
  case $1 in
    "${prefix}"[0-9]*) echo "$1" ;;
    h[0-9]*) echo "${prefix}${1#h}" ;;
    "${subnet}".[0-9]*) echo "${prefix}${1##*.}" ;;
    [0-9]*) echo "${prefix}$1" ;;
    *) die "unknown host '$1' (use ${prefix}N, hN, N or ${subnet}.N)" ;;
  esac
}

# tc rate ("2gbit", "500mbit", "100kbit", "1000000bit") -> bits per second.
declare -A unit_bits=([bit]=1 [kbit]=1000 [mbit]=1000000 [gbit]=1000000000)
rate_bits() {
  [[ $1 =~ ^([1-9][0-9]*)(bit|kbit|mbit|gbit)$ ]] || die "rate '$1' is not N{bit,kbit,mbit,gbit}"
  local n=${BASH_REMATCH[1]}
  # At most 10 digits (n * 10^9 stays far inside bash's 64 bits; 10000000000gbit wrapped to a
  # bucket of 0 bytes) and at most 1000 Gbit/s, past any link this bed can shape.
  [ ${#n} -le 10 ] && [ $((n * ${unit_bits[${BASH_REMATCH[2]}]})) -le 1000000000000 ] ||
    die "rate '$1' is above 1000gbit"
  case ${BASH_REMATCH[2]} in
    bit) echo "$n" ;; kbit) echo $((n * 1000)) ;; mbit) echo $((n * 1000000)) ;;
    gbit) echo $((n * 1000000000)) ;;
  esac
}

down() {
  local h
  for h in $(hosts_present); do ip netns del "$h" 2>/dev/null || true; done
  # Deleting a namespace deletes its veth end and so the pair; drop any orphaned root ends too.
  for h in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | grep -E "^${prefix}[0-9]+v" |
    cut -d@ -f1); do
    ip link del "$h" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
}

# tbf on the egress of `dev`: a bucket of 4 ms at the rate (at least 64 KiB, so one TSO packet
# fits) and a queue of up to 20 ms more, so that TCP fills the link without a drop storm.
shape() {
  local ns=$1 dev=$2 rate=$3 bits burst
  bits=$(rate_bits "$rate")
  burst=$((bits / 8 / 250))
  [ "$burst" -ge 65536 ] || burst=65536
  step "shape $dev${ns:+ in $ns} to $rate" ip ${ns:+-n "$ns"} link set "$dev" txqueuelen 1000
  step "shape $dev${ns:+ in $ns} to $rate" \
    tc ${ns:+-n "$ns"} qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 20ms
}

up() {
  local hosts=2 rate=2gbit i ns peer
  while [ $# -gt 0 ]; do
    case $1 in
      --hosts) hosts=${2:?--hosts needs a value}; shift 2 ;;
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ $hosts =~ ^[2-4]$ ]] || die "--hosts must be 2, 3 or 4, not '$hosts'"
  rate_bits "$rate" >/dev/null
  down
  trap 'echo "testbed: up failed; removing what it made" >&2; down' EXIT
  step "create bridge $bridge" ip link add "$bridge" type bridge
  step "address bridge" ip addr add "$bridge_ip/24" dev "$bridge"
  step "bring up bridge" ip link set "$bridge" up
  for ((i = 1; i <= hosts; i++)); do
    ns=${prefix}$i peer=${prefix}${i}v
    step "create namespace $ns" ip netns add "$ns"
    step "bring up lo in $ns" ip -n "$ns" link set lo up
    step "create veth $peer <-> $ns:eth0" ip link add "$peer" type veth peer name eth0 netns "$ns"
    step "attach $peer to $bridge" ip link set "$peer" master "$bridge"
    step "bring up $peer" ip link set "$peer" up
    step "address eth0 in $ns" ip -n "$ns" addr add "$subnet.$i/24" dev eth0
    step "bring up eth0 in $ns" ip -n "$ns" link set eth0 up
    # Through the bridge's address the host reaches the root namespace (mpirun's daemons call
    # back to mpirun on any of its addresses).
    step "default route in $ns" ip -n "$ns" route add default via "$bridge_ip"
    shape "$ns" eth0 "$rate"
    shape "" "$peer" "$rate"
  done
  trap - EXIT
  echo "testbed: up: $hosts hosts ${prefix}1..${prefix}$hosts at $subnet.1..$subnet.$hosts," \
    "links shaped to $rate each way"
}

status() {
  local h
  if [ -z "$(hosts_present)" ]; then echo "testbed: no hosts"; return 0; fi
  for h in $(hosts_present); do
    printf '%s: %s  %s\n' "$h" \
      "$(ip -n "$h" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')" \
      "$(tc -n "$h" qdisc show dev eth0 2>/dev/null | head -1)"
    printf '  bridge side %s: %s\n' "${h}v" "$(tc qdisc show dev "${h}v" 2>/dev/null | head -1)"
  done
}

# Runs "$@" in the namespace, in a UTS namespace of its own whose hostname is the host's name.
run_in() {
  local ns
  ns=$(host_name "$1")
  shift
  [ -e "/run/netns/$ns" ] || die "no host $ns (run '$0 up' first)"
  # shellcheck disable=SC2016 # $0 and $@ are for the inner sh.
  exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
}

case ${1:-} in
  up) shift; require_root; up "$@" ;;
  down) require_root; down; echo "testbed: down" ;;
  status) require_root; status ;;
  exec)
    [ $# -ge 3 ] || die "usage: exec HOST CMD [ARGS...]"
    require_root; shift; run_in "$@" ;;
  rsh)
    [ $# -ge 3 ] || die "usage: rsh HOST WORDS..."
    require_root; host=$2; shift 2; run_in "$host" sh -c "$*" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
