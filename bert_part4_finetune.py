"""BERT, explained - Part 4: fine-tuning BERT on GLUE with the paper's recipe (paper §3.2, §4.1, A.3).

    python bert_part4_finetune.py sst2            # the article's SST-2 run (lr 2e-5)
    python bert_part4_finetune.py mrpc 5e-5       # one MRPC learning rate; --grid glue runs all four
    python bert_part4_finetune.py rte --seeds 5   # five restarts, then mean and std
    python bert_part4_finetune.py mrpc --model DIR --data-dir ../shared/data/glue_data   # offline

The recipe: batch 32, 3 epochs, max length 128, AdamW with weight decay 0.01 (none on biases and
LayerNorm weights), the learning rate rising linearly over the first 10% of steps then falling
linearly to zero (Google's run_classifier.py), gradient clipping at 1.0, dropout 0.1, one fixed seed,
the classifier on the pooled [CLS]. Each run writes results/part4_<task>_lr<lr>.{log,json}.
"""

import csv
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm
from transformers import AutoTokenizer, BertForSequenceClassification

from bert_part4_common import (
    ArgumentParser,
    Fatal,
    Report,
    add_common_flags,
    autocast_dtype,
    load_hub_dataset,
    load_pretrained,
    pick_device,
    pyplot,
    run_cli,
    seed_everything,
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

# What the article printed (reference_logs/part4_sst2_stdout.txt, part4_mrpc_lr*_stdout.txt), and the
# paper's BERT-base dev scores (Table 5: MNLI-m, QNLI, MRPC accuracy, SST-2).
ARTICLE_FINAL = {("sst2", 2e-5): "0.9255 (807/872), F1 0.9279", ("mrpc", 2e-5): "0.8333 (340/408), F1 0.8847",
                 ("mrpc", 3e-5): "0.8333 (340/408), F1 0.8863", ("mrpc", 4e-5): "0.8480 (346/408), F1 0.8953",
                 ("mrpc", 5e-5): "0.8701 (355/408), F1 0.9094"}
PAPER_DEV = {"mnli": 84.4, "qnli": 88.4, "mrpc": 86.7, "sst2": 92.7}
ARTICLE_MODEL = "bert-base-uncased"
GRIDS = {"glue": [(32, lr, 3) for lr in (5e-5, 4e-5, 3e-5, 2e-5)],                       # paper §4.1
         "a3": [(b, lr, e) for b in (16, 32) for lr in (5e-5, 3e-5, 2e-5) for e in (2, 3, 4)]}   # paper A.3


def parse_args(argv):
    p = ArgumentParser(
        description="Part 4, 'Our own fine-tune': BERT fine-tuned on a GLUE task with the paper's recipe "
                    "(paper §4.1 and Appendix A.3), on CUDA, Apple MPS or the CPU.",
        epilog="Each run writes results/part4_<task>_lr<lr>.{log,json}; --seeds and --grid add a summary.")
    p.add_argument("task", help="one of " + ", ".join(TASKS))
    p.add_argument("lr", nargs="?", default="2e-5", help="peak learning rate (article: 2e-5 for SST-2; paper grid 5e-5..2e-5)")
    p.add_argument("--model", default=ARTICLE_MODEL, help="pre-trained BERT: Hub id or local folder (article: bert-base-uncased)")
    p.add_argument("--data-dir", help="GLUE folder (DIR/SST-2/train.tsv, dev.tsv, ...); default: the Hub dataset nyu-mll/glue")
    p.add_argument("--batch-size", type=int, default=32, help="paper A.3 / article: 32")
    p.add_argument("--epochs", type=int, default=3, help="paper §4.1 / article: 3")
    p.add_argument("--max-len", type=int, default=128, help="longest input in tokens (article, run_classifier.py: 128)")
    p.add_argument("--warmup", type=float, default=0.1, help="share of steps with a rising lr (run_classifier.py: 0.1)")
    p.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay, not on biases and LayerNorm (paper A.2)")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping (run_classifier.py: 1.0)")
    p.add_argument("--seed", type=int, default=0, help="the one fixed seed (restarts: --seeds)")
    p.add_argument("--seeds", type=int, help="N restarts with seeds 0..N-1, then mean and std (paper §5.2: 5 restarts)")
    p.add_argument("--grid", choices=sorted(GRIDS), help="glue: lr 5e-5..2e-5 (§4.1); a3: batch x lr x epochs (A.3)")
    p.add_argument("--evals", type=int, default=30, help="dev evaluations during training (article: about 30)")
    p.add_argument("--max-train-examples", type=int, help="only the first N training examples")
    p.add_argument("--max-dev-examples", type=int, help="only the first N examples of each dev set")
    p.add_argument("--eval-batch-size", type=int, default=128, help="batch size for dev evaluation")
    p.add_argument("--dtype", default="auto", help="auto (bf16 autocast on CUDA, fp32 elsewhere), fp32 or bf16")
    add_common_flags(p)
    p.add_argument("--run-tag", help="appended to the results file names, e.g. the model's name")
    args = p.parse_intermixed_args(argv)
    args.task = args.task.lower().replace("-", "")
    if args.task not in TASKS:
        raise Fatal(f"unknown task '{args.task}': choose one of {', '.join(TASKS)}")
    try:
        args.lr = float(args.lr)
    except ValueError:
        raise Fatal(f"learning rate '{args.lr}' is not a number (e.g. 2e-5)")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise Fatal(f"learning rate {args.lr}: must be a positive number (e.g. 2e-5)")
    for name in ("batch_size", "epochs", "max_len", "evals", "eval_batch_size", "seeds", "max_train_examples",
                 "max_dev_examples"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise Fatal(f"--{name.replace('_', '-')} {value}: must be positive")
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


# --- Tokenise once; batches padded to their own longest input (dynamic padding) ---

def encode(tok, examples, max_len):
    """Token ids cut at max_len, plus each input's full length before the cut."""
    columns = list(zip(*[texts for texts, _ in examples]))
    full = tok(*columns, truncation=False, add_special_tokens=True)["input_ids"]
    enc = tok(*columns, truncation=True, max_length=max_len)
    return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
            "labels": [y for _, y in examples], "full_lengths": [len(x) for x in full]}


