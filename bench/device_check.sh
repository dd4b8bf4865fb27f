#!/usr/bin/env bash
# The checks that need a GPU, in one script for the day one is lent (one H200, at most 8 minutes in all).
# Run from the repository root with ../shared/data beside it; everything it writes goes under $OUT (default
# /tmp/device_check). Each figure ends up as one line in $OUT/figures.txt (and on stdout):
#   1. bench/squad_speed.py --random-base on the full SQuAD v1.1 dev set (10,570 questions)
#   2. bench/finetune_speed.py --random-base on SST-2: padded vs padding-free vs the Trainer, bf16 autocast
#   3. a BERT-base-shape SST-2 fine-tune (random weights, 400 steps) stopped by SIGTERM, then resumed on CUDA
#   4. torchrun --nproc-per-node 1 with nccl
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device_check}
mkdir -p "$OUT"
SHARED=../shared/data
FIG="$OUT/figures.txt"
: > "$FIG"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
say() { echo "$*" | tee -a "$FIG"; }
say "device: $(python -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device")'); torch $(python -c 'import torch; print(torch.__version__)')"

# 1. SQuAD evaluation, full v1.1 dev set, random BERT-base (speed does not depend on the weights)
timeout 150 python bench/squad_speed.py --random-base --limit 10570 --data "$SHARED/squad/dev-v1.1.json" > "$OUT/squad_speed.txt" 2>&1
say "squad_speed (rc $?): $(grep -E 'windows/s|speed-up' "$OUT/squad_speed.txt" | tr '\n' ' ' | tr -s ' ')"

# 2. Fine-tuning steps, SST-2, random BERT-base, bf16 autocast (the default on CUDA)
timeout 150 python bench/finetune_speed.py --random-base --task sst2 --steps 40 > "$OUT/finetune_speed.txt" 2>&1
say "finetune_speed (rc $?): $(grep -E 'steps/s|vs' "$OUT/finetune_speed.txt" | tr '\n' ' ' | tr -s ' ')"

# 3. A BERT-base-shape model folder with random weights, fine-tuned on SST-2, stopped by SIGTERM, resumed
python - "$OUT/base" "$SHARED/bert-base-uncased/vocab.txt" <<'EOF'
import sys, torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer
torch.manual_seed(0)
BertForSequenceClassification(BertConfig()).save_pretrained(sys.argv[1])
BertTokenizer(vocab=sys.argv[2]).save_pretrained(sys.argv[1])
EOF
RUN=(bert_part4_finetune.py sst2 --model "$OUT/base" --data-dir "$SHARED/glue_data" --max-train-examples 12800 --epochs 1
     --evals 4 --max-dev-examples 256 --results-dir "$OUT/resume" --device cuda)
python "${RUN[@]}" > "$OUT/resume_1.txt" 2>&1 &
PID=$!
sleep 45
kill -TERM "$PID"
wait "$PID"
RC1=$?
timeout 120 python "${RUN[@]}" > "$OUT/resume_2.txt" 2>&1
RC2=$?
say "sigterm+resume: first rc $RC1 ($(grep -o 'stopped by SIGTERM at step [0-9/]*' "$OUT/resume_1.txt")), rerun rc $RC2: $(grep -o 'resumed from .* at step [0-9/]*' "$OUT/resume_2.txt" | head -1); $(grep '^FINAL' "$OUT/resume_2.txt")"

# 4. torchrun with nccl, one process
timeout 90 python -m torch.distributed.run --standalone --nproc-per-node 1 bert_part4_finetune.py sst2 --model "$OUT/base" \
    --data-dir "$SHARED/glue_data" --max-train-examples 640 --max-dev-examples 128 --epochs 1 --evals 1 --backend nccl \
    --results-dir "$OUT/nccl" > "$OUT/nccl.txt" 2>&1
say "torchrun nccl x1 (rc $?): $(grep -E '^FINAL|work split' "$OUT/nccl.txt" | tr '\n' ' ')"
