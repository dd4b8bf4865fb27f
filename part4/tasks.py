"""BERT, explained - Part 4: the tasks bert_part4_finetune.py fine-tunes, each in its head family.

A task brings only what differs from the recipe: how it reads its data (GLUE's TSV files, SWAG's CSV files,
SQuAD's JSON, or the Hub), how it encodes an example, its output layer and its metric. The paper's three
head families (§4.1-4.4):

  Classification   GLUE: logits = C W^T + b over K labels (1 for STS-B), C the pooled [CLS] vector
  MultipleChoice   SWAG: a score C_k . w for each of the four (context, ending) pairs, softmax across them
  SpanExtraction   SQuAD v1.1 and v2.0: start and end vectors S, E over the tokens of overlapping windows

Each family owns everything that differs between its tasks (data checks, evaluation batch size, batches
grouped by length or not, the metric runs are selected by and its name): the training loop branches on no task. Outside
this file the rooms that name tasks do so for what the paper or the article treats apart: the GLUE row
(part4/glue.py: WNLI's majority class, MNLI and QQP evaluated once per epoch), the recipe
(bert_part4_finetune.py: each task's paper settings, and the runs the article printed) and its command line
(part4/cli.py: the task names it takes, and the family each default is shown for). SQuAD's windows and
span targets live in part4/spans.py.
"""

import csv
import json
import math
import os
import sys
from dataclasses import dataclass

import numpy as np
import torch
from transformers import AutoModelForMultipleChoice, AutoModelForQuestionAnswering, AutoModelForSequenceClassification

from part4 import spans
from part4.article import PAPER_DEV, PAPER_SQUAD, PAPER_TEST, TABLE1_BASE
from part4.batches import batches_by_length, collate, row_length
from part4.common import Fatal, autocast, file_problem, fmt, load_hub_dataset, not_a_script, write_atomic
from part4.runs import task_config


@dataclass(frozen=True)
class Sources:
    """Where a task's data comes from: local files or folders, else the Hub (read whole: prepare cuts it)."""
    task: str
    data_dir: str = None               # GLUE's or SWAG's folder
    train_data: str = None             # SQuAD's training JSON
    dev_data: str = None               # SQuAD's dev JSON


# --- The nine GLUE tasks (paper §4.1, B.1) ---


@dataclass(frozen=True)
class Task:
    folder: str            # GLUE's directory name
    columns: tuple         # text columns in GLUE's TSV (header names; positions for CoLA, which has none)
    hub_columns: tuple     # the same texts in the Hub dataset nyu-mll/glue
    labels: tuple          # label strings in index order; () = regression (STS-B)
    dev_files: tuple       # dev sets: matched and mismatched for MNLI
    metrics: tuple         # what the step lines and the FINAL line report
    selection_metric: str  # Table 1's metric: runs are ranked and selected by it
    tests: tuple           # (test file in DIR/<folder>/, the GLUE server's file name, its rows)
    paper_test: tuple      # Table 1, BERT-base, on the GLUE server's hidden test set (MNLI: matched, mismatched)
    paper_dev: str = ""    # BERT-base dev accuracy (MNLI: matched), where the paper gives it (Table 5)
    hf_dev: str = ""       # Hugging Face's text-classification README, bert-base-cased dev, one run


