#!/usr/bin/env bash
# The checks that need a GPU, prepared as one script for the day one is lent: within 9 minutes on one H200. Run from
# the repository root with ../shared/data beside it; everything goes under $OUT (default /tmp/device_check), each
# figure as lines of $OUT/figures.txt (and on stdout), each step's whole output in its own file beside it:
#   0. a BERT-base-shape mirror with random weights under the article's four Hub ids (the real vocab)
#   1. bert_part4_reproduce.py on the mirror and the real data: the whole article, in its order while the
#      estimates fit in the time left after the benchmarks' (--budget), --side-by-side auto; each experiment's
#      estimate beside its time, and the parts of each estimate
#   2. bench/finetune_speed.py on SST-2: every way warmed, two rounds (CUDA's default), host and device time a step
#      of padded, padding-free and the Trainer
#   3. bench/step_profile.py: warm steps under torch.profiler (host vs device time, kernel launches, top operators)
#   4. bench/side_by_side_speed.py: the MRPC grid's four runs side by side against one after another (cut)
# DEVICE_CHECK_TINY=1: the same on the CPU with a tiny model (H = 32) and tiny cuts, to prove the script end to end.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device_check}
TINY=${DEVICE_CHECK_TINY:-0}
mkdir -p "$OUT"
SHARED=../shared/data
FIG="$OUT/figures.txt"
: > "$FIG"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
START=$(date +%s)
say() { echo "$*" | tee -a "$FIG"; }
left() { echo $(( TOTAL - ($(date +%s) - START) )); }
if [ "$TINY" = 1 ]; then
    DEVICE=cpu; SPEED=(--steps 3 --batch-size 8); PROFILE=(--steps 3 --warm-steps 2 --batch-size 8)
    SIDE=(--max-train-examples 32 --max-dev-examples 8 --side-by-side 2); CUTS=(--max-train-examples 64 --max-dev-examples 8)
    LIMITS=(600 300 900); TOTAL=${DEVICE_CHECK_SECONDS:-2400}   # a shared 2-core CPU: each benchmark's limit, the whole
else
    DEVICE=cuda; SPEED=(--steps 30); PROFILE=(--steps 10 --warm-steps 10)
    SIDE=(--max-train-examples 640 --max-dev-examples 408 --side-by-side 4); CUTS=()
    LIMITS=(60 30 75); TOTAL=${DEVICE_CHECK_SECONDS:-540}       # each benchmark's limit, and the whole: 9 minutes
fi
say "device check $(date -u '+%Y-%m-%d %H:%M UTC'), $([ "$TINY" = 1 ] && echo 'DEVICE_CHECK_TINY=1: a tiny model on the CPU' || echo 'BERT-base shape, random weights'); $(python -c 'import torch, transformers; name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu (no CUDA device)"; print(f"device {name}; torch {torch.__version__}; transformers {transformers.__version__}; {torch.get_num_threads()} threads")')"

# 0. The mirror: one folder per Hub id the article names, each the kind the scripts read there, random weights
T=$(date +%s)
python - "$OUT/mirror" "$SHARED/bert-base-uncased/vocab.txt" "$TINY" <<'EOF'
import os, sys, torch
from transformers import BertConfig, BertForQuestionAnswering, BertForSequenceClassification, BertModel, BertTokenizer
folder, vocab, tiny = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
shape = dict(hidden_size=32, num_hidden_layers=12, num_attention_heads=2, intermediate_size=37) if tiny else {}
heads = {"bert-base-uncased": (BertModel, {}), "textattack/bert-base-uncased-SST-2": (BertForSequenceClassification, {"num_labels": 2}),
         "csarron/bert-base-uncased-squad-v1": (BertForQuestionAnswering, {}),
         "deepset/bert-base-uncased-squad2": (BertForQuestionAnswering, {})}
for k, (hub_id, (cls, kw)) in enumerate(heads.items()):
    torch.manual_seed(k)
    cls(BertConfig(**shape, **kw)).save_pretrained(os.path.join(folder, hub_id))
    BertTokenizer(vocab=vocab).save_pretrained(os.path.join(folder, hub_id))
EOF
say "0. mirror (rc $?): $(du -sh "$OUT/mirror" | cut -f1) in $(( $(date +%s) - T )) s"
BASE="$OUT/mirror/bert-base-uncased"
BENCHES=$(( LIMITS[0] + LIMITS[1] + LIMITS[2] ))     # the benchmarks' time, kept after the article's

# 1. The whole article on the mirror: in the article's order while the estimates fit in the time left (the benchmarks'
#    time kept, and a minute for the calibration and the report), stopped cleanly by SIGTERM whatever the estimates said
T=$(date +%s)
BUDGET=$(( $(left) - BENCHES - 60 ))
if [ "$BUDGET" -lt 30 ]; then BUDGET=30; fi
timeout -s TERM -k 20 $(( $(left) - BENCHES )) python bert_part4_reproduce.py --models "$OUT/mirror" --data "$SHARED" \
    --device $DEVICE --budget "${BUDGET}s" --side-by-side auto --results-dir "$OUT/article" "${CUTS[@]}" \
    > "$OUT/reproduce.txt" 2>&1
say "1. bert_part4_reproduce.py --budget ${BUDGET}s (rc $?, $(( $(date +%s) - T )) s):"
grep -E "^ ?[0-9]+\. |^    parts: |^Total|^Side by side|^One after another|calibrating|: (ran|failed|stopped) in |^Estimates|^left by the budget|^FAILED|run, .* done before" \
    "$OUT/reproduce.txt" | sed 's/^/   /' | tee -a "$FIG"
# 2. Fine-tuning steps, SST-2: padded vs padding-free vs the Trainer, every way warmed, two rounds on CUDA
T=$(date +%s)
timeout ${LIMITS[0]} python bench/finetune_speed.py --model "$BASE" --task sst2 --data-dir "$SHARED/glue_data" --device $DEVICE \
    "${SPEED[@]}" > "$OUT/finetune_speed.txt" 2>&1
say "2. finetune_speed (rc $?, $(( $(date +%s) - T )) s):"
grep -E "steps/s|vs|not run" "$OUT/finetune_speed.txt" | sed 's/^ */   /' | tee -a "$FIG"

# 3. A short profile of warm padding-free steps
T=$(date +%s)
timeout ${LIMITS[1]} python bench/step_profile.py --model "$BASE" --task sst2 --data-dir "$SHARED/glue_data" --device $DEVICE \
    "${PROFILE[@]}" > "$OUT/step_profile.txt" 2>&1
say "3. step_profile (rc $?, $(( $(date +%s) - T )) s):"
grep -E "^per step|^top operators" "$OUT/step_profile.txt" | sed 's/^/   /' | tee -a "$FIG"

# 4. The MRPC grid's four runs side by side against one after another
T=$(date +%s)
timeout ${LIMITS[2]} python bench/side_by_side_speed.py --model "$BASE" --data "$SHARED" --device $DEVICE "${SIDE[@]}" \
    > "$OUT/side_by_side.txt" 2>&1
say "4. side_by_side_speed (rc $?, $(( $(date +%s) - T )) s):"
grep -E "^MRPC grid| s in all|^one after another / side by side:" "$OUT/side_by_side.txt" | sed 's/^ */   /' | tee -a "$FIG"

say "device check: $(( $(date +%s) - START )) s in all; figures in $FIG"
