#!/usr/bin/env bash
# Installs every Debian package that kolo's build, tests and benchmarks need.
# Idempotent: when everything is present it returns in about a second without touching apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libopenmpi-dev openmpi-bin libucx-dev libhwloc-dev libgloo-dev
  libssl-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev clang-format iproute2 procps python3-matplotlib
  libopenblas-dev python3-torch libtorch-dev pybind11-dev python3-dev python3-pytest
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
