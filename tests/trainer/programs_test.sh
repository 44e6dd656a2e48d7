#!/usr/bin/env bash
# The training programs end to end on the real data: train_mnist (fp16, default config) must
# reach 96% test accuracy; train_bert runs a few steps of both phases, saves, reloads and
# fine-tunes again, printing every metric; both run data-parallel on 2 ranks under kolorun;
# ZeRO stages 2 (the default config) and 3 with activation checkpointing; bad batch sizes and
# unknown ZeRO stages are refused; ranks with different settings stop naming the key; empty path
# flags, bad phase settings, oversized batches and a --save that cannot be written are refused
# before any work.
# Usage: programs_test.sh BUILD_DIR
# SOURCE_DIR
set -euo pipefail
build=$1
kolorun=$build/tools/kolorun
cd "$2"
out=$(mktemp -d)
cleanup() {
  if mountpoint -q "$out/ro" 2>/dev/null; then umount "$out/ro"; fi
  rm -rf "$out"
}
trap cleanup EXIT

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
  --set fp16.enabled=false --set bf16.enabled=true | tee "$out/bert_bf16.log"
grep -q "bfloat16" "$out/bert_bf16.log"
# Data parallel: two ranks under kolorun (torchrun-style variables are set by kolorun too),
# the same metrics on both, a summary line per phase and rank.
"$kolorun" -np 2 "$build/examples/train_bert" "${quick[@]}" | tee "$out/bert_np2.log"
# Every rank prints the same (reduced) metrics.
test "$(grep '^\[0\] finetune: test accuracy' "$out/bert_np2.log" | cut -c5-)" = \
  "$(grep '^\[1\] finetune: test accuracy' "$out/bert_np2.log" | cut -c5-)"
grep -q "^\[0\] finetune: test accuracy" "$out/bert_np2.log"
test "$(grep -c '^\[[01]\] summary: phase .* world 2 stage 2 dtype float16 steps 6 tokens_per_s' "$out/bert_np2.log")" -eq 4
# Stage 3 with activation checkpointing: the partition_activations warning once, on rank 0.
"$kolorun" -np 2 "$build/examples/train_bert" "${quick[@]}" --set zero_optimization.stage=3 \
  --set activation_checkpointing.partition_activations=true 2>&1 | tee "$out/bert_z3.log"
grep -q "^\[0\] finetune: test accuracy" "$out/bert_z3.log"
test "$(grep -c '^\[[01]\] summary: phase .* world 2 stage 3 dtype float16 steps 6 tokens_per_s' "$out/bert_z3.log")" -eq 4
test "$(grep -c 'partition_activations: accepted and ignored' "$out/bert_z3.log")" -eq 1
grep -q "activation checkpointing: every 1 layer" "$out/bert_z3.log"
"$kolorun" -np 2 "$build/examples/train_mnist" --set kolo.epochs=1 | tee "$out/mnist_np2.log"
test "$(grep '^\[0\] train_mnist: test accuracy' "$out/mnist_np2.log" | cut -c5-)" = \
  "$(grep '^\[1\] train_mnist: test accuracy' "$out/mnist_np2.log" | cut -c5-)"
# Batch sizes that do not fit the world size: one clear error on every rank, exit status 1,
# before any connection (so each rank is started alone, torchrun-style: a launcher would stop
# the others as soon as the first one fails).
for r in 0 1; do
  if RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "$build/examples/train_bert" \
    --set train_micro_batch_size_per_gpu=32 2>"$out/batch_err$r.log"; then exit 1; fi
  grep -q 'train_batch_size: 32 is not a multiple' "$out/batch_err$r.log"
done
# A ZeRO stage that does not exist is refused by name.
if "$build/examples/train_bert" --set zero_optimization.stage=4 2>"$out/zero_err.log"; then exit 1; fi
grep -q "zero_optimization.stage" "$out/zero_err.log"
# A phase's set may not change the model, which both phases train (it was ignored silently).
if "$build/examples/train_bert" --set 'kolo.finetune.set={"kolo.model": "mini"}' 2>"$out/phase_model.log"; then exit 1; fi
grep -q 'kolo.finetune.set: kolo.model must be the same in every phase' "$out/phase_model.log"
# A bad setting is refused with a message that names it (exit 1; --save-every and --keep take
# any count: they stopped at 1024).
rc=0
"$build/examples/train_bert" --save-every 5000 --keep 2000 --set fp16.hysteresis=0 2>"$out/err.log" || rc=$?
{ test "$rc" = 1 && grep -q "fp16.hysteresis" "$out/err.log"; } || { cat "$out/err.log"; exit 1; }
# A command line that does not parse exits 2 naming the program.
rc=0
"$build/examples/train_mnist" --threads 5000 2>"$out/usage.log" || rc=$?
{ test "$rc" = 2 && grep -q "train_mnist: --threads: Value 5000 not in range 0 to 1024" "$out/usage.log"; } ||
  { cat "$out/usage.log"; exit 1; }
# A path flag given as "" (an unset shell variable) is a usage error naming the flag: --config ""
# ran without a config file, --data "" read the default data folder.
for program in train_mnist train_bert; do
  for flag in --config --data; do
    rc=0
    "$build/examples/$program" "$flag" "" 2>"$out/empty.log" || rc=$?
    { test "$rc" = 2 && grep -q -- "$program: $flag: the path is empty" "$out/empty.log"; } ||
      { echo "$program $flag \"\": exit $rc"; cat "$out/empty.log"; exit 1; }
  done
