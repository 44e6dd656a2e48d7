#!/usr/bin/env bash
# The training programs end to end on the real data: train_mnist (fp16, default config) must
# reach 96% test accuracy; train_bert runs a few steps of both phases, saves, reloads and
# fine-tunes again, printing every metric. Usage: programs_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
cd "$2"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$build/examples/train_mnist" --save "$out/mnist.safetensors" | tee "$out/mnist.log"
accuracy=$(sed -n 's/^train_mnist: test accuracy \([0-9.]*\) .*/\1/p' "$out/mnist.log")
awk -v a="$accuracy" 'BEGIN { if (a == "" || a < 0.96) { print "train_mnist: test accuracy " a " < 0.96"; exit 1 } }'
test -s "$out/mnist.safetensors"

quick=(--set kolo.pretrain.max_steps=6 --set kolo.finetune.max_steps=6 --set steps_per_print=2)
"$build/examples/train_bert" "${quick[@]}" --save "$out/bert" | tee "$out/bert.log"
grep -q "pretrain: test masked-LM loss" "$out/bert.log"
grep -q "finetune: test accuracy .* precision .* recall .* F1" "$out/bert.log"
test -s "$out/bert/pretrained.safetensors" && test -s "$out/bert/finetuned.safetensors"
"$build/examples/train_bert" "${quick[@]}" --phase finetune --load "$out/bert/pretrained.safetensors" \
  --set bf16.enabled=true | tee "$out/bert_bf16.log"
grep -q "bfloat16" "$out/bert_bf16.log"
# A bad setting is refused with a message that names it.
if "$build/examples/train_bert" --set fp16.hysteresis=0 2>"$out/err.log"; then exit 1; fi
grep -q "fp16.hysteresis" "$out/err.log"
echo "programs_test: OK (train_mnist accuracy $accuracy)"
