#!/usr/bin/env bash
# zero_memory.sh: model-state bytes and peak RSS of train_bert for each ZeRO stage and world
# size, as a markdown table (the table in docs/trainer.md). Each run is a short fine-tuning
# (fp16, micro-batch 1, no evaluation) under kolorun; the numbers are rank 0's summary line.
#   benchmarks/zero_memory.sh [BUILD_DIR] [MODEL] [WORLDS] [STAGES] [STEPS]
#   defaults: build base "1 2 4 8" "0 1 2 3" 2
set -euo pipefail
build=${1:-build}
model=${2:-base}
worlds=${3:-1 2 4 8}
stages=${4:-0 1 2 3}
steps=${5:-2}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "| world | stage | model_state_bytes | formula_bytes | ratio | peak RSS MiB (rank 0) | tokens/s |"
echo "|---|---|---|---|---|---|---|"
for w in $worlds; do
  for s in $stages; do
    if ! "$build/tools/kolorun" -np "$w" "$build/examples/train_bert" --phase finetune \
      --set kolo.model="$model" --set train_batch_size="$w" --set kolo.finetune.max_steps="$steps" \
      --set kolo.finetune.evaluate=false --set zero_optimization.stage="$s" >"$log" 2>&1; then
      reason=$(grep -m1 -o 'memory estimate: .*' "$log" || tail -1 "$log")
      echo "| $w | $s | refused or failed: ${reason:0:160} | | | | |"
      continue
    fi
    line=$(grep -m1 '^\[0\] summary:' "$log" || grep -m1 '^summary:' "$log")
    read -r b f m t < <(echo "$line" | awk '{for (i = 1; i <= NF; i++) v[$i] = $(i + 1);
      print v["model_state_bytes"], v["formula_bytes"], v["peak_rss_mib"], v["tokens_per_s"]}')
    ratio=$(awk -v b="$b" -v f="$f" 'BEGIN { printf "%.3f", b / f }')
    echo "| $w | $s | $b | $f | $ratio | $m | $t |"
  done
done