def collate(enc, idx, device, pad_to=None, pad_id=0):
    """A batch of the rows idx, padded to the longest of them (or to pad_to: the common default)."""
    L = pad_to or max(len(enc["input_ids"][i]) for i in idx)
    ids = torch.full((len(idx), L), pad_id, dtype=torch.long)
    tt = torch.zeros((len(idx), L), dtype=torch.long)
    am = torch.zeros((len(idx), L), dtype=torch.long)
    for r, i in enumerate(idx):
        n = len(enc["input_ids"][i])
        ids[r, :n], tt[r, :n], am[r, :n] = torch.tensor(enc["input_ids"][i]), torch.tensor(enc["token_type_ids"][i]), 1
    labels = torch.tensor([enc["labels"][i] for i in idx])
    return {"input_ids": ids.to(device), "token_type_ids": tt.to(device), "attention_mask": am.to(device),
            "labels": labels.to(device)}


def epoch_batches(n, batch_size, epochs, seed):
    """The shuffled row order of every epoch, cut into batches (the last one of an epoch may be short)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=g).tolist()
        out.append([order[i:i + batch_size] for i in range(0, n, batch_size)])
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


def train_step(model, batch, opt, sched, clip, dtype):
    """One step: forward, loss, backward, clip the gradient norm, AdamW, schedule. Returns the loss."""
    with torch.autocast(batch["input_ids"].device.type, dtype=dtype, enabled=dtype is not None):
        loss = model(**batch).loss
    loss.backward()
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
METRIC_NAMES = {"accuracy": "accuracy", "f1": "F1", "mcc": "MCC", "pearson": "Pearson", "spearman": "Spearman"}


@torch.inference_mode()
def evaluate(model, enc, device, dtype, batch_size, metrics):
    """Dev metrics; inputs sorted by length so that each batch carries little padding."""
    model.eval()
    order = sorted(range(len(enc["labels"])), key=lambda i: len(enc["input_ids"][i]))
    out = np.zeros((len(order), model.config.num_labels))
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        batch = collate(enc, idx, device)
        batch.pop("labels")
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            out[idx] = model(**batch).logits.float().cpu().numpy()
    model.train()
    pred = out[:, 0] if model.config.num_labels == 1 else out.argmax(-1)
    scores = {m: METRICS[m](pred, enc["labels"]) for m in metrics}
    scores["n"] = len(order)
    if "accuracy" in metrics:
        scores["correct"] = int(np.sum(np.asarray(pred) == np.asarray(enc["labels"])))
    return scores


def dev_scores(model, devs, device, dtype, args, metrics):
    return {name: evaluate(model, enc, device, dtype, args.eval_batch_size, metrics) for name, enc in devs.items()}


def format_scores(scores, metrics):
    parts = []
    for name, s in scores.items():
        tag = "" if len(scores) == 1 else f" ({name.replace('dev_', '')})"
        parts += [f"dev {METRIC_NAMES[m]}{tag} {s[m]:.4f}" for m in metrics]
    return "  ".join(parts)


# --- One fine-tuning run, logged as in the article ---

def lr_tag(lr):
    """2e-05 -> '2e-5', 2.5e-05 -> '2.5e-5': the learning rate as the article's file names write it."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def run_name(args, lr, batch, epochs, seed):
    name = f"part4_{args.task}_lr{lr_tag(lr)}"
    name += f"_bs{batch}" if batch != 32 else ""
    name += f"_ep{epochs}" if epochs != 3 else ""
    name += f"_seed{seed}" if (args.seeds or seed != 0) else ""
    return name + (f"_{args.run_tag}" if args.run_tag else "")


