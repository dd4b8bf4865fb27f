"""BERT, explained - Part 4: fine-tuning BERT with the paper's recipe (paper §3.2, §4.1-4.4, A.3).

    python bert_part4_finetune.py sst2            # the article's SST-2 run (lr 2e-5)
    python bert_part4_finetune.py mrpc 5e-5       # one MRPC learning rate; --grid glue runs all four
    python bert_part4_finetune.py rte --seeds 5   # five restarts, then mean and std
    python bert_part4_finetune.py squad --save-model models/squad      # SQuAD v1.1 (§4.2), keep the model
    python bert_part4_finetune.py squad_v2        # SQuAD v2.0 (§4.3);  swag: SWAG (§4.4)
    python bert_part4_finetune.py mrpc --model DIR --data-dir ../shared/data/glue_data   # offline

One recipe for every task: AdamW with weight decay 0.01 (none on biases and LayerNorm weights), the
learning rate rising linearly over the first 10% of steps then falling linearly to zero (Google's
run_classifier.py and run_squad.py), gradient clipping at 1.0, dropout 0.1, one fixed seed, batches
padded to their own longest input. A task brings only what differs: how it reads its data, how it
encodes an example, its output layer and its metric. Batch size, epochs and learning rate default to
the paper's values for each task (GLUE 32 / 3 / 2e-5; SQuAD v1.1 32 / 3 / 5e-5; SQuAD v2.0 48 / 2 / 5e-5;
SWAG 16 / 3 / 2e-5). Each run writes results/part4_<task>_lr<lr>.{log,json}.
"""

import csv
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch
from tqdm import tqdm
from transformers import (
    AutoConfig,
    AutoTokenizer,
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
)

import bert_part4_squad as squad
from bert_part4_common import (
    ALONE,
    RANDOM_HEAD,
    ArgumentParser,
    Fatal,
    Report,
    Stopped,
    StopSignals,
    add_common_flags,
    all_agree,
    article,
    autocast_dtype,
    check_writable_dir,
    file_problem,
    gather,
    load_checkpoint,
    load_hub_dataset,
    load_pretrained,
    model_problem,
    portable,
    preflight,
    pyplot,
    replace_folder_atomically,
    run_cli,
    save_checkpoint,
    seed_everything,
    start_processes,
    summed,
)

# --- The nine GLUE tasks (paper §4.1, B.1) ---


@dataclass(frozen=True)
class Task:
    folder: str            # GLUE's directory name
    columns: tuple         # text columns in GLUE's TSV (header names; positions for CoLA, which has none)
    hub_columns: tuple     # the same texts in the Hub dataset nyu-mll/glue
    labels: tuple          # label strings in index order; () = regression (STS-B)
    dev_files: tuple       # dev sets: matched and mismatched for MNLI
    metrics: tuple         # what the step lines and the FINAL line report


TASKS = {
    "cola": Task("CoLA", (3,), ("sentence",), ("0", "1"), ("dev",), ("accuracy", "mcc")),
    "sst2": Task("SST-2", ("sentence",), ("sentence",), ("0", "1"), ("dev",), ("accuracy", "f1")),
    "mrpc": Task("MRPC", ("#1 String", "#2 String"), ("sentence1", "sentence2"), ("0", "1"), ("dev",), ("accuracy", "f1")),
    "stsb": Task("STS-B", ("sentence1", "sentence2"), ("sentence1", "sentence2"), (), ("dev",), ("pearson", "spearman")),
    "qqp": Task("QQP", ("question1", "question2"), ("question1", "question2"), ("0", "1"), ("dev",), ("accuracy", "f1")),
    "mnli": Task("MNLI", ("sentence1", "sentence2"), ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
                 ("dev_matched", "dev_mismatched"), ("accuracy",)),
    "qnli": Task("QNLI", ("question", "sentence"), ("question", "sentence"), ("entailment", "not_entailment"), ("dev",),
                 ("accuracy",)),
    "rte": Task("RTE", ("sentence1", "sentence2"), ("sentence1", "sentence2"), ("entailment", "not_entailment"), ("dev",),
                ("accuracy",)),
    "wnli": Task("WNLI", ("sentence1", "sentence2"), ("sentence1", "sentence2"), ("0", "1"), ("dev",), ("accuracy",)),
}
LABEL_COLUMN = {"cola": 1, "sst2": "label", "mrpc": "Quality", "stsb": "score", "qqp": "is_duplicate",
                "mnli": "gold_label", "qnli": "label", "rte": "label", "wnli": "label"}


# --- ... SQuAD v1.1 (§4.2), SQuAD v2.0 (§4.3) and SWAG (§4.4): the paper's settings for each task ---

@dataclass(frozen=True)
class Recipe:
    lr: float
    batch_size: int
    epochs: int
    max_len: int
    evals: int             # dev evaluations per run; 0 = once per epoch
    source: str            # where the numbers come from


RECIPES = {**{name: Recipe(2e-5, 32, 3, 128, 30, "paper §4.1 and A.3; article: lr 2e-5, about 30 evaluations")
              for name in TASKS},
           "squad": Recipe(5e-5, 32, 3, 384, 0, "paper §4.2; run_squad.py: 384-token windows"),
           "squad_v2": Recipe(5e-5, 48, 2, 384, 0, "paper §4.3"),
           "swag": Recipe(2e-5, 16, 3, 128, 0, "paper §4.4")}
SQUAD_VERSION = {"squad": "1.1", "squad_v2": "2.0"}

# What the article printed (reference_logs/part4_sst2_stdout.txt, part4_mrpc_lr*_stdout.txt), and the
# paper's BERT-base dev scores (Table 5: MNLI-m, QNLI, MRPC accuracy, SST-2; Tables 2-4 for the rest).
ARTICLE_FINAL = {("sst2", 2e-5): "0.9255 (807/872), F1 0.9279", ("mrpc", 2e-5): "0.8333 (340/408), F1 0.8847",
                 ("mrpc", 3e-5): "0.8333 (340/408), F1 0.8863", ("mrpc", 4e-5): "0.8480 (346/408), F1 0.8953",
                 ("mrpc", 5e-5): "0.8701 (355/408), F1 0.9094"}
ARTICLE_REPEAT = {("mrpc", 2e-5): "0.8186 (334/408), F1 0.8741"}     # the same job run once more: the article's spread
ARTICLE_BEFORE = {"sst2": "dev accuracy 0.4908", "mrpc": "dev accuracy 0.3162"}
ARTICLE_SETTING = "bert-base-uncased, batch 32, 3 epochs, seed 0"
PAPER_DEV = {"mnli": "paper, BERT-base dev: 84.4", "qnli": "paper, BERT-base dev: 88.4",
             "mrpc": "paper, BERT-base dev: 86.7", "sst2": "paper, BERT-base dev: 92.7",
             "squad": "paper, BERT-base dev (Table 2): EM 80.8, F1 88.5",
             "squad_v2": "paper, BERT-large dev (Table 3): EM 78.7, F1 81.9; the paper gives no BERT-base v2.0 number",
             "swag": "paper, BERT-base dev (Table 4): accuracy 81.6"}
ARTICLE_MODEL = "bert-base-uncased"
GRIDS = {"glue": [(32, lr, 3) for lr in (5e-5, 4e-5, 3e-5, 2e-5)],                       # paper §4.1
         "a3": [(b, lr, e) for b in (16, 32) for lr in (5e-5, 3e-5, 2e-5) for e in (2, 3, 4)]}   # paper A.3