TASKS = {       # paper_test: Table 1's BERT-base row (part4/article.py)
    "cola": Task(folder="CoLA", columns=(3,), hub_columns=("sentence",), labels=("0", "1"), dev_files=("dev",),
                 metrics=("accuracy", "mcc"), selection_metric="mcc", tests=(("test", "CoLA.tsv", 1063),),
                 paper_test=TABLE1_BASE.get("cola", ()), hf_dev="MCC 56.53"),
    "sst2": Task(folder="SST-2", columns=("sentence",), hub_columns=("sentence",), labels=("0", "1"), dev_files=("dev",),
                 metrics=("accuracy", "f1"), selection_metric="accuracy", tests=(("test", "SST-2.tsv", 1821),),
                 paper_test=TABLE1_BASE.get("sst2", ()), paper_dev="92.7", hf_dev="accuracy 92.32"),
    "mrpc": Task(folder="MRPC", columns=("#1 String", "#2 String"), hub_columns=("sentence1", "sentence2"), labels=("0", "1"),
                 dev_files=("dev",), metrics=("accuracy", "f1"), selection_metric="f1", tests=(("test", "MRPC.tsv", 1725),),
                 paper_test=TABLE1_BASE.get("mrpc", ()), paper_dev="86.7", hf_dev="F1 88.85, accuracy 84.07 (5 epochs)"),
    "stsb": Task(folder="STS-B", columns=("sentence1", "sentence2"), hub_columns=("sentence1", "sentence2"), labels=(),
                 dev_files=("dev",), metrics=("pearson", "spearman"), selection_metric="spearman",
                 tests=(("test", "STS-B.tsv", 1379),), paper_test=TABLE1_BASE.get("stsb", ()),
                 hf_dev="Pearson 88.64, Spearman 88.48"),
    "qqp": Task(folder="QQP", columns=("question1", "question2"), hub_columns=("question1", "question2"), labels=("0", "1"),
                dev_files=("dev",), metrics=("accuracy", "f1"), selection_metric="f1", tests=(("test", "QQP.tsv", 390965),),
                paper_test=TABLE1_BASE.get("qqp", ()), hf_dev="F1 87.49, accuracy 90.71"),
    "mnli": Task(folder="MNLI", columns=("sentence1", "sentence2"), hub_columns=("premise", "hypothesis"),
                 labels=("entailment", "neutral", "contradiction"), dev_files=("dev_matched", "dev_mismatched"),
                 metrics=("accuracy",), selection_metric="accuracy",
                 tests=(("test_matched", "MNLI-m.tsv", 9796), ("test_mismatched", "MNLI-mm.tsv", 9847),
                        ("diagnostic", "AX.tsv", 1104)),
                 paper_test=TABLE1_BASE.get("mnli", ()), paper_dev="84.4", hf_dev="accuracy 83.91/84.10 (matched/mismatched)"),
    "qnli": Task(folder="QNLI", columns=("question", "sentence"), hub_columns=("question", "sentence"),
                 labels=("entailment", "not_entailment"), dev_files=("dev",), metrics=("accuracy",),
                 selection_metric="accuracy", tests=(("test", "QNLI.tsv", 5463),), paper_test=TABLE1_BASE.get("qnli", ()),
                 paper_dev="88.4", hf_dev="accuracy 90.66"),
    "rte": Task(folder="RTE", columns=("sentence1", "sentence2"), hub_columns=("sentence1", "sentence2"),
                labels=("entailment", "not_entailment"), dev_files=("dev",), metrics=("accuracy",), selection_metric="accuracy",
                tests=(("test", "RTE.tsv", 3000),), paper_test=TABLE1_BASE.get("rte", ()), hf_dev="accuracy 65.70"),
    "wnli": Task(folder="WNLI", columns=("sentence1", "sentence2"), hub_columns=("sentence1", "sentence2"), labels=("0", "1"),
                 dev_files=("dev",), metrics=("accuracy",), selection_metric="accuracy", tests=(("test", "WNLI.tsv", 146),),
                 paper_test=TABLE1_BASE.get("wnli", ()), hf_dev="accuracy 56.34 (5 epochs)"),
}
HF_DEV = "Hugging Face text-classification README, bert-base-cased dev, batch 32, lr 2e-5, 3 epochs, one run"
QNLI_VERSION = "the paper's QNLI is v1; GLUE's QNLI is v2 today (the same questions, other sentence pairs)"


def paper_test_text(name):
    """'MCC 52.1', 'accuracy 84.6/83.4 (matched/mismatched)': Table 1's BERT-base number for a task, in words."""
    task = TASKS[name]
    if not task.paper_test:
        return "none: left out of Table 1 (for the server the paper predicted the majority class)"
    text = f"{METRIC_NAMES[task.selection_metric]} " + "/".join(f"{v:.1f}" for v in task.paper_test)
    return text + (" (matched/mismatched)" if len(task.paper_test) > 1 else "") + (f"; {QNLI_VERSION}" if name == "qnli"
                                                                                  else "")