def fine_tune(args, data, lr, batch_size, epochs, seed, device, dtype):
    """Train one model from the pre-trained weights; returns the results of the run."""
    task = TASKS[args.task]
    name = run_name(args, lr, batch_size, epochs, seed)
    report = Report(name, args.results_dir)
    train, devs = data["train"], data["devs"]
    seed_everything(seed)
    model = load_pretrained(BertForSequenceClassification, args.model, num_labels=max(1, len(task.labels))).to(device)
    model.train()
    plan = epoch_batches(len(train["labels"]), batch_size, epochs, seed)
    total = sum(len(e) for e in plan)
    opt, sched, warmup = make_optimizer(model, lr, args.weight_decay, args.warmup, total, device)
    every = max(1, total // args.evals)
    cut = sum(n > args.max_len for n in train["full_lengths"])
    say = report.say
    say(f"task {args.task}: {len(train['labels'])} training examples, "
        + ", ".join(f"{len(d['labels'])} {n.replace('_', ' ')} examples" for n, d in devs.items()) + f", device {device.type}")
    say(f"longest training input: {max(train['full_lengths'])} tokens; inputs cut at {args.max_len}: {cut}")
    say(f"batch {batch_size}, {epochs} epochs = {total} steps, learning rate {lr}, warmup {warmup} steps, "
        f"weight decay {args.weight_decay}")
    say(f"  (also: AdamW{' fused' if device.type == 'cuda' else ''}, clip {args.clip}, dropout "
        f"{model.config.hidden_dropout_prob}, seed {seed}, autocast {dtype or 'off (fp32)'}, dynamic padding)")
    before = dev_scores(model, devs, device, dtype, args, task.metrics)
    say(f"before fine-tuning (random classifier layer): {format_scores(before, task.metrics)}")
    curve, losses, step, t0 = [], [], 0, time.time()
    bar = tqdm(total=total, desc=name, unit="step", file=sys.stderr, leave=False)
    for epoch, batches in enumerate(plan, start=1):
        for idx in batches:
            loss = train_step(model, collate(train, idx, device), opt, sched, args.clip, dtype)
            losses.append(loss)
            step += 1
            bar.update()
            if step % every == 0 or step == total:
                window = torch.stack(losses).float()             # one sync per evaluation, not per step
                if not torch.isfinite(window).all():
                    k = int((~torch.isfinite(window)).nonzero()[0])   # the first bad loss since the last line
                    raise Fatal(f"the training loss became {window[k].item()} at step {step - len(losses) + 1 + k} "
                                f"(lr {lr}): stopped, no results written", code=1)
                mean = window.mean().item()
                scores = dev_scores(model, devs, device, dtype, args, task.metrics)
                curve.append({"step": step, "epoch": epoch, "train_loss": mean, "dev": scores,
                              "seconds": round(time.time() - t0, 1)})
                say(f"step {step:>5}/{total}  epoch {epoch}  train loss {mean:.4f}  "
                    f"{format_scores(scores, task.metrics)}  ({time.time() - t0:.0f} s)")
                losses = []
    bar.close()
    seconds = time.time() - t0
    final = curve[-1]["dev"]
    say(final_line(args, lr, final, task, seconds, articles_setting(args, batch_size, epochs)))
    best = max(curve, key=lambda c: next(iter(c["dev"].values()))[task.metrics[0]])
    first = next(iter(final))
    if best["dev"][first][task.metrics[0]] > final[first][task.metrics[0]]:
        say(f"(best dev {METRIC_NAMES[task.metrics[0]]} seen during training: {best['dev'][first][task.metrics[0]]:.4f} "
            f"at step {best['step']}; not the result: the result is the model at the end of training, since "
            f"picking the best checkpoint by its dev score would flatter the dev score)")
    result = {"name": name, "task": args.task, "model": args.model, "lr": lr, "batch_size": batch_size, "epochs": epochs,
              "steps": total, "warmup_steps": warmup, "seed": seed, "device": str(device), "before": before,
              "final": final, "curve": curve, "best_during_training": {"step": best["step"], "dev": best["dev"]},
              "seconds": seconds, "train_examples": len(train["labels"]), "inputs_cut": cut}
    report.save(result, args=args, argv=data["argv"], device=device)
    plot_curve(curve, task, os.path.join(args.results_dir, name + "_curve.png"))
    return result


def articles_setting(args, batch_size, epochs):
    """The article's run: bert-base-uncased, batch 32, 3 epochs, all the data. Only then is its number shown."""
    return (args.model == ARTICLE_MODEL and batch_size == 32 and epochs == 3
            and args.max_train_examples is None and args.max_dev_examples is None)


def final_line(args, lr, final, task, seconds, full_recipe):
    """FINAL sst2 dev accuracy 0.9255 (807/872), dev F1 0.9279, training time 48.3 minutes, then the
    article's and the paper's numbers, labelled."""
    parts = []
    for name, s in final.items():
        tag = "" if len(final) == 1 else f" ({name.replace('dev_', '')})"
        for k, m in enumerate(task.metrics):
            parts.append(f"dev {METRIC_NAMES[m]}{tag} {s[m]:.4f}" + (f" ({s['correct']}/{s['n']})" if k == 0 and
                                                                     m == "accuracy" else ""))
    line = f"FINAL {args.task} " + ", ".join(parts) + f", training time {seconds / 60:.1f} minutes"
    if full_recipe and (args.task, lr) in ARTICLE_FINAL:
        line += f"   [article: {ARTICLE_FINAL[(args.task, lr)]}]"
    if args.task in PAPER_DEV:
        line += f"   [paper, BERT-base dev: {PAPER_DEV[args.task]}]"
    return line


def plot_curve(curve, task, path):
    """Train loss and the first dev metric against the step, when matplotlib is installed."""
    plt = pyplot()
    if plt is None:
        return None
    steps = [c["step"] for c in curve]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, [c["train_loss"] for c in curve], label="train loss")
    ax2 = ax.twinx()
    ax2.plot(steps, [next(iter(c["dev"].values()))[task.metrics[0]] for c in curve], color="C1",
             label=f"dev {METRIC_NAMES[task.metrics[0]]}")
    ax.set_xlabel("step")
    fig.legend(loc="lower center", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# --- Beyond one run: restarts over seeds, and the paper's grids ---

def headline(result, task):
    """The first metric of the first dev set: what a grid is sorted by."""
    return next(iter(result["final"].values()))[task.metrics[0]]


def restarts(args, data, device, dtype, report):
    """--seeds N: N runs with seeds 0..N-1, then the mean and std of every metric."""
    task = TASKS[args.task]
    results = [fine_tune(args, data, args.lr, args.batch_size, args.epochs, s, device, dtype) for s in range(args.seeds)]
    summary = {}
    for dev in results[0]["final"]:
        for m in task.metrics:
            values = [r["final"][dev][m] for r in results]
            summary[f"{dev}.{m}"] = {"values": values, "mean": statistics.mean(values),
                                     "std": statistics.stdev(values) if len(values) > 1 else 0.0}
            report.say(f"{args.task} lr {args.lr} over {len(values)} seeds: {dev} {METRIC_NAMES[m]} "
                       f"{summary[f'{dev}.{m}']['mean']:.4f} +- {summary[f'{dev}.{m}']['std']:.4f}  "
                       f"(values {', '.join(f'{v:.4f}' for v in values)})")
    return {"seeds": args.seeds, "runs": [r["name"] for r in results], "summary": summary}


def grid(args, data, device, dtype, report):
    """--grid: every (batch, lr, epochs) of the grid, then a table sorted by the dev metric."""
    task = TASKS[args.task]
    results = [fine_tune(args, data, lr, b, e, args.seed, device, dtype) for b, lr, e in GRIDS[args.grid]]
    report.say(f"grid {args.grid} on {args.task}, sorted by dev {METRIC_NAMES[task.metrics[0]]} (model at the end of training):")
    for r in sorted(results, key=lambda r: -headline(r, task)):
        report.say(f"  batch {r['batch_size']:>2}  lr {r['lr']:<6g}  epochs {r['epochs']}  "
                   f"{format_scores(r['final'], task.metrics)}  ({r['seconds']:.0f} s)")
    return {"grid": args.grid, "runs": [{k: r[k] for k in ("name", "lr", "batch_size", "epochs", "final")}
                                        for r in sorted(results, key=lambda r: -headline(r, task))]}


def prepare(args, argv):
    """Read the data and tokenise it once, for every run of this invocation."""
    train, devs = read_glue(args)
    if not train:
        raise Fatal(f"no training examples for {args.task}")
    tok = load_pretrained(AutoTokenizer, args.model)
    return {"train": encode(tok, train, args.max_len), "argv": argv,
            "devs": {name: encode(tok, d, args.max_len) for name, d in devs.items()}}


def main(argv=None):
    args = parse_args(argv)
    device = pick_device(args.device)
    dtype = autocast_dtype(device, args.dtype)
    data = prepare(args, argv)
    if not args.grid and not args.seeds:
        fine_tune(args, data, args.lr, args.batch_size, args.epochs, args.seed, device, dtype)
        return 0
    report = Report(f"part4_{args.task}_" + (f"grid_{args.grid}" if args.grid else
                                             f"lr{lr_tag(args.lr)}_seeds{args.seeds}"),
                    args.results_dir)
    payload = grid(args, data, device, dtype, report) if args.grid else restarts(args, data, device, dtype, report)
    report.save({"task": args.task, "model": args.model, **payload}, args=args, argv=argv, device=device)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