def build_parser():
    p = ArgumentParser(
        description="Part 4: BERT fine-tuned with the paper's recipe on a GLUE task (§4.1, A.3), SQuAD v1.1 "
                    "(§4.2), SQuAD v2.0 (§4.3) or SWAG (§4.4), on CUDA, Apple MPS or the CPU. Defaults are the "
                    "paper's for each task.",
        epilog="Each run writes results/part4_<task>_lr<lr>.{log,json}; --seeds and --grid add a summary. "
               "SQuAD and SWAG are evaluated once per epoch by default (a SQuAD evaluation costs a pass over "
               "every dev window); GLUE about 30 times per run, as in the article.")
    p.add_argument("task", help="one of " + ", ".join(RECIPES))
    p.add_argument("lr", nargs="?", help="peak learning rate (default: GLUE 2e-5 as in the article, paper grid "
                                         "5e-5..2e-5; SQuAD 5e-5; SWAG 2e-5)")
    p.add_argument("--model", default=ARTICLE_MODEL, help="pre-trained BERT: Hub id or local folder (default and "
                                                          "article: bert-base-uncased)")
    p.add_argument("--data-dir", help="GLUE folder (DIR/SST-2/train.tsv, dev.tsv, ...) or SWAG folder (DIR/train.csv, "
                                      "val.csv); default: the Hub datasets nyu-mll/glue, allenai/swag (regular)")
    p.add_argument("--train-data", help="SQuAD: official training JSON (default: the Hub dataset rajpurkar/squad or "
                                        "rajpurkar/squad_v2, split train)")
    p.add_argument("--dev-data", help="SQuAD: official dev JSON (default: the same Hub dataset, split validation)")
    p.add_argument("--batch-size", type=int, help="default: the paper's (GLUE 32, SQuAD v1.1 32, v2.0 48, SWAG 16)")
    p.add_argument("--epochs", type=int, help="default: the paper's (GLUE 3, SQuAD v1.1 3, v2.0 2, SWAG 3)")
    p.add_argument("--max-len", type=int, help="longest input in tokens (default: 128, as run_classifier.py; SQuAD "
                                               "windows 384, as run_squad.py)")
    p.add_argument("--stride", type=int, default=128, help="SQuAD: tokens shared by consecutive windows (default 128, "
                                                           "as bert_part4_squad.py)")
    p.add_argument("--warmup", type=float, default=0.1, help="share of steps with a rising lr (default 0.1, run_classifier.py)")
    p.add_argument("--weight-decay", type=float, default=0.01,
                   help="AdamW weight decay, not on biases and LayerNorm (default 0.01, paper A.2)")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping (default 1.0, run_classifier.py)")
    p.add_argument("--seed", type=int, default=0, help="the one fixed seed (default 0; restarts: --seeds)")
    p.add_argument("--seeds", type=int, help="N restarts with seeds 0..N-1, then mean and std (paper §5.2: 5 restarts)")
    p.add_argument("--grid", choices=sorted(GRIDS), help="glue: lr 5e-5..2e-5 (§4.1); a3: batch x lr x epochs (A.3); "
                                                         "with --seeds, every setting with every seed")
    p.add_argument("--evals", type=int, help="dev evaluations during training (default: GLUE 30, as the article; "
                                             "SQuAD and SWAG once per epoch)")
    p.add_argument("--group-by-length", choices=["auto", "on", "off"], default="auto",
                   help="batches cut from length-sorted groups of 50 batches, in random order (default auto: on for "
                        "SQuAD, whose windows run from 100 to 384 tokens; off for GLUE and SWAG; paper: random batches)")
    p.add_argument("--max-train-examples", type=int, help="only the first N training examples (SQuAD: questions)")
    p.add_argument("--max-dev-examples", type=int, help="only the first N examples of each dev set (SQuAD: questions)")
    p.add_argument("--eval-batch-size", type=int, help="batch size for dev evaluation (default: 128; SQuAD 64 windows, "
                                                       "as bert_part4_squad.py)")
    p.add_argument("--dtype", default="auto", help="auto (bf16 autocast on CUDA, fp32 elsewhere; the default), fp32 or bf16")
    p.add_argument("--save-model", help="keep the fine-tuned model in this folder (config, safetensors weights, "
                                        "tokenizer; several runs: one subfolder each)")
    add_common_flags(p)
    p.add_argument("--run-tag", help="appended to the results file names, e.g. the model's name")
    p.add_argument("--parallel", choices=["data", "runs"],
                   help="under torchrun: data = every batch split over the processes (default for one run); runs = "
                        "whole runs of --grid/--seeds spread over them (default for those)")
    p.add_argument("--backend", default="auto", help="under torchrun: auto (nccl on CUDA, gloo on the CPU), nccl or gloo "
                                                     "(default: auto)")
    return p


def parse_args(argv):
    p = build_parser()
    args = p.parse_intermixed_args(argv)
    args.task = args.task.lower().replace("-", "")
    args.task = {"squadv2": "squad_v2", "squad2": "squad_v2", "squadv1": "squad"}.get(args.task, args.task)
    if args.task not in RECIPES:
        raise Fatal(f"unknown task '{args.task}': choose one of {', '.join(RECIPES)}")
    recipe = RECIPES[args.task]
    try:
        args.lr = float(args.lr) if args.lr is not None else recipe.lr
    except ValueError:
        raise Fatal(f"learning rate '{args.lr}' is not a number (e.g. 2e-5)")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise Fatal(f"learning rate {args.lr}: must be a positive number (e.g. 2e-5)")
    for name in ("batch_size", "epochs", "max_len", "evals", "eval_batch_size", "seeds", "max_train_examples",
                 "max_dev_examples", "stride"):
        value = getattr(args, name)
        if value is not None and value <= 0 and not (name == "stride" and value == 0):
            raise Fatal(f"--{name.replace('_', '-')} {value}: must be positive")
    args.batch_size = args.batch_size or recipe.batch_size
    args.epochs = args.epochs or recipe.epochs
    args.max_len = args.max_len or recipe.max_len
    args.evals = args.evals or recipe.evals or args.epochs
    args.eval_batch_size = args.eval_batch_size or (64 if args.task in SQUAD_VERSION else 128)
    if args.task in SQUAD_VERSION and args.stride >= args.max_len:
        raise Fatal(f"--stride {args.stride}: must be below the window length --max-len {args.max_len}")
    if args.dtype == "fp16":
        raise Fatal("--dtype fp16: training in fp16 needs loss scaling, which this script does not do; use bf16 or fp32")
    if not 0 <= args.warmup < 1 or args.weight_decay < 0 or args.clip <= 0:
        raise Fatal("--warmup must be in [0, 1), --weight-decay >= 0 and --clip > 0")
    return args


# --- Reading GLUE: the TSV files of GLUE's download script, or the Hub dataset ---

def read_tsv(path, task_name, task, label_col):
    """Rows of a GLUE TSV file as (texts, label). A malformed row stops with its file and line."""
    if not os.path.isfile(path):
        raise Fatal(f"{path}: no such file (expected GLUE's layout: DIR/{task.folder}/train.tsv, dev.tsv)")
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header = None if task_name == "cola" else rows.pop(0)
    cols = [c if header is None else _column(header, c, path) for c in (*task.columns, label_col)]
    width = len(header) if header else 4
    examples = []
    for n, row in enumerate(rows, start=2 if header else 1):
        if len(row) < width or len(row) <= max(cols):
            raise Fatal(f"{path}, line {n}: malformed row ({len(row)} fields, expected {width})")
        examples.append(([row[c] for c in cols[:-1]], parse_label(row[cols[-1]], task, f"{path}, line {n}")))
    return examples