def label_name(name, k):
    """'equivalent (1)', 'entailment': label k of a task by the Hub's name, and as GLUE's file writes it where that is a
    number."""
    raw, named = TASKS[name].labels[k], HUB_LABELS[name][k]
    return raw if raw == named else f"{named} ({raw})"


def glue_references(name):
    """The published numbers printed beside ours for one GLUE task, each labelled with what it is."""
    task = TASKS[name]
    return [f"{label}: {value}" for label, value in ((PAPER_DEV, task.paper_dev), (PAPER_TEST, paper_test_text(name)),
                                                     (HF_DEV, task.hf_dev)) if value]


TEST_INDEX = {"qqp": "id"}              # the column GLUE's test files are indexed by: `index`, but QQP's `id`
LABEL_COLUMN = {"cola": 1, "sst2": "label", "mrpc": "Quality", "stsb": "score", "qqp": "is_duplicate",
                "mnli": "gold_label", "qnli": "label", "rte": "label", "wnli": "label"}
# The Hub's name of each of our labels (TASKS[name].labels, GLUE's TSV strings), in our order: the Hub dataset's
# labels are read by name, so a dataset whose label order differs from ours is still read right.
HUB_LABELS = {"cola": ("unacceptable", "acceptable"), "sst2": ("negative", "positive"),
              "mrpc": ("not_equivalent", "equivalent"), "qqp": ("not_duplicate", "duplicate"),
              "mnli": ("entailment", "neutral", "contradiction"), "qnli": ("entailment", "not_entailment"),
              "rte": ("entailment", "not_entailment"), "wnli": ("not_entailment", "entailment")}


# --- Reading GLUE: the TSV files of GLUE's download script, or the Hub dataset ---

def read_tsv(path, task_name, task, label_col):
    """Rows of a GLUE TSV file as (texts, label). A malformed row stops with its file and line."""
    if not os.path.isfile(path):
        raise Fatal(f"{path}: no such file (expected GLUE's layout: DIR/{task.folder}/train.tsv, "
                    + ", ".join(f"{name}.tsv" for name in task.dev_files) + ")")
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if len(rows) < (1 if task_name == "cola" else 2):
        raise Fatal(f"{path}: no examples ({'an empty file' if not rows else 'a header and no rows'})")
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
        ours = hub_label_order(rows, task_name)
        return [([r[c] for c in task.hub_columns], ours[r["label"]] if ours else r["label"]) for r in rows]
    if not os.path.isdir(data_dir):
        raise Fatal(f"--data-dir {data_dir}: no such directory")
    base = os.path.join(data_dir, task.folder, split)
    if not os.path.isfile(base + ".tsv") and os.path.isfile(base + ".jsonl") and task_name == "mnli":
        return read_jsonl(base + ".jsonl", task)
    return read_tsv(base + ".tsv", task_name, task, LABEL_COLUMN[task_name])


def hub_label_order(rows, task_name):
    """Our index of each of the Hub dataset's label indices, matched by name (None for STS-B's scores). Rows without
    the dataset's features are taken in the Hub's documented order (HUB_LABELS)."""
    if task_name not in HUB_LABELS:
        return None
    names = getattr(getattr(rows, "features", {}).get("label"), "names", None) or HUB_LABELS[task_name]
    unknown = [n for n in names if n not in HUB_LABELS[task_name]]
    if unknown:
        raise Fatal(f"nyu-mll/glue {task_name}: unknown label name(s) {unknown} (expected {list(HUB_LABELS[task_name])})")
    return [HUB_LABELS[task_name].index(n) for n in names]


def read_glue(sources):
    train = read_split(sources.data_dir, sources.task, "train")
    devs = {}
    for name in TASKS[sources.task].dev_files:
        if name == "dev_mismatched" and sources.data_dir and not any(
                os.path.isfile(os.path.join(sources.data_dir, "MNLI", name + ext)) for ext in (".tsv", ".jsonl")):
            continue                                     # mismatched is optional locally
        devs[name] = read_split(sources.data_dir, sources.task, name)
    return train, devs


# --- GLUE's test sets: what the server scores (GLUE's test.tsv files, or the Hub's split test, labels hidden) ---

