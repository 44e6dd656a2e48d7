#!/usr/bin/env bash
# weak_scaling.sh: tokens/s of train_bert's fine-tuning at a fixed micro-batch per rank for
# several world sizes, the runs of each world size interleaved and repeated, with the median
# and its ratio to world 1 (the issue's measure: BERT-mini, micro-batch 16, 1 thread per rank).
#   benchmarks/weak_scaling.sh [BUILD_DIR] [STAGE] [WORLDS] [REPEATS] [STEPS]
#   defaults: <repository>/build 2 "1 2 4 8" 3 30
# It runs from any folder: the config and the data (unless KOLO_DATA_DIR is set) are taken from
# the repository that holds this script; a relative BUILD_DIR is relative to the current folder.
# A failed run stops the script with its exit status, the command and the run's last lines.
set -euo pipefail
usage="usage: benchmarks/weak_scaling.sh [BUILD_DIR] [STAGE] [WORLDS] [REPEATS] [STEPS]"
die() { echo "weak_scaling: $*" >&2; echo "$usage" >&2; exit 2; }
case "${1:-}" in -h | --help) echo "$usage"; exit 0 ;; esac
[ $# -le 5 ] || die "at most 5 arguments, got $#"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
stage=${2:-2}
worlds=${3:-1 2 4 8}
repeats=${4:-3}
steps=${5:-30}
# Checked before anything runs: a bad value used to end the script silently (set -e inside
# $(...)) or with an "unbound variable" from the table loop.
if ! [ -x "$build/tools/kolorun" ] || ! [ -x "$build/examples/train_bert" ]; then
  die "BUILD_DIR '$build' has no tools/kolorun and examples/train_bert (build kolo first, or pass its build folder)"
fi
[[ "$stage" =~ ^[0-3]$ ]] || die "STAGE='$stage' is not a ZeRO stage (0, 1, 2 or 3)"
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || die "REPEATS='$repeats' is not a whole number >= 1"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "STEPS='$steps' is not a whole number >= 1"
[ -n "${worlds// /}" ] || die "WORLDS is empty (give world sizes such as \"1 2 4\")"
declare -A seen
for w in $worlds; do
  [[ "$w" =~ ^[1-9][0-9]*$ ]] || die "WORLDS='$worlds': '$w' is not a world size (a whole number >= 1)"
  [ -z "${seen[$w]:-}" ] || die "WORLDS='$worlds': $w is given twice"
  seen[$w]=1
done
data=()
[ -n "${KOLO_DATA_DIR:-}" ] || data=(--data "$root/data")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
declare -A rates
for ((i = 0; i < repeats; i++)); do
  for w in $worlds; do
    cmd=("$build/tools/kolorun" -np "$w" "$build/examples/train_bert" --phase finetune
      --config "$root/examples/configs/bert_tiny.json" "${data[@]}"
      --threads 1 --set kolo.model=mini --set train_batch_size=$((16 * w))
      --set train_micro_batch_size_per_gpu=16 --set kolo.finetune.max_steps="$steps"
      --set kolo.finetune.evaluate=false --set zero_optimization.stage="$stage")
    # The run's output goes to a file, not through a pipe: its exit status and its message
    # are both kept for the error below.
    rc=0
    "${cmd[@]}" >"$log" 2>&1 || rc=$?
    rate=$(sed -n 's/^\(\[0\] \)\{0,1\}summary: .* tokens_per_s \([0-9.]*\) .*/\2/p' "$log" | head -1)
    if [ "$rc" -ne 0 ] || [ -z "$rate" ]; then
      if [ "$rc" -ne 0 ]; then
        echo "weak_scaling: world $w, run $((i + 1)) of $repeats failed (exit status $rc):" >&2
      else
        echo "weak_scaling: world $w, run $((i + 1)) of $repeats printed no summary line with tokens_per_s:" >&2
        rc=1
      fi
      echo "  ${cmd[*]}" >&2
      echo "its last lines:" >&2
      tail -n 20 "$log" | sed 's/^/  /' >&2
      exit "$rc"
    fi
    rates[$w]="${rates[$w]:-} $rate"
  done
done
echo "| world | tokens/s (each run) | median | vs world 1 |"
echo "|---|---|---|---|"
base=""
for w in $worlds; do
  # shellcheck disable=SC2086  # unquoted on purpose: one rate per word
  median=$(echo ${rates[$w]} | tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  [ -z "$base" ] && base=$median
  ratio=$(awk -v m="$median" -v b="$base" 'BEGIN { printf "%.2f", m / b }')
  echo "| $w |${rates[$w]} | $median | ${ratio}x |"
done
