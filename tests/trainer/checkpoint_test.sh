#!/usr/bin/env bash
# Checkpoints end to end with train_bert on 2 ranks under kolorun (BERT-tiny, fp16, ZeRO
# stage 2, 12 fine-tuning steps, a checkpoint every 6):
#   - a run killed with SIGKILL right after its step-6 save, resumed from its folder, ends with
#     checkpoint files byte-identical to the uninterrupted run's (losses and parameters too);
#   - kolo_ckpt verifies and exports (the fp16 export is the checkpoint's model.safetensors; the
#     fp32 export gives PyTorch's loss within 1e-5 in tests/trainer/python/compare.py), refuses
#     an export into the checkpoint, and exits 2 naming what it cannot parse;
#   - an altered, a truncated and a missing shard are refused naming the file and the check
#     that failed (the truncated one on both ranks, also the one that does not read it); another
#     train_batch_size or kolo.seed is refused, another accumulation accepted; a checkpoint past
#     the phase's max_steps trains nothing and says so; an older step folder can still be
#     named; a checkpoint of another model shape is refused naming the first tensor that
#     differs; --keep keeps the newest folders (of the run: a resumed run leaves an earlier
#     run's later steps alone);
#   - a resumed run that saves an existing step again replaces it, leaving nothing hidden;
#   - exports into the save folder (another step, latest) or over a FIFO or device node, an empty
#     path, --dtype int8, an empty --resume or --save, another attention-head count and an
#     uncreatable --save folder are refused; so are a fresh run, or one resumed from another
#     folder, into a folder holding checkpoints and (by kolo_ckpt verify) a wrong-typed stored config; a static
#     fp16.loss_scale wins over the checkpoint's;
#   - every rank killed while the step-12 folder is being written: latest still loads;
#   - ranks whose --save names different folders are refused before training, naming rank 1 and
#     both folders; kolo_ckpt verify of a folder without `latest` names the step folder in it;
#   - a disk that fills during a save (a 90 MiB tmpfs, as root): the same error on every rank,
#     naming the rank and the file that failed,
#     `latest` still names the previous, loadable checkpoint, and no partial folder is left; the
#     same folder read-only is refused before training.
# Usage: checkpoint_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
[ -n "${KOLO_TEST_TRACE:-}" ] && set -x
build=$1
cd "$2"
out=$(mktemp -d)
cleanup() {
  if mountpoint -q "$out/full" 2>/dev/null; then umount "$out/full"; fi
  rm -rf "$out"
}
trap cleanup EXIT
trap 'echo "checkpoint_test: failed at line $LINENO"' ERR
run=("$build/tools/kolorun" -np 2 "$build/examples/train_bert" --phase finetune
  --set kolo.finetune.max_steps=12 --set kolo.finetune.evaluate=false --set steps_per_print=1)