def test_columns(task):
    """The text columns of a GLUE test file, by header name (CoLA's test file, unlike its training file, has one)."""
    return tuple(c for c in task.columns if isinstance(c, str)) or task.hub_columns


def read_test_tsv(path, task, task_name):
    """(index, texts) of every row of a GLUE test file; the index is the column the server matches on (QQP's is
    `id`, every other task's `index`). A file in another layout (another index column, or a label column: a dev or
    training file) is refused."""
    if not os.path.isfile(path):
        raise Fatal(f"{path}: no such file (--glue-submission reads GLUE's test files: DIR/{task.folder}/"
                    + ", ".join(f"{split}.tsv" for split, _, _ in task.tests) + ")")
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if len(rows) < 2:
        raise Fatal(f"{path}: no test examples ({'an empty file' if not rows else 'a header and no rows'})")
    header = rows.pop(0)
    labels = [c for c in (LABEL_COLUMN[task_name], "label") if isinstance(c, str) and c in header]
    if labels:
        raise Fatal(f"{path}: has a label column '{labels[0]}', which GLUE's test files do not (a dev or training file?)")
    index = _column(header, TEST_INDEX.get(task_name, "index"), path)
    cols = [_column(header, c, path) for c in test_columns(task)]
    for n, row in enumerate(rows, start=2):
        if len(row) <= max(index, *cols):
            raise Fatal(f"{path}, line {n}: malformed row ({len(row)} fields, expected {len(header)})")
    return [(row[index], [row[c] for c in cols]) for row in rows]


def test_path(sources, split):
    """DIR/<task folder>/<split>.tsv, and MNLI's diagnostic set AX in DIR/diagnostic/diagnostic.tsv."""
    folder = "diagnostic" if split == "diagnostic" else TASKS[sources.task].folder
    return os.path.join(sources.data_dir, folder, split + ".tsv")


def test_problems(sources):
    """Every reason the test files of a task in sources.data_dir cannot be read (none, from the Hub)."""
    if sources.data_dir is None:
        return []
    problems = []
    for split, _, _ in TASKS[sources.task].tests:
        try:
            read_test_tsv(test_path(sources, split), TASKS[sources.task], sources.task)
        except Fatal as e:
            problems.append(str(e))
    return problems


def read_tests(sources):
    """Every test set of a GLUE task, by the server's file name: {"CoLA.tsv": [(index, texts), ...]}; MNLI has
    three (matched, mismatched, and the diagnostic set AX, which the MNLI model predicts)."""
    task, out = TASKS[sources.task], {}
    for split, server_file, _ in task.tests:
        if sources.data_dir is None:
            config, hub_split = ("ax", "test") if split == "diagnostic" else (sources.task, split)
            rows = load_hub_dataset("nyu-mll/glue", config, hub_split, "--data-dir")
            out[server_file] = [(str(r["idx"]), [r[c] for c in task.hub_columns]) for r in rows]
        else:
            out[server_file] = read_test_tsv(test_path(sources, split), task, sources.task)
    return out


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


def read_swag(sources):
    if sources.data_dir is None:
        split = {name: load_hub_dataset("allenai/swag", "regular", hub, "--data-dir")
                 for name, hub in (("train", "train"), ("dev", "validation"))}
        train, dev = ([swag_example(r, f"allenai/swag {name} row {n}") for n, r in enumerate(rows)]
                      for name, rows in split.items())
    else:
        if not os.path.isdir(sources.data_dir):
            raise Fatal(f"--data-dir {sources.data_dir}: no such directory")
        train, dev = (read_swag_csv(os.path.join(sources.data_dir, f)) for f in ("train.csv", "val.csv"))
    return train, {"dev": dev}


# --- Reading SQuAD: bert_part4_squad.py's reader (official JSON, or the Hub) ---

SQUAD_VERSION = {"squad": "1.1", "squad_v2": "2.0"}


def read_squad_task(sources):
    version = SQUAD_VERSION[sources.task]
    train = spans.read_squad(sources.train_data, version, "--train-data", split="train")
    dev = spans.read_squad(sources.dev_data, version, "--dev-data")
    return train, {"dev": dev}