done
# Every phase setting is checked before the data and the model (a bad kolo.finetune one stopped
# the run after the whole pretraining phase, a bad evaluate after the phase's first epoch).
for bad in kolo.finetune.max_steps=-1 kolo.finetune.epochs=-2 kolo.pretrain.evaluate=maybe \
  kolo.finetune.evaluate=maybe; do
  rc=0
  "$build/examples/train_bert" --set kolo.pretrain.max_steps=1 --set "$bad" >"$out/late.log" 2>&1 ||
    rc=$?
  { test "$rc" = 1 && grep -q "${bad%%=*}" "$out/late.log" && ! grep -q "BERT L" "$out/late.log"; } ||
    { echo "$bad: exit $rc"; cat "$out/late.log"; exit 1; }
done
# An override of a phase's set says which section it came from.
rc=0
"$build/examples/train_bert" --set 'kolo.finetune.set={"optimizer..lr": 1}' 2>"$out/set.log" || rc=$?
{ test "$rc" = 1 && grep -q "kolo.finetune.set: config override 'optimizer..lr=1': empty key" \
  "$out/set.log"; } || { cat "$out/set.log"; exit 1; }
# train_mnist checks the batch against the data before it allocates the model's activations
# (a train_batch_size of 5e8 failed in the allocator, naming no setting).
rc=0
"$build/examples/train_mnist" --set train_batch_size=5e8 2>"$out/batch.log" || rc=$?
{ test "$rc" = 1 && grep -q "do not fill one global batch of 500000000 (train_batch_size)" \
  "$out/batch.log"; } || { cat "$out/batch.log"; exit 1; }
# Ranks whose settings differ (here the optimizer: rank 1 would write SGD's state into a
# checkpoint indexed as AdamW's) stop right after the rendezvous, every rank naming the key
# (started torchrun-style, so that kolorun does not stop one before it has printed).
port=$((20000 + RANDOM % 20000))
pids=()
for r in 0 1; do
  optimizer=AdamW
  [ $r = 1 ] && optimizer=SGD
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port KOLO_SECRET=programs \
    KOLO_TIMEOUT_SECONDS=20 "$build/examples/train_bert" --set optimizer.type=$optimizer \
    >"$out/differ$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1; do
  if wait "${pids[$r]}"; then echo "rank $r trained with different settings"; exit 1; fi
  grep -q 'settings differ between ranks: rank 0 has config.optimizer.type = "AdamW", rank 1 has "SGD"' \
    "$out/differ$r.log" || { cat "$out/differ$r.log"; exit 1; }
done
# train_mnist's --save, written by rank 0, is checked there before training: every rank stops
# at once naming it (rank 1 waited for the lost rank 0 for the whole deadline).
port=$((20000 + RANDOM % 20000))
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port KOLO_SECRET=programs \
    KOLO_TIMEOUT_SECONDS=60 timeout 30 "$build/examples/train_mnist" --save /nonexistent/x.st \
    >"$out/mnist_save$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1; do
  rc=0
  wait "${pids[$r]}" || rc=$?
  { test "$rc" = 1 && grep -q -- '--save /nonexistent/x.st' "$out/mnist_save$r.log"; } ||
    { echo "rank $r: exit $rc"; cat "$out/mnist_save$r.log"; exit 1; }
done
# A --save folder that cannot be written (a read-only tmpfs, as root) is refused before training,
# naming --save, the folder and the reason (before: after the whole training, at the save).
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$out/ro"
  mount -t tmpfs -o ro,size=1m tmpfs "$out/ro"
  rc=0
  "$build/examples/train_mnist" --save "$out/ro/m.safetensors" >"$out/mnist_ro.log" 2>&1 || rc=$?
  umount "$out/ro"
  { test "$rc" = 1 && ! grep -q "train_mnist: MLP" "$out/mnist_ro.log" &&
    grep -qF -- "--save $out/ro/m.safetensors: cannot create a file in $out/ro: Read-only file system" \
      "$out/mnist_ro.log"; } || { echo "exit $rc"; cat "$out/mnist_ro.log"; exit 1; }
else
  echo "programs_test: the read-only --save case needs root (a tmpfs mount); not run"
fi
# A rank killed during training (ranks started torchrun-style, so no launcher tears the job
# down): the survivor stops within the deadline with an error that names the lost rank.
port=$((20000 + RANDOM % 20000))
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port KOLO_SECRET=programs \
    KOLO_TIMEOUT_SECONDS=20 "$build/examples/train_bert" --phase finetune --set steps_per_print=1 \
    >"$out/kill$r.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1 600); do grep -q "^step" "$out/kill0.log" && break; sleep 0.1; done
grep -q "^step" "$out/kill0.log"
kill -9 "${pids[1]}"
killed=$(date +%s)
if wait "${pids[0]}"; then echo "the surviving rank exited 0"; exit 1; fi
test $(( $(date +%s) - killed )) -le 30
grep -q "rank 1" "$out/kill0.log" || { cat "$out/kill0.log"; exit 1; }
tail -1 "$out/kill0.log"
echo "programs_test: OK (train_mnist accuracy $accuracy)"
