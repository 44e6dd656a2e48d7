#!/usr/bin/env bash
# zero_memory.sh: model-state bytes and peak RSS of train_bert for each ZeRO stage and world
# size, as a markdown table (the table in docs/trainer.md). Each run is a short fine-tuning
# (fp16, micro-batch 1, no evaluation) under kolorun; the numbers are rank 0's summary line.
#   benchmarks/zero_memory.sh [BUILD_DIR] [MODEL] [WORLDS] [STAGES] [STEPS]
#   defaults: <repository>/build base "1 2 4 8" "0 1 2 3" 2
# It runs from any folder: the config and the data (unless KOLO_DATA_DIR is set) are taken from
# the repository that holds this script; a relative BUILD_DIR is relative to the current folder.
# A run that train_bert refuses on its memory estimate is a row of the table ("refused: ...")
# and the table goes on; any other failure stops the script with its exit status, the command
# and the run's last lines. The exit status is 1 when some run was refused.
set -euo pipefail
usage="usage: benchmarks/zero_memory.sh [BUILD_DIR] [MODEL] [WORLDS] [STAGES] [STEPS]"
die() { echo "zero_memory: $*" >&2; echo "$usage" >&2; exit 2; }
case "${1:-}" in -h | --help) echo "$usage"; exit 0 ;; esac
[ $# -le 5 ] || die "at most 5 arguments, got $#"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
model=${2:-base}
worlds=${3:-1 2 4 8}
stages=${4:-0 1 2 3}
steps=${5:-2}
# Checked before anything runs (train_bert checks MODEL itself, on the first run, naming the
# presets it accepts).
if ! [ -x "$build/tools/kolorun" ] || ! [ -x "$build/examples/train_bert" ]; then
  die "BUILD_DIR '$build' has no tools/kolorun and examples/train_bert (build kolo first, or pass its build folder)"
fi
[[ "$model" =~ ^[a-z]+$ ]] || die "MODEL='$model' is not a BERT preset name (such as tiny or base)"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "STEPS='$steps' is not a whole number >= 1"
[ -n "${worlds// /}" ] || die "WORLDS is empty (give world sizes such as \"1 2 4\")"
for w in $worlds; do
  [[ "$w" =~ ^[1-9][0-9]*$ ]] || die "WORLDS='$worlds': '$w' is not a world size (a whole number >= 1)"
done
[ -n "${stages// /}" ] || die "STAGES is empty (give ZeRO stages such as \"0 3\")"
for s in $stages; do
  [[ "$s" =~ ^[0-3]$ ]] || die "STAGES='$stages': '$s' is not a ZeRO stage (0, 1, 2 or 3)"
done
data=()
[ -n "${KOLO_DATA_DIR:-}" ] || data=(--data "$root/data")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
refused=0
echo "| world | stage | model_state_bytes | formula_bytes | ratio | peak RSS MiB (rank 0) | tokens/s |"
echo "|---|---|---|---|---|---|---|"
for w in $worlds; do
  for s in $stages; do
    cmd=("$build/tools/kolorun" -np "$w" "$build/examples/train_bert" --phase finetune
      --config "$root/examples/configs/bert_tiny.json" "${data[@]}"
      --set kolo.model="$model" --set train_batch_size="$w" --set kolo.finetune.max_steps="$steps"
      --set kolo.finetune.evaluate=false --set zero_optimization.stage="$s")
    rc=0
    "${cmd[@]}" >"$log" 2>&1 || rc=$?
    line=$(grep -m1 '^\[0\] summary:' "$log" || grep -m1 '^summary:' "$log" || true)
    if [ "$rc" -ne 0 ] && grep -q 'memory estimate: ' "$log"; then
      reason=$(grep -m1 -o 'memory estimate: .*' "$log")
      echo "| $w | $s | refused: ${reason:0:160} | | | | |"
      refused=$((refused + 1))
      continue
    fi
    if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
      # The reason is train_bert's own error line; kolorun's "rank N exited with code" after it
      # says only that a rank failed.
      reason=$(awk '!/^kolorun: rank [0-9]+ exited/ { if (e == "" && tolower($0) ~ /error/) e = $0; l = $0 }
        END { print (e != "" ? e : l) }' "$log")
      [ "$rc" -ne 0 ] || { rc=1; reason="no summary line: ${reason}"; }
      echo "| $w | $s | failed: ${reason:0:160} | | | | |"
      echo "zero_memory: world $w, stage $s failed (exit status $rc):" >&2
      echo "  ${cmd[*]}" >&2
      echo "its last lines:" >&2
      tail -n 20 "$log" | sed 's/^/  /' >&2
      exit "$rc"
    fi
    read -r b f m t < <(echo "$line" | awk '{for (i = 1; i <= NF; i++) v[$i] = $(i + 1);
      print v["model_state_bytes"], v["formula_bytes"], v["peak_rss_mib"], v["tokens_per_s"]}')
    ratio=$(awk -v b="$b" -v f="$f" 'BEGIN { printf "%.3f", b / f }')
    echo "| $w | $s | $b | $f | $ratio | $m | $t |"
  done
done
if [ "$refused" -gt 0 ]; then
  echo "zero_memory: $refused run(s) refused on their memory estimate (rows above)" >&2
  exit 1
fi