# --- Tokenise once; batches are padded to their own longest input when they are made (dynamic padding) ---

def segments(enc, rows):
    """The token_type_ids column, rows(...) of it, where the tokenizer gives one (BERT, ELECTRA); none where the
    model takes none (DistilBERT, RoBERTa)."""
    return {"token_type_ids": rows(enc["token_type_ids"])} if "token_type_ids" in enc else {}


def encode(tok, examples, max_len):
    """GLUE: token ids cut at max_len, plus each input's full length before the cut."""
    columns = list(zip(*[texts for texts, _ in examples]))
    full = tok(*columns, truncation=False, add_special_tokens=True)["input_ids"]
    enc = tok(*columns, truncation=True, max_length=max_len)
    return {"input_ids": enc["input_ids"], **segments(enc, list),
            "labels": [y for _, y in examples], "full_lengths": [len(x) for x in full], "targets": ("labels",)}


def encode_swag(tok, examples, max_len):
    """SWAG: four (sentence A, sentence B) pairs per example, each cut at max_len: input_ids is (4, tokens)."""
    first = [ctx for ctx, endings, _ in examples for _ in endings]
    second = [e for _, endings, _ in examples for e in endings]
    full = tok(first, second, truncation=False)["input_ids"]
    enc = tok(first, second, truncation=True, max_length=max_len)
    fours = [slice(4 * k, 4 * k + 4) for k in range(len(examples))]             # the four pairs of each example
    return {"input_ids": [enc["input_ids"][k] for k in fours], **segments(enc, lambda t: [t[k] for k in fours]),
            "labels": [y for _, _, y in examples], "full_lengths": [max(len(f) for f in full[k]) for k in fours],
            "targets": ("labels",)}


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


@torch.inference_mode()
def predict_logits(model, enc, device, dtype, batch_size):
    """The model's outputs on every row; inputs sorted by length so that each batch carries little padding."""
    model.eval()
    out = None
    for idx in batches_by_length([row_length(enc, i) for i in range(len(enc["labels"]))], batch_size):
        batch = collate(enc, idx, device)
        batch.pop("labels")
        with autocast(device, dtype):
            logits = model(**batch).logits.float().cpu().numpy()
        out = np.zeros((len(enc["labels"]), logits.shape[1])) if out is None else out
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


def score_parts(scores, metrics, counts=False):
    """'dev accuracy 0.9255', 'dev MCC (matched) 0.41', ... for every dev set and metric; counts: '(807/872)' after
    the first accuracy."""
    parts = []
    for name, s in scores.items():
        tag = "" if len(scores) == 1 else f" ({name.replace('dev_', '')})"
        for k, m in enumerate(metrics):
            parts.append(f"dev {METRIC_NAMES[m]}{tag} {s[m]:.4f}" + (f" ({s['correct']}/{s['n']})" if counts and k == 0
                                                                     and m == "accuracy" else ""))
    return parts


# --- The test-server files: a run's predictions on its task's test sets (--glue-submission) ---

MAJORITY_CLASS = ("wnli",)           # the paper's WNLI submission: always the majority class


def predict_tests(fit, test_dir):
    """The run's predictions on its task's test sets, written as the GLUE server takes them into
    test_dir/<run name>/<file> (header index, prediction; labels by name). WNLI: the training set's majority class,
    as the paper's submission. Returns the files, relative to test_dir."""
    task, family = TASKS[fit.family.name], fit.family
    majority = fit.data["majority"] if family.name in MAJORITY_CLASS else None     # of the whole training set
    files = []
    for server_file, enc in fit.data["tests"].items():
        out = predict_logits(fit.model, enc, fit.device, fit.dtype, family.eval_batch_size)
        labels = prediction_strings(out, task, majority)
        path = os.path.join(test_dir, fit.report.name, server_file)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, submission_text(enc["index"], labels))
        files.append(os.path.relpath(path, test_dir))
        fit.report.say(f"test predictions: {server_file}, {len(labels)} rows -> {path}"
                       + (f" (the majority class {label_name(family.name, majority)} of the whole training set, as the "
                          f"paper's WNLI submission; not the model)" if majority is not None else ""))
    return files


