#!/usr/bin/env bash
# The quick start's main job: installs what kolo needs, builds it, and runs the multi-process
# allreduce demo on 4 local ranks with kolorun.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
build/comm/kolorun -np "${KOLO_DEMO_RANKS:-4}" build/examples/allreduce_demo