ckpt=$build/tools/kolo_ckpt
# Starts the two ranks torchrun-style with "$@" after the program, so that each prints its own
# error (a launcher stops the others as soon as one fails); rank r's output in $out/$1$r.log.
# The test fails if either rank succeeds.
both_ranks_fail() {
  local name=$1 port=$((20000 + RANDOM % 20000)) pids=() r p
  shift
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port KOLO_SECRET=ckpt \
      "${run[@]:3}" "$@" >"$out/$name$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do if wait "$p"; then exit 1; fi; done
}
# Runs the 12 steps saving into $1 every 6 and kills every rank (SIGKILL) once path $2 exists.
kill_when() {
  "${run[@]}" --save "$1" --save-every 6 >"$1.log" 2>&1 &
  local pid=$!
  # Until the path appears or the run ends: no fixed limit, sanitizer builds are several times
  # slower (ctest's timeout still bounds it).
  while [ ! -e "$2" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
  kill -9 -- "$pid" 2>/dev/null || true
  # Only this run's ranks (their command line names its folder): another checkpoint test running
  # at the same time, in another build folder, keeps its own.
  pkill -9 -f -- "--save $1 --save-every" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

"${run[@]}" --save "$out/a" --save-every 6 >"$out/a.log" 2>&1
test "$(cat "$out/a/latest")" = step-000012

# Killed right after the step-6 checkpoint (latest is written last), then resumed.
kill_when "$out/b" "$out/b/latest"
test -f "$out/b/step-000006/index.json"
"${run[@]}" --resume "$out/b" --save "$out/b" --save-every 6 >"$out/b2.log" 2>&1
grep -q "resumed from .*step-000006 at step 6" "$out/b2.log"
for f in model.safetensors rank-00000-of-00002.safetensors rank-00001-of-00002.safetensors; do
  cmp "$out/a/step-000012/$f" "$out/b/step-000012/$f"
done
diff <(grep -o '^\[0\] step 1[0-2]/12 | loss [0-9.]*' "$out/a.log") \
  <(grep -o '^\[0\] step 1[0-2]/12 | loss [0-9.]*' "$out/b2.log")

"$ckpt" verify "$out/a" | tail -1
"$ckpt" info "$out/a/step-000006" | grep -q "step 6 of the phase"
"$ckpt" export "$out/a" "$out/export16.safetensors" --dtype float16
cmp "$out/export16.safetensors" "$out/a/step-000012/model.safetensors"
# An export into the checkpoint (here over one of its own files) is refused, naming both; the
# file is left as it was.
cp "$out/a/step-000006/index.json" "$out/index6.json"
if "$ckpt" export "$out/a" "$out/a/step-000006/index.json" 2>"$out/inside.log"; then exit 1; fi
grep -q "export: $out/a/step-000006/index.json is inside the checkpoint $out/a " "$out/inside.log"
cmp "$out/index6.json" "$out/a/step-000006/index.json"
if "$ckpt" export "$out/a/step-000006" "$out/a/step-000006/../step-000006/x.safetensors" \
  2>"$out/inside.log"; then exit 1; fi
grep -q "is inside the checkpoint $out/a/step-000006 " "$out/inside.log"
test ! -e "$out/a/step-000006/x.safetensors"
# Nor into the save folder around the step folder: another step's files or `latest` (before,
# both were replaced and step 6 failed its SHA-256 check).
cp "$out/a/latest" "$out/latest.before"
for target in "$out/a/step-000006/model.safetensors" "$out/a/latest"; do
  if "$ckpt" export "$out/a/step-000012" "$target" --dtype float16 2>"$out/inside.log"; then exit 1; fi
  grep -q "is inside the checkpoint $out/a " "$out/inside.log"
done
cmp "$out/latest.before" "$out/a/latest"
"$ckpt" verify "$out/a/step-000006" >/dev/null
# An OUT that is not a regular file is refused naming it and left as it was (before, a FIFO or a
# device node, /dev/full once, was replaced by the export). Only private nodes in $out.
mkfifo "$out/fifo"
if "$ckpt" export "$out/a" "$out/fifo" 2>"$out/fifo.log"; then exit 1; fi
grep -q "output $out/fifo exists and is not a regular file (a FIFO)" "$out/fifo.log"
test -p "$out/fifo"
if [ "$(id -u)" = 0 ] && mknod "$out/devnull" c 1 3; then
  if "$ckpt" export "$out/a" "$out/devnull" 2>"$out/node.log"; then exit 1; fi
  grep -q "is not a regular file (a device)" "$out/node.log"
  test -c "$out/devnull"
fi
# Command lines that do not parse exit 2 with the program's name; a wrong subcommand is named.
usage() {
  local rc=0
  "$ckpt" "$@" 2>"$out/usage.log" || rc=$?
  test "$rc" = 2 || { echo "kolo_ckpt $* exited $rc"; cat "$out/usage.log"; return 1; }
}
usage bogus "$out/a"
grep -q "^kolo_ckpt: unknown subcommand 'bogus'; the first word is a subcommand: info, verify, export" \
  "$out/usage.log"
usage info
grep -q "^kolo_ckpt: checkpoint is required" "$out/usage.log"
usage export "$out/a" "$out/x.safetensors" --dtype
grep -q "^kolo_ckpt: --dtype" "$out/usage.log"
# A --dtype export does not write, and an empty path (an unset variable: before, a raw
# "filesystem error" and exit 1).
usage export "$out/a" "$out/x.safetensors" --dtype int8
grep -q "accepted float32, float16, bfloat16" "$out/usage.log"
usage export "$out/a" ""
grep -q "the path is empty" "$out/usage.log"
# train_bert: an empty --resume or --save is refused naming the flag (before, --resume "" started
# a fresh run that replaced the earlier run's step folders and moved `latest` back).
for flag in --resume --save; do
  rc=0
  "$build/examples/train_bert" --phase finetune "$flag" "" >"$out/empty.log" 2>&1 || rc=$?
  test "$rc" = 2 && grep -q -- "train_bert: $flag: the path is empty" "$out/empty.log" || { cat "$out/empty.log"; exit 1; }
done
# The fp32 export in the PyTorch twin: the same loss on the same batch within 1e-5.
"$ckpt" export "$out/a" "$out/export32.safetensors"
"$build/tests/trainer/kolo_model_dump" bert-file "$out/export32.safetensors" "$out/torch"
/usr/bin/python3 tests/trainer/python/compare.py "$out/torch" | tee "$out/torch.log"
grep -q "loss kolo .* (tol 1e-05)" "$out/torch.log"

# Damage: one byte of a shard altered, then the shard truncated.
cp -r "$out/a/step-000012" "$out/bad"
printf '\x01' | dd of="$out/bad/rank-00001-of-00002.safetensors" bs=1 seek=4096 conv=notrunc 2>/dev/null
if "${run[@]}" --resume "$out/bad" >"$out/bad.log" 2>&1; then exit 1; fi
grep -q "rank-00001-of-00002.safetensors fails its SHA-256 check" "$out/bad.log"
if "$ckpt" verify "$out/bad" 2>"$out/verify.log"; then exit 1; fi
grep -q "fails its SHA-256 check" "$out/verify.log"
cp -r "$out/a/step-000012" "$out/bad2"
truncate -s 1000 "$out/bad2/rank-00000-of-00002.safetensors"
if "${run[@]}" --resume "$out/bad2" >"$out/bad2.log" 2>&1; then exit 1; fi
grep -q "rank-00000-of-00002.safetensors has 1000 bytes, the index says" "$out/bad2.log"
# The rank that reads the truncated shard names it, and so does the other, which does not read
# it (before: "lost rank 0").
both_ranks_fail bad2_ --resume "$out/bad2"
for r in 0 1; do
  grep -q "loading checkpoint .* failed on rank 0: checkpoint file .*rank-00000-of-00002.safetensors has 1000 bytes" \
    "$out/bad2_$r.log"
done
# The stored config is checked with the index by every kolo_ckpt command, as --resume checks it
# (before, verify said "verified" for a config that --resume refused).
cp -r "$out/a/step-000012" "$out/cfg"
/usr/bin/python3 -c 'import json, sys; p = sys.argv[1]; i = json.load(open(p)); i["config"]["train_batch_size"] = "32"; json.dump(i, open(p, "w"))' \
  "$out/cfg/index.json"
if "$ckpt" verify "$out/cfg" 2>"$out/cfg.log"; then exit 1; fi
grep -q "$out/cfg/index.json: config: train_batch_size: expected an integer" "$out/cfg.log" ||
  { cat "$out/cfg.log"; exit 1; }
# A resume continues at the checkpoint's step of its epoch, so what fixes the order of the
# samples must be the checkpoint's: another global batch or seed is refused naming the setting
# and both values (before: samples skipped or repeated silently). Another accumulation with the
# same global batch is accepted.
if "${run[@]}" --resume "$out/a/step-000006" --set train_batch_size=16 >"$out/batch.log" 2>&1; then
  exit 1
fi
grep -q "resume: train_batch_size 16 differs from the checkpoint's 32 ($out/a/step-000006/index.json, step 6 of finetune)" \
  "$out/batch.log"
if "${run[@]}" --resume "$out/a/step-000006" --set kolo.seed=2 >"$out/seed.log" 2>&1; then exit 1; fi
grep -q "resume: kolo.seed 2 differs from the checkpoint's 1 " "$out/seed.log"
"${run[@]}" --resume "$out/a/step-000006" --set gradient_accumulation_steps=2 \
  --set kolo.finetune.max_steps=7 >"$out/accumulate.log" 2>&1
grep -q "step 7/7" "$out/accumulate.log"
# A checkpoint already at or past the phase's last step trains nothing and says so.
"${run[@]}" --resume "$out/a" --set kolo.finetune.max_steps=6 >"$out/done.log" 2>&1
grep -q "finetune: nothing to train: the checkpoint is already at step 12, and the phase ends at step 6" \
  "$out/done.log"
# An older step folder, named explicitly, still loads.
"${run[@]}" --resume "$out/a/step-000006" --set kolo.finetune.max_steps=7 >"$out/old.log" 2>&1
grep -q "resumed from .*step-000006" "$out/old.log"
# A missing shard.
cp -r "$out/a/step-000012" "$out/bad3"
rm "$out/bad3/rank-00001-of-00002.safetensors"
if "${run[@]}" --resume "$out/bad3" >"$out/bad3.log" 2>&1; then exit 1; fi
grep -q "rank-00001-of-00002.safetensors does not exist" "$out/bad3.log"
# --keep 2 with a save every 3 steps: the two newest step folders remain.
"${run[@]}" --save "$out/k" --save-every 3 --keep 2 >"$out/keep.log" 2>&1
test "$(ls "$out/k" | grep -c '^step-')" -eq 2 && test -d "$out/k/step-000012" && test -d "$out/k/step-000009"
# A run resumed from step 6 in that folder, saving every step with --keep 1 up to step 7: its own
# step 7 stays, step 6 goes, and the earlier run's later steps 9 and 12 are not this run's to
# count (before, --keep counted them: it deleted step 9 and kept 12).
cp -r "$out/a/step-000006" "$out/k/"
"${run[@]}" --resume "$out/k/step-000006" --save "$out/k" --save-every 1 --keep 1 \
  --set kolo.finetune.max_steps=7 >"$out/keep2.log" 2>&1
test "$(ls "$out/k" | grep '^step-' | tr '\n' ' ')" = "step-000007 step-000009 step-000012 " ||
  { ls "$out/k"; exit 1; }
# Every rank killed in the middle of a save (the step-12 folder is still partial): latest
# names step 6, which loads. (When the kill lands after the save, latest names step 12.)
kill_when "$out/m" "$out/m/.step-000012.partial"
echo "checkpoint_test: killed during the save; latest names $(cat "$out/m/latest")"
"${run[@]}" --resume "$out/m" >"$out/m2.log" 2>&1
grep -q "resumed from .*$(cat "$out/m/latest")" "$out/m2.log"
# A run resumed from step 6 into the folder that holds step 12 saves step 12 again: the earlier
# folder keeps its name until the new one is complete (the two are swapped in one rename; before,
# it was removed first), nothing hidden is left, and at the same settings the files are the same.
cp -r "$out/a/step-000012" "$out/a12"
"${run[@]}" --resume "$out/a/step-000006" --save "$out/a" --save-every 6 >"$out/again.log" 2>&1
test "$(cat "$out/a/latest")" = step-000012
test -z "$(ls -A "$out/a" | grep '^\.')" || { ls -a "$out/a"; exit 1; }
for f in model.safetensors rank-00000-of-00002.safetensors rank-00001-of-00002.safetensors; do
  cmp "$out/a12/$f" "$out/a/step-000012/$f"
done
# Another model shape.
if "${run[@]}" --resume "$out/a" --set kolo.model=mini >"$out/shape.log" 2>&1; then exit 1; fi
grep -q "bert.embeddings.word_embeddings.weight \[30522,128\] in the checkpoint and bert.embeddings.word_embeddings.weight \[30522,256\] in the model" "$out/shape.log"
# Another model with the same shapes (4 attention heads instead of tiny's 2): before, it loaded
# and trained.
if "${run[@]}" --resume "$out/a" --set 'kolo.model={"preset":"tiny","num_attention_heads":4}' \
  >"$out/heads.log" 2>&1; then exit 1; fi
grep -q "resume: kolo.model num_attention_heads 4 differs from the checkpoint's 2 ($out/a/step-000012/index.json)" \
  "$out/heads.log"
# A static fp16.loss_scale wins over the checkpoint's dynamic scale (before: scale 65536).
"${run[@]}" --resume "$out/a/step-000006" --set fp16.loss_scale=128 --set kolo.finetune.max_steps=7 \
  >"$out/static.log" 2>&1
grep -q "step 7/7 .*scale 128" "$out/static.log" || { cat "$out/static.log"; exit 1; }
# A fresh run (no --resume) into a folder that holds checkpoints is refused on every rank
# before training, and the folder is left as it was (before, it replaced the earlier run's step
# folders one save at a time and moved `latest` back).
cp "$out/a/latest" "$out/latest.before"
both_ranks_fail fresh --save "$out/a" --save-every 6
for r in 0 1; do
  grep -q "\-\-save $out/a already holds checkpoints (latest) that a fresh run would replace; pass --resume $out/a to continue that run, or choose another --save folder" \
    "$out/fresh$r.log" || { cat "$out/fresh$r.log"; exit 1; }
done
cmp "$out/latest.before" "$out/a/latest"
# So is a run resumed from another folder, and that folder is left as it was too (before, only a
# fresh run was refused: this one replaced `latest`, and --keep deleted the other run's steps).
ls -R "$out/k" >"$out/k.before"
both_ranks_fail other --resume "$out/a/step-000006" --save "$out/k" --save-every 6 --keep 1
for r in 0 1; do
  grep -qF -- "--save $out/k already holds checkpoints (latest) that a run resumed from another folder (--resume $out/a/step-000006) would replace; choose another --save folder, or --resume's own save folder to continue that run there" \
    "$out/other$r.log" || { cat "$out/other$r.log"; exit 1; }
done
ls -R "$out/k" | cmp - "$out/k.before"
# A save folder that cannot be created is an error naming --save on every rank (before: a raw
# filesystem error on rank 0, "lost rank 0" on the other).
touch "$out/plainfile"
if "${run[@]}" --save "$out/plainfile/sub" >"$out/mk.log" 2>&1; then exit 1; fi
grep -q "\-\-save $out/plainfile/sub: rank 0 cannot create the folder" "$out/mk.log" ||
  { cat "$out/mk.log"; exit 1; }
# Ranks whose --save names different folders (it may be spelled differently per host, but must be
# one shared folder) are refused before training on every rank, naming rank 1 and both folders
# (before: both trained, then failed at the first save on a missing .partial folder).
port=$((20000 + RANDOM % 20000))
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port KOLO_SECRET=ckpt \
    "${run[@]:3}" --save "$out/host$r" >"$out/host$r.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do if wait "$p"; then exit 1; fi; done
for r in 0 1; do
  { grep -qF -- "checking the save folder failed on rank 1: --save $out/host1 is not the folder rank 0 saves into ($out/host0)" \
    "$out/host$r.log" && ! grep -q "^step" "$out/host$r.log"; } || { cat "$out/host$r.log"; exit 1; }
done
test -z "$(ls -A "$out/host0")"  # rank 0's probe file is gone
# A complete step folder without `latest` (a save that could not write it): kolo_ckpt names it.
mkdir "$out/nolatest"
cp -r "$out/a/step-000006" "$out/nolatest/"
if "$ckpt" verify "$out/nolatest" >"$out/nolatest.log" 2>&1; then exit 1; fi
grep -qF "step-000006 is there: pass $out/nolatest/step-000006, or write its name into $out/nolatest/latest" \
  "$out/nolatest.log" || { cat "$out/nolatest.log"; exit 1; }

# A full disk during a save: 90 MiB holds the step-6 checkpoint (62 MiB) but not a second.
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$out/full"
  mount -t tmpfs -o size=90m tmpfs "$out/full"
  both_ranks_fail full --save "$out/full/c" --save-every 6
  # Every rank gives the same message: the rank that failed and the file it was writing (before,
  # each rank named its own shard).
  for r in 0 1; do
    grep -o "checkpoint .*step-000012 failed on rank [01]: writing [a-z0-9.-]*safetensors: .*No space left on device" \
      "$out/full$r.log" >"$out/full$r.msg" || { cat "$out/full$r.log"; exit 1; }
  done
  cmp "$out/full0.msg" "$out/full1.msg"
  test "$(cat "$out/full/c/latest")" = step-000006
  # The failed save's partial folder is gone (it was left behind, empty).
  test ! -e "$out/full/c/.step-000012.partial" || { ls -a "$out/full/c"; exit 1; }
  "$ckpt" verify "$out/full/c" | tail -1
  # A read-only --save folder is refused before training, on every rank, naming it and the reason
  # (before: at the first checkpoint, after the training).
  mkdir "$out/full/empty"
  mount -o remount,ro "$out/full"
  both_ranks_fail readonly --save "$out/full/empty"
  for r in 0 1; do
    { grep -qF -- "checking the save folder failed on rank 0: --save $out/full/empty: cannot create a file in $out/full/empty: Read-only file system" \
      "$out/readonly$r.log" && ! grep -q "^step" "$out/readonly$r.log"; } ||
      { cat "$out/readonly$r.log"; exit 1; }
  done
else
  echo "checkpoint_test: the full-disk case needs root (a tmpfs mount); not run"
fi
grep -h "checkpoint .*failed" "$out"/full?.log || true
echo "checkpoint_test: OK"
