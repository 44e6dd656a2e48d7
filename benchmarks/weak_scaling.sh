#!/usr/bin/env bash
# weak_scaling.sh: tokens/s of train_bert's fine-tuning at a fixed micro-batch per rank for
# several world sizes, the runs of each world size interleaved and repeated, with the median
# and its ratio to world 1 (the measure: BERT-mini, micro-batch 16, 1 thread per rank).
#   benchmarks/weak_scaling.sh [BUILD_DIR] [STAGE] [WORLDS] [REPEATS] [STEPS]
#   defaults: build 2 "1 2 4 8" 3 30
set -euo pipefail
build=${1:-build}
stage=${2:-2}
worlds=${3:-1 2 4 8}
repeats=${4:-3}
steps=${5:-30}
declare -A rates
for ((i = 0; i < repeats; i++)); do
  for w in $worlds; do
    rate=$("$build/tools/kolorun" -np "$w" "$build/examples/train_bert" --phase finetune \
      --threads 1 --set kolo.model=mini --set train_batch_size=$((16 * w)) \
      --set train_micro_batch_size_per_gpu=16 --set kolo.finetune.max_steps="$steps" \
      --set kolo.finetune.evaluate=false --set zero_optimization.stage="$stage" 2>&1 |
      sed -n 's/^\[0\] summary: .* tokens_per_s \([0-9.]*\) .*/\1/p; s/^summary: .* tokens_per_s \([0-9.]*\) .*/\1/p' | head -1)
    rates[$w]="${rates[$w]:-} $rate"
  done
done
echo "| world | tokens/s (each run) | median | vs world 1 |"
echo "|---|---|---|---|"
base=""
for w in $worlds; do
  median=$(echo ${rates[$w]} | tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  [ -z "$base" ] && base=$median
  ratio=$(awk -v m="$median" -v b="$base" 'BEGIN { printf "%.2f", m / b }')
  echo "| $w |${rates[$w]} | $median | ${ratio}x |"
done