def prediction_strings(logits, task, majority=None):
    """The server's label strings, by name: task.labels[k] for the predicted class k (0/1, entailment/neutral/...,
    entailment/not_entailment); STS-B a score in [0, 5] with 3 decimals; `majority`: that class for every row."""
    if not task.labels:
        return [f"{v:.3f}" for v in np.clip(logits[:, 0], 0.0, 5.0)]
    classes = np.full(len(logits), majority) if majority is not None else logits.argmax(-1)
    return [task.labels[k] for k in classes]


def submission_text(index, labels):
    return "index\tprediction\n" + "".join(f"{i}\t{p}\n" for i, p in zip(index, labels))


# --- The head families: what differs between the tasks (one class per output layer) ---

class Classification:
    """GLUE (paper §4.1): the pooled [CLS] vector C, logits = C W^T + b, K labels (1 for STS-B)."""
    kind = "classification"            # which loss of the recipe trains it
    model_class = AutoModelForSequenceClassification   # the checkpoint's own architecture (BERT: BertFor...)
    fresh = "random classifier layer"
    new_head, kept_head = "a new classifier layer", "the checkpoint's classifier layer, kept"    # the log's words
    eval_batch_size = 128              # dev inputs per forward pass, unless --eval-batch-size
    grouped = False                    # training batches grouped by length (--group-by-length auto)
    hub = "nyu-mll/glue"

    def __init__(self, name, max_len, stride=None, eval_batch_size=None):
        self.name, self.max_len, self.stride = name, max_len, None
        self.eval_batch_size = eval_batch_size or type(self).eval_batch_size
        self.metrics, self.selection_metric, self.model_kwargs = self.head(name)
        self.label_names = HUB_LABELS.get(name)    # the saved model's id2label (none for STS-B's score or SWAG)

    @staticmethod
    def head(name):
        """The metrics the log reports, the one runs are selected by (Table 1's), and the output layer's kwargs."""
        task = TASKS[name]
        return task.metrics, task.selection_metric, {"num_labels": max(1, len(task.labels))}


    def data_problems(self, sources):
        if sources.data_dir is not None:
            return [] if os.path.isdir(sources.data_dir) else [f"--data-dir {sources.data_dir}: no such directory"]
        return [file_problem(None, "--data-dir", self.hub)]

    def read(self, sources):
        return read_glue(sources)

    def encode(self, tok, train, devs):
        return encode(tok, train, self.max_len), {name: encode(tok, d, self.max_len) for name, d in devs.items()}

    def describe(self, train):
        cut = sum(n > self.max_len for n in train["full_lengths"])
        return [f"longest training input: {max(train['full_lengths'])} tokens; inputs cut at {self.max_len}: {cut}"]

    def evaluate(self, model, devs, tok, device, dtype):
        return {name: evaluate(model, enc, device, dtype, self.eval_batch_size, self.metrics) for name, enc in devs.items()}

    @property
    def selection_name(self):
        return METRIC_NAMES[self.selection_metric]

    def selection(self, scores):
        """The dev score runs are ranked and selected by: Table 1's metric, on the first dev set (MNLI: matched)."""
        return next(iter(scores.values()))[self.selection_metric]

    def majority(self, train):
        """The majority class of the whole training set (examples (texts, label)): the paper's WNLI submission, and
        what a model that learns nothing predicts (the first of any ties; None for STS-B's scores)."""
        if not TASKS[self.name].labels:
            return None
        return int(np.bincount([y for _, y in train], minlength=len(TASKS[self.name].labels)).argmax())

    def baseline(self, majority, devs):
        """'   (always the majority class equivalent (1): dev accuracy 0.6838) [the majority of the whole training
        set]': what a model that learns nothing scores, the class by its name and as GLUE's file writes it."""
        if "accuracy" not in self.metrics or majority is None:
            return ""
        gold = next(iter(devs.values()))["labels"]
        return (f"   (always the majority class {label_name(self.name, majority)}: dev accuracy "
                f"{accuracy([majority] * len(gold), gold):.4f}) [the majority of the whole training set]")

    def majority_scores(self, majority, devs):
        """What always predicting the majority class scores on each dev set, as the runs are scored (selection_metric,
        in percent): a chosen score at or below it learned nothing the dev set shows. None for STS-B's scores."""
        if majority is None:
            return None
        return [100 * METRICS[self.selection_metric]([majority] * len(d["labels"]), d["labels"]) for d in devs.values()]

    def format(self, scores):
        return "  ".join(score_parts(scores, self.metrics))

    def final(self, scores):
        return ", ".join(score_parts(scores, self.metrics, counts=True))

    def summary(self, train):
        """What the results JSON records of the training set beyond its size."""
        return {}

    def references(self):
        """The published numbers the FINAL line prints beside ours, each labelled."""
        return glue_references(self.name)

    def read_tests(self, sources):
        return read_tests(sources)

    def extra_outputs(self, fit, test_dir):
        """What a run writes beyond its scores: with --glue-submission (test_dir), its test-set predictions."""
        return {"test_predictions": predict_tests(fit, test_dir)} if test_dir else {}

    def encode_tests(self, tok, tests):
        """Each test set encoded as a dev set is (labels 0: the server holds the real ones), with its indices."""
        return {name: {**encode(tok, [(texts, 0) for _, texts in rows], self.max_len), "index": [i for i, _ in rows]}
                for name, rows in tests.items()}