def _column(header, name, path):
    if name not in header:
        raise Fatal(f"{path}: no column '{name}' in the header {header}")
    return header.index(name)


def read_jsonl(path, task):
    """MNLI as JSON lines with premise, hypothesis and label (the layout of ../shared/data)."""
    examples = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            try:
                r = json.loads(line)
                examples.append(([r["premise"], r["hypothesis"]], parse_label(r["label"], task, f"{path}, line {n}")))
            except (ValueError, KeyError) as e:
                raise Fatal(f"{path}, line {n}: malformed line ({type(e).__name__}: {e})")
    return examples


def parse_label(raw, task, where):
    if not task.labels:                                   # STS-B: a similarity score from 0 to 5
        try:
            y = float(raw)
        except ValueError:
            y = float("nan")
        if not 0 <= y <= 5:
            raise Fatal(f"{where}: label '{raw}' is not a score between 0 and 5")
        return y
    if raw not in task.labels:
        raise Fatal(f"{where}: label '{raw}' is not one of {list(task.labels)}")
    return task.labels.index(raw)


def read_split(data_dir, task_name, split):
    """(texts, label) pairs of one split; from the Hub when data_dir is None."""
    task = TASKS[task_name]
    if data_dir is None:
        hub_split = {"train": "train", "dev": "validation", "dev_matched": "validation_matched",
                     "dev_mismatched": "validation_mismatched"}[split]
        rows = load_hub_dataset("nyu-mll/glue", task_name, hub_split, "--data-dir")
        return [([r[c] for c in task.hub_columns], r["label"]) for r in rows]
    if not os.path.isdir(data_dir):
        raise Fatal(f"--data-dir {data_dir}: no such directory")
    base = os.path.join(data_dir, task.folder, split)
    if not os.path.isfile(base + ".tsv") and os.path.isfile(base + ".jsonl") and task_name == "mnli":
        return read_jsonl(base + ".jsonl", task)
    return read_tsv(base + ".tsv", task_name, task, LABEL_COLUMN[task_name])


def read_glue(args):
    train = read_split(args.data_dir, args.task, "train")[:args.max_train_examples]
    devs = {}
    for name in TASKS[args.task].dev_files:
        if name == "dev_mismatched" and args.data_dir and not any(
                os.path.isfile(os.path.join(args.data_dir, "MNLI", name + ext)) for ext in (".tsv", ".jsonl")):
            continue                                     # mismatched is optional locally
        devs[name] = read_split(args.data_dir, args.task, name)[:args.max_dev_examples]
    return train, devs


# --- Reading SWAG: the official train.csv / val.csv, or the Hub dataset allenai/swag ---

SWAG_COLUMNS = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "label")


def read_swag_csv(path):
    """(context, [four continuations], label) per row: sentence A is sent1, sentence B is sent2 + ending k."""
    if not os.path.isfile(path):
        raise Fatal(f"{path}: no such file (expected SWAG's layout: DIR/train.csv, DIR/val.csv)")
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in SWAG_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise Fatal(f"{path}: not a SWAG CSV file: no column(s) {', '.join(missing)} (expected video-id, fold-ind, "
                        f"startphrase, sent1, sent2, gold-source, ending0..ending3, label)")
        return [swag_example(r, f"{path}, line {n}") for n, r in enumerate(reader, start=2)]


def swag_example(row, where):
    label = str(row["label"]).strip()
    if label not in ("0", "1", "2", "3"):
        raise Fatal(f"{where}: label '{row['label']}' is not one of 0, 1, 2, 3")
    return row["sent1"], [f"{row['sent2']} {row[f'ending{k}']}".strip() for k in range(4)], int(label)


def read_swag(args):
    if args.data_dir is None:
        split = {name: load_hub_dataset("allenai/swag", "regular", hub, "--data-dir")
                 for name, hub in (("train", "train"), ("dev", "validation"))}
        train, dev = ([swag_example(r, f"allenai/swag {name} row {n}") for n, r in enumerate(rows)]
                      for name, rows in split.items())
    else:
        if not os.path.isdir(args.data_dir):
            raise Fatal(f"--data-dir {args.data_dir}: no such directory")
        train, dev = (read_swag_csv(os.path.join(args.data_dir, f)) for f in ("train.csv", "val.csv"))
    return train[:args.max_train_examples], {"dev": dev[:args.max_dev_examples]}


# --- Reading SQuAD: bert_part4_squad.py's reader (official JSON, or the Hub) ---

def read_squad_task(args):
    version = SQUAD_VERSION[args.task]
    train = squad.read_squad(args.train_data, version, "--train-data", split="train")[:args.max_train_examples]
    dev = squad.read_squad(args.dev_data, version, "--dev-data")[:args.max_dev_examples]
    return train, {"dev": dev}


# --- Tokenise once; batches padded to their own longest input (dynamic padding) ---

def encode(tok, examples, max_len):
    """GLUE: token ids cut at max_len, plus each input's full length before the cut."""
    columns = list(zip(*[texts for texts, _ in examples]))
    full = tok(*columns, truncation=False, add_special_tokens=True)["input_ids"]
    enc = tok(*columns, truncation=True, max_length=max_len)
    return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
            "labels": [y for _, y in examples], "full_lengths": [len(x) for x in full], "targets": ("labels",)}


def encode_swag(tok, examples, max_len):
    """SWAG: four (sentence A, sentence B) pairs per example, each cut at max_len: input_ids is (4, tokens)."""
    first = [ctx for ctx, endings, _ in examples for _ in endings]
    second = [e for _, endings, _ in examples for e in endings]
    full = tok(first, second, truncation=False)["input_ids"]
    enc = tok(first, second, truncation=True, max_length=max_len)
    group = lambda rows: [rows[4 * k:4 * k + 4] for k in range(len(examples))]  # noqa: E731
    return {"input_ids": group(enc["input_ids"]), "token_type_ids": group(enc["token_type_ids"]),
            "labels": [y for _, _, y in examples], "full_lengths": [max(x) for x in group([len(f) for f in full])],
            "targets": ("labels",)}


def span_targets(offsets, passage, answer_start, answer_end):
    """The start and end token of the answer's characters [answer_start, answer_end) in one window, or
    (0, 0), the [CLS] token, when the window does not hold the whole answer (paper §4.2, §4.3).

    Worked example: context "Ada was born in London in 1815.", answer "London" = characters [16, 22).
    A window [CLS] where ? [SEP] ada was born in london in 1815 . [SEP] has passage tokens 4..11 with
    offsets (0,3) (4,7) (8,12) (13,15) (16,22) ...: the start is the last passage token that begins at
    or before 16, token 8 ("london"), the end the first that ends at or after 22, token 8 again: (8, 8).
    A window whose passage starts at "in 1815" (offset 23) cannot hold it: (0, 0).
    """
    tokens = [t for t, p in enumerate(passage) if p]
    if not tokens or offsets[tokens[0]][0] > answer_start or offsets[tokens[-1]][1] < answer_end:
        return 0, 0
    i = max(t for t in tokens if offsets[t][0] <= answer_start)
    j = min(t for t in tokens if offsets[t][1] >= answer_end)
    return i, j


def answer_chars(example):
    """[start, end) of the first gold answer in the context, white space trimmed; None when the file's
    answer_start does not point at the answer's text (or there is no answer)."""
    if not example["golds"]:
        return None
    text, start = example["golds"][0], example["starts"][0]
    if example["context"][start:start + len(text)] != text or not text.strip():
        return None
    start += len(text) - len(text.lstrip())
    return start, start + len(text.strip())