class MultipleChoice(Classification):
    """SWAG (paper §4.4): one vector w scores the pooled C_k of each of the four endings, softmax across them."""
    kind = "multiple_choice"
    model_class = AutoModelForMultipleChoice
    fresh = "random vector w"
    new_head, kept_head = "a new vector w", "the checkpoint's vector w, kept"
    hub = "allenai/swag"

    @staticmethod
    def head(name):
        return ("accuracy",), "accuracy", {}

    def read(self, sources):
        return read_swag(sources)

    def encode(self, tok, train, devs):
        return (encode_swag(tok, train, self.max_len),
                {name: encode_swag(tok, d, self.max_len) for name, d in devs.items()})

    def references(self):
        return ["paper, BERT-base dev (Table 4): accuracy 81.6"]

    def majority(self, train):
        """The ending most often right in the whole training set (its position, 0-3)."""
        return int(np.bincount([y for _, _, y in train], minlength=4).argmax())

    def baseline(self, majority, devs):
        """'   (always the majority class 2: dev accuracy 0.2500)': always the training set's most frequent ending."""
        gold = next(iter(devs.values()))["labels"]
        return f"   (always the majority class {majority}: dev accuracy {accuracy([majority] * len(gold), gold):.4f})"

    def describe(self, train):
        cut = sum(n > self.max_len for n in train["full_lengths"])
        return [f"longest (context, ending) pair: {max(train['full_lengths'])} tokens; examples with a pair cut at "
                f"{self.max_len}: {cut}"]