def encode_squad(tok, examples, max_len, stride):
    """SQuAD: bert_part4_squad.py's windows, each with its start and end token (or [CLS] for none).

    A question whose answer_start does not match its context is left out of training and counted."""
    chars = [None if ex["impossible"] else answer_chars(ex) for ex in examples]
    kept = [k for k, (ex, c) in enumerate(zip(examples, chars)) if c is not None or ex["impossible"]]
    kept_examples = [examples[k] for k in kept]
    windows = squad.make_windows(tok, kept_examples, max_len, stride)
    starts, ends = [], []
    for w in windows:
        c = chars[kept[w["example"]]]
        i, j = span_targets(w["offsets"], w["passage"], *c) if c else (0, 0)
        starts.append(i)
        ends.append(j)
    per_question = np.asarray(squad.windows_per_question(windows, len(kept)))
    return {"input_ids": [w["input_ids"] for w in windows], "token_type_ids": [w["token_type_ids"] for w in windows],
            "start_positions": starts, "end_positions": ends, "full_lengths": [len(w["input_ids"]) for w in windows],
            "targets": ("start_positions", "end_positions"), "questions": len(kept),
            "skipped": len(examples) - len(kept), "uncovered": len(squad.uncovered_questions(tok, kept_examples, windows)),
            "multi_window": int((per_question > 1).sum()), "to_cls": sum(1 for i in starts if i == 0)}


def collate(enc, idx, device, pad_to=None, pad_id=0):
    """A batch of the rows idx, padded to the longest of them (or to pad_to: the common default).
    SWAG rows hold four inputs each and make (batch, 4, tokens) tensors."""
    rows = [enc["input_ids"][i] for i in idx]
    types = [enc["token_type_ids"][i] for i in idx]
    choices = isinstance(rows[0][0], list)
    if choices:
        rows, types = [r for row in rows for r in row], [t for row in types for t in row]
    L = pad_to or max(len(r) for r in rows)
    ids = torch.full((len(rows), L), pad_id, dtype=torch.long)
    tt = torch.zeros((len(rows), L), dtype=torch.long)
    am = torch.zeros((len(rows), L), dtype=torch.long)
    for r, (x, t) in enumerate(zip(rows, types)):
        ids[r, :len(x)], tt[r, :len(x)], am[r, :len(x)] = torch.tensor(x), torch.tensor(t), 1
    batch = {"input_ids": ids, "token_type_ids": tt, "attention_mask": am}
    if choices:
        batch = {k: v.view(len(idx), -1, L) for k, v in batch.items()}
    for key in enc["targets"]:
        batch[key] = torch.tensor([enc[key][i] for i in idx])
    return {k: v.to(device) for k, v in batch.items()}


def epoch_batches(n, batch_size, epochs, seed, lengths=None, group=50):
    """The shuffled row order of every epoch, cut into batches (the last one of an epoch may be short).

    With lengths: each run of group * batch_size shuffled rows is sorted by length before it is cut, and
    the batches of the epoch are then shuffled, so that a batch holds rows of similar length."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=g).tolist()
        if lengths is not None:
            chunk = group * batch_size
            order = [i for c in range(0, n, chunk) for i in sorted(order[c:c + chunk], key=lambda i: lengths[i])]
        batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
        if lengths is not None:
            batches = [batches[k] for k in torch.randperm(len(batches), generator=g).tolist()]
        out.append(batches)
    return out


# --- The optimiser: AdamW, no decay on biases and LayerNorm weights, warmup then linear decay ---

def decay_groups(model, weight_decay):
    """Two parameter groups: everything else decays, the biases and LayerNorm weights do not."""
    decay, no_decay = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            (no_decay if name == "bias" or isinstance(module, torch.nn.LayerNorm) else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_then_linear_decay(step, warmup, total):
    """The learning-rate factor: step / warmup while warming up, then (total - step) / (total - warmup)."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def make_optimizer(model, lr, weight_decay, warmup_share, total, device):
    warmup = int(warmup_share * total)
    opt = torch.optim.AdamW(decay_groups(model, weight_decay), lr=lr, fused=device.type == "cuda")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_then_linear_decay(s, warmup, total))
    return opt, sched, warmup


def library_loss(model, batch):
    """GLUE and SWAG: the library's cross-entropy over the labels (over the four endings for SWAG)."""
    return model(**batch).loss


def span_loss(model, batch):
    """SQuAD: -(log P_start(s) + log P_end(e)) / 2, each softmax over the window's own tokens.

    The paper sums the two log-likelihoods; run_squad.py averages them, as here. Padding is left out
    of the softmax, so a window's loss does not depend on how far its batch is padded."""
    targets = {k: batch[k] for k in ("start_positions", "end_positions")}
    out = model(**{k: v for k, v in batch.items() if k not in targets})
    mask = batch["attention_mask"].bool()
    start = out.start_logits.float().masked_fill(~mask, float("-inf"))    # S.T_i
    end = out.end_logits.float().masked_fill(~mask, float("-inf"))        # E.T_j
    return (torch.nn.functional.cross_entropy(start, targets["start_positions"])
            + torch.nn.functional.cross_entropy(end, targets["end_positions"])) / 2