class SpanExtraction:
    """SQuAD (paper §4.2, §4.3): start and end vectors S and E over the tokens of overlapping windows."""
    kind = "span"
    model_class = AutoModelForQuestionAnswering
    model_kwargs = {}
    fresh = "random start and end vectors S, E"
    new_head, kept_head = "new start and end vectors S, E", "the checkpoint's start and end vectors S, E, kept"
    label_names = None
    eval_batch_size = spans.BATCH_SIZE  # windows per forward pass, as bert_part4_squad.py
    grouped = True                     # windows run from a short passage's to the full window length
    metrics = ("em", "f1")
    selection_metric = "f1"            # runs are ranked and selected by F1 (at tau = 0 for v2.0)
    selection_name = METRIC_NAMES["f1"]

    def __init__(self, name, max_len, stride, eval_batch_size=None):
        self.name, self.version, self.max_len, self.stride = name, SQUAD_VERSION[name], max_len, stride
        self.eval_batch_size = eval_batch_size or type(self).eval_batch_size
        self.hub = spans.HUB_DATASETS[self.version]

    def data_problems(self, sources):
        return [file_problem(sources.train_data, "--train-data", self.hub),
                file_problem(sources.dev_data, "--dev-data", self.hub)]

    def read(self, sources):
        return read_squad_task(sources)

    def encode(self, tok, train, devs):
        """The training windows with their targets; the dev questions stay questions (bert_part4_squad.predict
        windows them), checked here once for windows that stop short of their passage: (uncovered, questions) of
        each dev set, kept with the training windows as dev_uncovered."""
        dev_uncovered = {name: (len(spans.uncovered_questions(tok, d, spans.make_windows(tok, d, self.max_len,
                                                                                          self.stride))), len(d))
                         for name, d in devs.items()}
        return {**spans.encode_squad(tok, train, self.max_len, self.stride), "dev_uncovered": dev_uncovered}, devs

    def describe(self, train):
        lines = [f"{len(train['input_ids'])} windows of at most {self.max_len} tokens (stride {self.stride}) from "
                 f"{train['questions']} questions; {train['multi_window']} questions need more than one window",
                 f"windows pointing at [CLS] (no answer, or not the whole answer, in the window): {train['to_cls']}",
                 f"questions skipped because answer_start does not match the context: {train['skipped']}",
                 "steps are counted in windows, every window once an epoch (paper's run_squad.py: "
                 "int(questions / batch x epochs) steps, fewer than its windows need)"]
        lines += [f"training set: {spans.coverage_line(train['uncovered'], train['questions'])}"] if train["uncovered"] else []
        lines += [f"{name} set: {spans.coverage_line(n, size)}" for name, (n, size) in train["dev_uncovered"].items() if n]
        return lines

    def evaluate(self, model, devs, tok, device, dtype):
        """bert_part4_squad.py's own prediction and official metric on every dev question."""
        model.eval()
        search = spans.SpanSearch(max_len=self.max_len, stride=self.stride, batch_size=self.eval_batch_size,
                                  n_best=spans.N_BEST, max_answer=spans.MAX_ANSWER)
        out = {name: self.score(*spans.predict(model, tok, examples, search, device, dtype), examples)
               for name, examples in devs.items()}
        model.train()
        return out

    def score(self, answers, timing, examples):
        """v1.1: EM and F1; v2.0: EM and F1 at tau = 0, and the whole sweep of bert_part4_squad.py."""
        if self.version == "1.1":
            em, f1, _ = spans.score_v1(examples, answers)
            return {"em": float(em), "f1": float(f1), "n": len(examples), "windows": timing["windows"],
                    "uncovered": timing["uncovered"]}
        r, _, _ = spans.score_v2(examples, answers, spans.tau_grid(*spans.TAU_SWEEP))
        return {"em": r["at0"]["em"], "f1": r["at0"]["f1"], **r, "windows": timing["windows"], "uncovered": timing["uncovered"]}

    def selection(self, scores):
        """The dev score runs are ranked and selected by, on the first dev set."""
        return next(iter(scores.values()))[self.selection_metric]

    def majority(self, train):
        return None

    def baseline(self, majority, devs):
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
                    f"{fmt(s['has_ans']['em'])} F1 {fmt(s['has_ans']['f1'])}, NoAns ({s['no_ans']['n']}) "
                    f"EM {fmt(s['no_ans']['em'])} F1 {fmt(s['no_ans']['f1'])}")
        return line

    def extra_outputs(self, fit, test_dir):
        return {}

    def summary(self, train):
        return {"uncovered_questions": {"train": train["uncovered"],
                                        **{name: n for name, (n, _) in train["dev_uncovered"].items()}}}

    def references(self):
        return [PAPER_SQUAD[self.version]]


FAMILIES = {**{name: Classification for name in TASKS}, "swag": MultipleChoice, "squad": SpanExtraction,
            "squad_v2": SpanExtraction}


# --- One task's share of a fine-tuning command ---

def task_inputs(settings, task, once_per_epoch=()):
    """One task's share of the command: its Config (made for it), its head family and where its data comes from."""
    family = FAMILIES[task](task, settings.max_len, settings.stride, settings.eval_batch_size)
    sources = Sources(task=task, data_dir=settings.data_dir, train_data=settings.train_data, dev_data=settings.dev_data)
    return task_config(settings, task, family, once_per_epoch), family, sources


if __name__ == "__main__":
    sys.exit(not_a_script("part4/tasks.py", "python bert_part4_finetune.py <task> (--help lists the tasks)"))