def train_step(model, batch, opt, sched, clip, dtype, loss_fn=library_loss, weight=1.0):
    """One step: forward, loss, backward, clip the gradient norm, AdamW, schedule. Returns the loss.
    weight scales this process's loss when several processes share a batch (1 when alone)."""
    with torch.autocast(batch["input_ids"].device.type, dtype=dtype, enabled=dtype is not None):
        loss = loss_fn(model, batch)
    (loss * weight if weight != 1.0 else loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


# --- GLUE's metrics ---

def accuracy(pred, gold):
    return float(np.mean(np.asarray(pred) == np.asarray(gold)))


def f1_positive(pred, gold):
    """F1 of label 1 (paraphrase, duplicate, positive)."""
    pred, gold = np.asarray(pred), np.asarray(gold)
    tp = int(((pred == 1) & (gold == 1)).sum())
    return 0.0 if tp == 0 else 2 * tp / (int((pred == 1).sum()) + int((gold == 1).sum()))


def matthews_corrcoef(pred, gold):
    """(TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)); 0 when a factor is 0."""
    pred, gold = np.asarray(pred), np.asarray(gold)
    tp, tn = float(((pred == 1) & (gold == 1)).sum()), float(((pred == 0) & (gold == 0)).sum())
    fp, fn = float(((pred == 1) & (gold == 0)).sum()), float(((pred == 0) & (gold == 1)).sum())
    den = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return 0.0 if den == 0 else (tp * tn - fp * fn) / den


def pearson(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    x, y = x - x.mean(), y - y.mean()
    den = math.sqrt(float((x * x).sum() * (y * y).sum()))
    return 0.0 if den == 0 else float((x * y).sum() / den)


def average_ranks(x):
    """Ranks 1..n, tied values sharing the mean of their ranks."""
    x = np.asarray(x, float)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x, y):
    return pearson(average_ranks(x), average_ranks(y))


METRICS = {"accuracy": accuracy, "f1": f1_positive, "mcc": matthews_corrcoef, "pearson": pearson, "spearman": spearman}
METRIC_NAMES = {"accuracy": "accuracy", "f1": "F1", "mcc": "MCC", "pearson": "Pearson", "spearman": "Spearman",
                "em": "EM"}


def row_length(enc, i):
    """Tokens of row i after the cut (the longest of its four inputs for SWAG)."""
    row = enc["input_ids"][i]
    return max(len(r) for r in row) if isinstance(row[0], list) else len(row)


@torch.inference_mode()
def predict_logits(model, enc, device, dtype, batch_size):
    """The model's outputs on every row; inputs sorted by length so that each batch carries little padding."""
    model.eval()
    order = sorted(range(len(enc["labels"])), key=lambda i: row_length(enc, i))
    out = None
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        batch = collate(enc, idx, device)
        batch.pop("labels")
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            logits = model(**batch).logits.float().cpu().numpy()
        out = np.zeros((len(order), logits.shape[1])) if out is None else out
        out[idx] = logits
    model.train()
    return out


def evaluate(model, enc, device, dtype, batch_size, metrics):
    """Dev metrics of a GLUE or SWAG dev set."""
    out = predict_logits(model, enc, device, dtype, batch_size)
    pred = out[:, 0] if out.shape[1] == 1 and "accuracy" not in metrics else out.argmax(-1)
    scores = {m: METRICS[m](pred, enc["labels"]) for m in metrics}
    scores["n"] = len(pred)
    if "accuracy" in metrics:
        scores["correct"] = int(np.sum(np.asarray(pred) == np.asarray(enc["labels"])))
    return scores


def format_scores(scores, metrics):
    parts = []
    for name, s in scores.items():
        tag = "" if len(scores) == 1 else f" ({name.replace('dev_', '')})"
        parts += [f"dev {METRIC_NAMES[m]}{tag} {s[m]:.4f}" for m in metrics]
    return "  ".join(parts)


# --- What differs between the tasks: how they read, encode, score (one class per output layer) ---

class Classification:
    """GLUE (paper §4.1): the pooled [CLS] vector C, logits = C W^T + b, K labels (1 for STS-B)."""
    model_class = BertForSequenceClassification
    loss = staticmethod(library_loss)
    fresh = "random classifier layer"

    def __init__(self, name):
        self.name, self.metrics = name, TASKS[name].metrics
        self.model_kwargs = {"num_labels": max(1, len(TASKS[name].labels))}

    def read(self, args):
        return read_glue(args)

    def encode(self, tok, train, devs, args):
        return encode(tok, train, args.max_len), {name: encode(tok, d, args.max_len) for name, d in devs.items()}

    def describe(self, train, args):
        cut = sum(n > args.max_len for n in train["full_lengths"])
        return [f"longest training input: {max(train['full_lengths'])} tokens; inputs cut at {args.max_len}: {cut}"]

    def evaluate(self, model, devs, tok, device, dtype, args):
        return {name: evaluate(model, enc, device, dtype, args.eval_batch_size, self.metrics) for name, enc in devs.items()}

    def headline(self, scores):
        return next(iter(scores.values()))[self.metrics[0]]

    def baseline(self, train, devs):
        """'   (always the majority class 1: dev accuracy 0.6838)': what a model that learns nothing scores."""
        if "accuracy" not in self.metrics:
            return ""
        labels = np.asarray(train["labels"])
        majority = int(np.bincount(labels).argmax())
        gold = next(iter(devs.values()))["labels"]
        return f"   (always the majority class {majority}: dev accuracy {accuracy([majority] * len(gold), gold):.4f})"

    def format(self, scores):
        return format_scores(scores, self.metrics)

    def final(self, scores):
        parts = []
        for name, s in scores.items():
            tag = "" if len(scores) == 1 else f" ({name.replace('dev_', '')})"
            for k, m in enumerate(self.metrics):
                parts.append(f"dev {METRIC_NAMES[m]}{tag} {s[m]:.4f}" + (f" ({s['correct']}/{s['n']})" if k == 0 and
                                                                         m == "accuracy" else ""))
        return ", ".join(parts)


class MultipleChoice(Classification):
    """SWAG (paper §4.4): one vector w scores the pooled C_k of each of the four endings, softmax across them."""
    model_class = BertForMultipleChoice
    fresh = "random vector w"

    def __init__(self, name):
        self.name, self.metrics, self.model_kwargs = name, ("accuracy",), {}

    def read(self, args):
        return read_swag(args)

    def encode(self, tok, train, devs, args):
        return (encode_swag(tok, train, args.max_len),
                {name: encode_swag(tok, d, args.max_len) for name, d in devs.items()})

    def describe(self, train, args):
        cut = sum(n > args.max_len for n in train["full_lengths"])
        return [f"longest (context, ending) pair: {max(train['full_lengths'])} tokens; examples with a pair cut at "
                f"{args.max_len}: {cut}"]


class SpanExtraction:
    """SQuAD (paper §4.2, §4.3): start and end vectors S and E over the tokens of 384-token windows."""
    model_class = BertForQuestionAnswering
    loss = staticmethod(span_loss)
    model_kwargs = {}
    fresh = "random start and end vectors S, E"

    def __init__(self, name):
        self.name, self.version = name, SQUAD_VERSION[name]
        self.metrics = ("em", "f1")

    def read(self, args):
        return read_squad_task(args)

    def encode(self, tok, train, devs, args):
        self.dev_size = {name: len(d) for name, d in devs.items()}
        self.dev_uncovered = {name: len(squad.uncovered_questions(tok, d, squad.make_windows(tok, d, args.max_len, args.stride)))
                              for name, d in devs.items()}
        return encode_squad(tok, train, args.max_len, args.stride), devs    # dev windows: bert_part4_squad.predict

    def describe(self, train, args):
        lines = [f"{len(train['input_ids'])} windows of at most {args.max_len} tokens (stride {args.stride}) from "
                f"{train['questions']} questions; {train['multi_window']} questions need more than one window",
                f"windows pointing at [CLS] (no answer, or not the whole answer, in the window): {train['to_cls']}",
                f"questions skipped because answer_start does not match the context: {train['skipped']}"]
        lines += [f"training set: {squad.coverage_line(train['uncovered'], train['questions'])}"] if train["uncovered"] else []
        lines += [f"{name} set: {squad.coverage_line(n, self.dev_size[name])}" for name, n in self.dev_uncovered.items() if n]
        return lines

    def evaluate(self, model, devs, tok, device, dtype, args):
        """bert_part4_squad.py's own prediction and official metric on every dev question."""
        model.eval()
        settings = SimpleNamespace(max_len=args.max_len, stride=args.stride, batch_size=args.eval_batch_size,
                                   n_best=squad.N_BEST, max_answer=squad.MAX_ANSWER)
        out = {}
        for name, examples in devs.items():
            answers, timing = squad.predict(model, tok, examples, settings, device, dtype)
            if self.version == "1.1":
                em, f1, _ = squad.score_v1(examples, answers)
                out[name] = {"em": float(em), "f1": float(f1), "n": len(examples), "windows": timing["windows"],
                             "uncovered": timing["uncovered"]}
            else:
                r, _, _ = squad.score_v2(examples, answers, squad.tau_grid(*squad.TAU_SWEEP))
                out[name] = {"em": r["at0"]["em"], "f1": r["at0"]["f1"], **r, "windows": timing["windows"],
                             "uncovered": timing["uncovered"]}
        model.train()
        return out

    def headline(self, scores):
        return next(iter(scores.values()))["f1"]

    def baseline(self, train, devs):
        return ""

    def format(self, scores):
        s = next(iter(scores.values()))
        text = f"dev EM {s['em']:.2f}  dev F1 {s['f1']:.2f}"
        if self.version == "2.0":
            text = f"dev (tau = 0) EM {s['em']:.2f}  F1 {s['f1']:.2f}  best tau {s['best']['tau']:+.2f}: F1 {s['best']['f1']:.2f}"
        return text

    def final(self, scores):
        s = next(iter(scores.values()))
        line = f"dev EM {s['em']:.2f}, F1 {s['f1']:.2f} ({s['n']} questions, {s['windows']} windows)"
        if self.version == "2.0":
            line = (f"dev at tau = 0: EM {s['em']:.2f}, F1 {s['f1']:.2f}; at the best tau {s['best']['tau']:+.2f}: "
                    f"EM {s['best']['em']:.2f}, F1 {s['best']['f1']:.2f}; HasAns ({s['has_ans']['n']}) EM "
                    f"{squad.fmt(s['has_ans']['em'])} F1 {squad.fmt(s['has_ans']['f1'])}, NoAns ({s['no_ans']['n']}) "
                    f"EM {squad.fmt(s['no_ans']['em'])} F1 {squad.fmt(s['no_ans']['f1'])}")
        return line


def head_for(task):
    return SpanExtraction(task) if task in SQUAD_VERSION else MultipleChoice(task) if task == "swag" else Classification(task)


# --- Keeping the model: config, safetensors weights and tokenizer, written atomically ---

def check_model_target(path):
    """--save-model must be writable before any training starts; an existing folder must be a model."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise Fatal(f"--save-model {path}: exists and is not a directory")
    if os.path.isdir(path) and os.listdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        raise Fatal(f"--save-model {path}: exists and is not a model folder (no config.json); refusing to replace it")
    check_writable_dir(os.path.dirname(path), "--save-model")


def save_model(model, tok, path):
    """save_pretrained into a temporary folder beside path, then rename: never half a model folder."""
    def write(tmp):
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return replace_folder_atomically(path, write)


# --- One fine-tuning run, logged as in the article ---

def lr_tag(lr):
    """2e-05 -> '2e-5', 2.5e-05 -> '2.5e-5': the learning rate as the article's file names write it."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def run_name(args, lr, batch, epochs, seed):
    recipe = RECIPES[args.task]
    name = f"part4_{args.task}_lr{lr_tag(lr)}"
    name += f"_bs{batch}" if batch != recipe.batch_size else ""
    name += f"_ep{epochs}" if epochs != recipe.epochs else ""
    name += f"_seed{seed}" if (args.seeds or seed != 0) else ""
    return name + (f"_{args.run_tag}" if args.run_tag else "")


def grouped(args):
    return args.group_by_length == "on" or (args.group_by_length == "auto" and args.task in SQUAD_VERSION)


def run_settings(args, data, lr, batch_size, epochs, seed, dtype, team):
    """Everything that decides a run's numbers: a checkpoint or a result of other settings is never reused."""
    return {"task": args.task, "model": portable(args.model), "lr": lr, "batch_size": batch_size, "epochs": epochs,
            "seed": seed, "max_len": args.max_len, "stride": args.stride if args.task in SQUAD_VERSION else None,
            "warmup": args.warmup, "weight_decay": args.weight_decay, "clip": args.clip, "evals": args.evals,
            "grouped": grouped(args), "train_rows": len(data["train"]["input_ids"]), "dtype": str(dtype),
            "max_train_examples": args.max_train_examples, "max_dev_examples": args.max_dev_examples,
            "processes": team.world}


def shard(idx, team):
    """This process's rows of a global batch, and the weight that makes the processes' mean gradients add up to
    the gradient of the whole batch's mean loss (DDP averages over processes). A process left without a row (a
    last batch shorter than the number of processes) takes one with weight 0."""
    rows = np.array_split(np.asarray(idx), team.world)[team.rank].tolist()
    if not rows:
        return idx[:1], 0.0
    return rows, len(rows) * team.world / len(idx)


def fine_tune(args, head, data, lr, batch_size, epochs, seed, device, dtype, team=ALONE, quiet=False):
    """Train one model from the pre-trained weights; returns the results of the run (on the team's rank 0).

    team: the processes that share this run, each taking its part of every batch (data parallel)."""
    name = run_name(args, lr, batch_size, epochs, seed)
    report = Report(name, args.results_dir, quiet=quiet or not team.main)
    say, train, devs = report.say, data["train"], data["devs"]
    settings = run_settings(args, data, lr, batch_size, epochs, seed, dtype, team)
    checkpoint = os.path.join(args.results_dir, name + ".checkpoint")
    seed_everything(seed)
    model = load_pretrained(head.model_class, args.model, **head.model_kwargs).to(device)
    model.train()
    n = len(train["input_ids"])
    plan = epoch_batches(n, batch_size, epochs, seed, train["full_lengths"] if grouped(args) else None)
    total = sum(len(e) for e in plan)
    opt, sched, warmup = make_optimizer(model, lr, args.weight_decay, args.warmup, total, device)
    every = max(1, total // args.evals)
    resumed = load_checkpoint(checkpoint, settings, model, opt, sched, team)
    if resumed:
        report.lines = resumed["lines"]
        say(f"(resumed from {portable(checkpoint)} at step {resumed['step']}/{total}: the lines above come from the "
            f"interrupted run)")
        curve, step, before, elapsed = resumed["curve"], resumed["step"], resumed["before"], resumed["elapsed"]
        losses = [torch.tensor(x) for x in resumed["mine"]["losses"]]
    else:
        for line in preamble(args, head, data, team, device, dtype, model.config.hidden_dropout_prob,
                             f"batch {batch_size}, {epochs} epochs = {total} steps, learning rate {lr}, warmup {warmup} "
                             f"steps, weight decay {args.weight_decay}", seed):
            say(line)
        before = head.evaluate(model, devs, data["tok"], device, dtype, args) if team.main else None
        say(f"before fine-tuning ({head.fresh}): {head.format(before) if team.main else ''}" + head.baseline(train, devs)
            + (article(ARTICLE_BEFORE[args.task], RANDOM_HEAD) if args.task in ARTICLE_BEFORE else ""))
        curve, step, elapsed, losses = [], 0, 0.0, []
    trainer = data_parallel(model, team, device)
    t0 = time.time() - elapsed
    steps = [(epoch, idx) for epoch, batches in enumerate(plan, start=1) for idx in batches]
    with StopSignals() as stop, tqdm(total=total, initial=step, desc=name, unit="step", file=sys.stderr, leave=False,
                                     disable=report.quiet) as bar:
        for epoch, idx in steps[step:]:
            rows, weight = shard(idx, team)
            loss = train_step(trainer, collate(train, rows, device), opt, sched, args.clip, dtype, head.loss, weight)
            losses.append(loss * weight / team.world)     # this process's share of the batch's mean loss
            step += 1
            bar.update()
            if step % every == 0 or step == total:
                window = summed(team, torch.stack(losses).float())   # one sync per evaluation, not per step
                if not torch.isfinite(window).all():
                    k = int((~torch.isfinite(window)).nonzero()[0])   # the first bad loss since the last line
                    raise Fatal(f"the training loss became {window[k].item()} at step {step - len(losses) + 1 + k} "
                                f"(lr {lr}): stopped, no results written", code=1)
                mean = window.mean().item()
                scores = head.evaluate(model, devs, data["tok"], device, dtype, args) if team.main else None
                curve.append({"step": step, "epoch": epoch, "train_loss": mean, "dev": scores,
                              "seconds": round(time.time() - t0, 1)})
                say(f"step {step:>5}/{total}  epoch {epoch}  train loss {mean:.4f}  "
                    f"{head.format(scores) if team.main else ''}  ({time.time() - t0:.0f} s)")
                losses = []
            stopping = stop_requested(stop, team, device)
            if stopping or (step % every == 0 and step < total):      # a checkpoint at each evaluation
                state = {"settings": settings, "step": step, "curve": curve, "before": before, "lines": report.lines,
                         "elapsed": time.time() - t0}
                save_checkpoint(checkpoint, team, model, opt, sched, state, {"losses": [float(x) for x in losses]})
            if stopping:
                signal_name, code = StopSignals.NAMES.get(stop.received, ("a signal to another process", 143))
                raise Stopped(f"stopped by {signal_name} at step {step}/{total}: checkpoint saved to "
                              f"{portable(checkpoint)}; run the same command again to resume (no results were written)",
                              code)
    if not team.main:
        return None
    seconds = time.time() - t0
    final = curve[-1]["dev"]
    say(final_line(args, head, lr, final, seconds))
    best = max(curve, key=lambda c: head.headline(c["dev"]))
    if head.headline(best["dev"]) > head.headline(final):
        say(f"(best dev {METRIC_NAMES[head.metrics[-1] if head.name in SQUAD_VERSION else head.metrics[0]]} seen during "
            f"training: {head.headline(best['dev']):.4f} at step {best['step']}; not the result: the result is the model "
            f"at the end of training, since picking the best checkpoint by its dev score would flatter the dev score)")
    result = {"name": name, "task": args.task, "model": portable(args.model), "lr": lr, "batch_size": batch_size,
              "epochs": epochs, "steps": total, "warmup_steps": warmup, "seed": seed, "device": str(device), "before": before,
              "final": final, "curve": curve, "best_during_training": {"step": best["step"], "dev": best["dev"]},
              "seconds": seconds, "train_examples": data["n_train"], "train_rows": n, "settings": settings}
    if args.save_model:
        folder = args.save_model if not (args.seeds or args.grid) else os.path.join(args.save_model, name)
        result["saved_model"] = portable(save_model(model, data["tok"], folder))
        say(f"model saved to {result['saved_model']} (config, safetensors weights, tokenizer)")
    report.save(result, args=args, argv=data["argv"], device=device)
    if os.path.exists(checkpoint):
        os.remove(checkpoint)                          # the results are written: the checkpoint is spent
    plot_curve(curve, head, os.path.join(args.results_dir, name + "_curve.png"))
    return result


def preamble(args, head, data, team, device, dtype, dropout, schedule, seed):
    """The derived quantities a run prints before it trains (STYLE 8): data, inputs cut, steps, warmup."""
    lines = [f"task {args.task}: {data['n_train']} training examples, "
             + ", ".join(f"{data['n_dev'][k]} {k.replace('_', ' ')} examples" for k in data["devs"])
             + f", device {device.type}"
             + (f" x {team.world} processes (each takes 1/{team.world} of every batch)" if team.world > 1 else "")]
    lines += head.describe(data["train"], args)
    lines.append(schedule)
    lines.append(f"  (also: AdamW{' fused' if device.type == 'cuda' else ''}, clip {args.clip}, dropout {dropout}, "
                 f"seed {seed}, autocast {dtype or 'off (fp32)'}, dynamic padding"
                 + (", batches grouped by length (paper: random batches)" if grouped(args) else "")
                 + f"; model {portable(args.model)}, article: {ARTICLE_MODEL})")
    return lines


def data_parallel(model, team, device):
    """The model each step trains through: itself alone, DistributedDataParallel within a team."""
    if team.world == 1:
        return model
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def stop_requested(stop, team, device):
    """Has any process of the team received SIGTERM or Ctrl-C? (All of them stop at the same step.)"""
    if team.world == 1:
        return stop.received is not None
    return bool(summed(team, torch.tensor([float(stop.received is not None)], device=device)).item() > 0)


def article_final(task, lr):
    """The article's number for this task and learning rate (and its repeat of the same job), labelled."""
    if (task, lr) not in ARTICLE_FINAL:
        return ""
    repeat = f"; the same job run again: {ARTICLE_REPEAT[(task, lr)]}" if (task, lr) in ARTICLE_REPEAT else ""
    return f"   [article ({ARTICLE_SETTING}): {ARTICLE_FINAL[(task, lr)]}{repeat}]"


def final_line(args, head, lr, final, seconds):
    """FINAL sst2 dev accuracy 0.9255 (807/872), dev F1 0.9279, training time 48.3 minutes, then the
    article's and the paper's numbers, labelled."""
    line = f"FINAL {args.task} " + head.final(final) + f", training time {seconds / 60:.1f} minutes"
    line += article_final(args.task, lr)
    if args.task in PAPER_DEV:
        line += f"   [{PAPER_DEV[args.task]}]"
    return line


def plot_curve(curve, head, path):
    """Train loss and the first dev metric against the step, when matplotlib is installed."""
    plt = pyplot()
    if plt is None:
        return None
    steps = [c["step"] for c in curve]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, [c["train_loss"] for c in curve], label="train loss")
    ax2 = ax.twinx()
    ax2.plot(steps, [head.headline(c["dev"]) for c in curve], color="C1", label="dev score")
    ax.set_xlabel("step")
    fig.legend(loc="lower center", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# --- Beyond one run: restarts over seeds, and the paper's grids ---

def restarts(args, head, results, report):
    """--seeds N: N runs with seeds 0..N-1, then the mean and std of every metric."""
    summary = {}
    for dev in results[0]["final"]:
        for m in head.metrics:
            values = [r["final"][dev][m] for r in results]
            summary[f"{dev}.{m}"] = {"values": values, "mean": statistics.mean(values),
                                     "std": statistics.stdev(values) if len(values) > 1 else 0.0}
            report.say(f"{args.task} lr {args.lr} over {len(values)} seeds: {dev} {METRIC_NAMES[m]} "
                       f"{summary[f'{dev}.{m}']['mean']:.4f} +- {summary[f'{dev}.{m}']['std']:.4f}  "
                       f"(values {', '.join(f'{v:.4f}' for v in values)})")
    return {"seeds": args.seeds, "runs": [r["name"] for r in results], "processes": [r["process"] for r in results],
            "summary": summary}


def grid(args, head, results, report):
    """--grid: every (batch, lr, epochs) of the grid, in a table sorted by the dev metric; with --seeds, each
    setting's mean over the seeds first."""
    if args.seeds:
        report.say(f"grid {args.grid} on {args.task}, mean +- std over {args.seeds} seeds, sorted:")
        points = {}
        for r in results:
            points.setdefault((r["batch_size"], r["lr"], r["epochs"]), []).append(head.headline(r["final"]))
        for (b, lr, e), v in sorted(points.items(), key=lambda kv: -statistics.mean(kv[1])):
            report.say(f"  batch {b:>2}  lr {lr:<6g}  epochs {e}  {statistics.mean(v):.4f} +- "
                       f"{statistics.stdev(v) if len(v) > 1 else 0.0:.4f}")
    ranked = sorted(results, key=lambda r: -head.headline(r["final"]))
    report.say(f"grid {args.grid} on {args.task}, sorted by dev {METRIC_NAMES[head.metrics[0]]} (model at the end of training):")
    for r in ranked:
        report.say(f"  batch {r['batch_size']:>2}  lr {r['lr']:<6g}  epochs {r['epochs']}  {head.final(r['final'])}  "
                   f"({r['seconds']:.0f} s)" + (article_final(args.task, r["lr"]) if (r["batch_size"], r["epochs"]) == (32, 3)
                                                else ""))
    return {"grid": args.grid, "runs": [{k: r[k] for k in ("name", "lr", "batch_size", "epochs", "final", "process")}
                                        for r in ranked]}


def planned_runs(args):
    """(batch, lr, epochs, seed) of every run this command asks for."""
    if args.grid:
        seeds = range(args.seeds) if args.seeds else [args.seed]
        return [(b, lr, e, seed) for b, lr, e in GRIDS[args.grid] for seed in seeds]
    return [(args.batch_size, args.lr, args.epochs, s) for s in (range(args.seeds) if args.seeds else [args.seed])]


def existing_result(args, data, lr, batch_size, epochs, seed, dtype):
    """The results of this run when they are already in the results folder for the same settings, else None."""
    path = os.path.join(args.results_dir, run_name(args, lr, batch_size, epochs, seed) + ".json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        done = json.load(f)
    same = lambda settings: {k: v for k, v in settings.items() if k != "processes"}  # noqa: E731
    return done if same(done.get("settings", {})) == same(run_settings(args, data, lr, batch_size, epochs, seed, dtype,
                                                                        ALONE)) else None


def many_runs(args, head, data, runs, device, dtype, procs, mode):
    """Every run of a grid or of restarts, skipping those whose results exist. mode "runs": run k is trained by
    process k % N alone, on its own device; mode "data": each run by all the processes together."""
    mine = {}
    for k, (batch, lr, epochs, seed) in enumerate(runs):
        if mode == "runs" and k % procs.world != procs.rank:
            continue
        done = existing_result(args, data, lr, batch, epochs, seed, dtype)
        result = ({**done, "skipped": True} if done else
                  fine_tune(args, head, data, lr, batch, epochs, seed, device, dtype,
                            procs if mode == "data" else ALONE, quiet=not procs.main))
        if result is not None:                       # data mode: only rank 0 holds the results
            mine[k] = {**result, "process": procs.rank}
    if mode == "runs":
        mine = {k: r for part in gather(procs, mine) for k, r in part.items()}
    return [mine[k] for k in range(len(runs))] if procs.main else None


def parallel_mode(args, procs):
    """How the processes share the work: "data" (every batch split over them) or "runs" (whole runs each)."""
    many = bool(args.grid or args.seeds)
    if args.parallel and not procs.launched:
        raise Fatal(f"--parallel {args.parallel}: needs several processes started by torchrun "
                    f"(torchrun --nproc-per-node N bert_part4_finetune.py ...)")
    if args.parallel == "runs" and not many:
        raise Fatal("--parallel runs spreads whole runs over the processes: it needs --grid or --seeds "
                    "(one run: --parallel data)")
    mode = args.parallel or ("runs" if many else "data")
    if mode == "data":
        for batch in sorted({b for b, _, _, _ in planned_runs(args)}):
            if batch % procs.world:
                raise Fatal(f"batch {batch} cannot be split over {procs.world} processes: choose a batch size divisible "
                            f"by {procs.world} (the global batch stays the paper's; each process takes batch / N)")
    return mode


def split_line(mode, procs, runs):
    if mode == "data":
        return (f"work split: {procs.world} processes ({procs.backend}), data parallel: each of the {len(runs)} run(s) "
                f"uses every process, each taking 1/{procs.world} of every batch")
    return (f"work split: {procs.world} processes ({procs.backend}), whole runs: process r trains runs r, r + "
            f"{procs.world}, ... of the {len(runs)}, each alone on its own device")


def grid_size(name):
    """grid a3 (paper A.3): batch {16, 32} x lr {5e-5, 3e-5, 2e-5} x epochs {2, 3, 4} = 2 x 3 x 3 = 18 runs"""
    runs = GRIDS[name]
    axes = [sorted({r[k] for r in runs}, reverse=k == 1) for k in range(3)]
    named = [(n, a) for n, a in zip(("batch", "lr", "epochs"), axes) if len(a) > 1]
    text = lambda n, v: lr_tag(v) if n == "lr" else str(v)  # noqa: E731
    product = f" = {' x '.join(str(len(a)) for _, a in named)}" if len(named) > 1 else ""
    return (f"grid {name} ({'paper A.3' if name == 'a3' else 'paper §4.1'}): "
            + " x ".join(f"{n} {{{', '.join(text(n, v) for v in a)}}}" for n, a in named) + f"{product} = {len(runs)} runs")


def check_inputs(args):
    """What can be checked before any data or weights are read: the folders we write, the window length."""
    check_writable_dir(args.results_dir, "--results-dir")
    if args.save_model:
        check_model_target(args.save_model)
    hub = "nyu-mll/glue" if args.task in TASKS else "allenai/swag"
    if args.task in SQUAD_VERSION:
        hub = "rajpurkar/squad" if args.task == "squad" else "rajpurkar/squad_v2"
        data = [file_problem(args.train_data, "--train-data", hub), file_problem(args.dev_data, "--dev-data", hub)]
    elif args.data_dir is not None and not os.path.isdir(args.data_dir):
        data = [f"--data-dir {args.data_dir}: no such directory"]
    else:
        data = [file_problem(None, "--data-dir", hub) if args.data_dir is None else None]
    preflight([model_problem(args.model, "--model"), *data])
    config = load_pretrained(AutoConfig, args.model)
    if args.max_len > config.max_position_embeddings:
        raise Fatal(f"--max-len {args.max_len}: above the model's {config.max_position_embeddings} positions")


def prepare(args, head, argv):
    """Read the data and tokenise it once, for every run of this invocation."""
    train, devs = head.read(args)
    if not train:
        raise Fatal(f"no training examples for {args.task}")
    tok = load_pretrained(AutoTokenizer, args.model)
    enc_train, enc_devs = head.encode(tok, train, devs, args)
    if not enc_train["input_ids"]:
        raise Fatal(f"no usable training examples for {args.task}")
    return {"train": enc_train, "devs": enc_devs, "tok": tok, "argv": argv, "n_train": len(train),
            "n_dev": {name: len(d) for name, d in devs.items()}}


def main(argv=None):
    args = parse_args(argv)
    device, procs = start_processes(args.device, args.backend)
    dtype = autocast_dtype(device, args.dtype)
    head = head_for(args.task)
    mode = parallel_mode(args, procs)
    data = all_agree(procs, lambda: check_inputs(args) or prepare(args, head, argv))
    runs = planned_runs(args)
    if not args.grid and not args.seeds:
        if procs.launched and procs.main:
            print(split_line(mode, procs, runs), flush=True)
        fine_tune(args, head, data, args.lr, args.batch_size, args.epochs, args.seed, device, dtype, procs)
        return 0
    summary = f"grid_{args.grid}" + (f"_seeds{args.seeds}" if args.seeds else "") if args.grid else \
        f"lr{lr_tag(args.lr)}_seeds{args.seeds}"
    report = Report(f"part4_{args.task}_{summary}", args.results_dir, quiet=not procs.main)
    if args.grid:
        report.say(grid_size(args.grid) + (f", x {args.seeds} seeds = {len(runs)} runs" if args.seeds else ""))
    if procs.launched:
        report.say(split_line(mode, procs, runs))
    results = many_runs(args, head, data, runs, device, dtype, procs, mode)
    if not procs.main:
        return 0
    for r in results:
        if r.get("skipped"):
            report.say(f"run {r['name']}: its results already exist for the same settings ({r['name']}.json): skipped")
    payload = grid(args, head, results, report) if args.grid else restarts(args, head, results, report)
    report.save({"task": args.task, "model": portable(args.model), **payload}, args=args, argv=argv, device=device)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
