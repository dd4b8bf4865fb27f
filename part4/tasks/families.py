"""The paper's three head families (§4.1-4.4), one class per output layer (FAMILIES, at the end of the classes, says
which task is in which):

  Classification   GLUE: logits = C W^T + b over K labels (1 for STS-B), C the pooled [CLS] vector
  MultipleChoice   SWAG: a score C_k . w for each of the four (context, ending) pairs, softmax across them
  SpanExtraction   SQuAD v1.1 and v2.0: start and end vectors S, E over the tokens of overlapping windows (it lives with
                   SQuAD's windows and span search, part4/tasks/squad_spans.py, imported for a SQuAD task only)

A family brings everything that differs between tasks (Family lists it): how its data is read and encoded, its
loss, its evaluation and the metric runs are chosen by, its lines; the training loop branches on no task. GLUE's
metrics (accuracy, F1, MCC, Pearson, Spearman), the classification family's scoring, are here too.
"""

import math
import os
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from transformers import AutoModelForMultipleChoice, AutoModelForSequenceClassification

from part4.data.batches import batches_by_length, collate
from part4.data.readers import GLUE, HUB_LABELS, file_problem, label_name, read_glue, read_glue_tests, read_swag
from part4.models.loading import autocast
from part4.output.results_files import write_atomic
from part4.paper.article import HF_DEV, PAPER_DEV, PAPER_TEST
from part4.paper.recipe import EVAL_BATCH_SIZE


@runtime_checkable
class Family(Protocol):
    """What the recipe, its lines and its plan ask of a task's head family; each family has every member."""
    name: str                    # the task: "sst2", "swag", "squad_v2"
    max_len: int                 # the longest input in tokens (SQuAD: a window)
    stride: object               # tokens two SQuAD windows share (None for the others)
    model_class: type            # the Auto class of its model: the encoder with its head
    model_kwargs: dict           # what that class is built with (GLUE: num_labels)
    label_names: object          # the saved model's label names, in our order (None: the library's LABEL_k)
    fresh: str                   # the log's words for the untrained head ("random classifier layer")
    new_head: str                # ... for a new head on the pre-trained weights
    kept_head: str               # ... for the checkpoint's own head, kept (--head checkpoint)
    eval_batch_size: int         # dev inputs (SQuAD: windows) per forward pass
    grouped: bool                # training batches grouped by length, unless --group-by-length says
    metrics: tuple               # the dev metrics its lines report
    selection_metric: str        # the one runs are ranked and chosen by (GLUE: Table 1's)
    selection_name: str          # that metric as the lines name it
    references: list             # the published numbers the FINAL line prints beside ours, each labelled

    def data_problems(self, sources):
        """Why its data cannot be read (a missing folder or file, an unreachable Hub), each problem or None."""

    def read(self, sources):
        """(training examples, {dev set: examples}), each read whole."""

    def read_tests(self, sources):
        """{the GLUE server's file name: [(index, texts)]} of its test sets ({} where none go to a server)."""

    def encode(self, tok, train, devs):
        """(the encoded training set, {dev set: what evaluate reads}), tokenised once."""

    def encode_tests(self, tok, tests):
        """The test sets read_tests gave, encoded as dev sets, with their indices."""

    def describe(self, train):
        """The preamble's lines on the encoded training set (its longest input, the inputs cut)."""

    def loss(self, model, batch):
        """The training loss of one batch (the recipe's step calls it under autocast)."""

    def evaluate(self, model, devs, tok, device, dtype):
        """{dev set: scores} of the model on every dev set."""

    def selection(self, scores):
        """The one dev score runs are ranked and chosen by."""

    def majority(self, train):
        """The class a model that learns nothing predicts, from the whole training set (None where there is none)."""

    def majority_scores(self, majority, devs):
        """What always predicting it scores on each dev set in selection_metric, in percent (None where none)."""

    def baseline(self, majority, devs):
        """The before-fine-tuning line's note on what always predicting it scores ('' where none)."""

    def format(self, scores, final=False):
        """The dev scores as an evaluation line prints them (final: as the FINAL line and the grid's table do)."""

    def extra_outputs(self, training, test_dir):
        """What a run's results record beyond its scores, as results entries (training: the run, part4/run/training_run.py
        TrainingRun; GLUE: its test predictions, with test_dir; SQuAD: the questions its windows leave uncovered)."""


# --- GLUE's metrics, the classification family's scoring, and the names the lines print them by ---

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


# --- The model's outputs on every row of a GLUE or SWAG dev or test set (scored by Classification.evaluate) ---

@torch.inference_mode()
def predict_logits(model, enc, device, dtype, batch_size):
    """The model's outputs on every row; inputs sorted by length so that each batch carries little padding. One
    autocast around every batch: in bf16 each weight is cast once for the whole set, not once a batch."""
    model.eval()
    out = None
    with autocast(device, dtype):
        for idx in batches_by_length(enc["input_ids"], batch_size):
            batch = collate(enc, idx, device)
            batch.pop("labels")
            logits = model(**batch).logits.float().cpu().numpy()
            out = np.zeros((len(enc["labels"]), logits.shape[1])) if out is None else out
            out[idx] = logits
    model.train()
    return out


# --- GLUE's published numbers, printed beside ours ---

QNLI_VERSION = "the paper's QNLI is v1; GLUE's QNLI is v2 today (the same questions, other sentence pairs)"


def paper_test_text(name):
    """'MCC 52.1', 'accuracy 84.6/83.4 (matched/mismatched)': Table 1's BERT-base number for a task, in words."""
    task = GLUE[name]
    if not task.paper_test:
        return "none: left out of Table 1 (for the server the paper predicted the majority class)"
    text = f"{METRIC_NAMES[task.selection_metric]} " + "/".join(f"{v:.1f}" for v in task.paper_test)
    return text + (" (matched/mismatched)" if len(task.paper_test) > 1 else "") + (f"; {QNLI_VERSION}" if name == "qnli"
                                                                                  else "")


# --- Tokenise once; batches are padded to their own longest input when they are made (dynamic padding) ---

def encode_glue(tok, examples, max_len):
    """GLUE: token ids cut at max_len, plus each input's full length before the cut. The token_type_ids column where
    the tokenizer gives one (BERT, ELECTRA); none where the model takes none (DistilBERT, RoBERTa)."""
    columns = list(zip(*[texts for texts, _ in examples]))
    full = tok(*columns, truncation=False, add_special_tokens=True)["input_ids"]
    enc = tok(*columns, truncation=True, max_length=max_len)
    segments = {"token_type_ids": enc["token_type_ids"]} if "token_type_ids" in enc else {}
    return {"input_ids": enc["input_ids"], **segments,
            "labels": [y for _, y in examples], "full_lengths": [len(x) for x in full], "targets": ("labels",)}


def encode_swag(tok, examples, max_len):
    """SWAG: four (sentence A, sentence B) pairs per example, each cut at max_len: input_ids is (4, tokens)."""
    first = [ctx for ctx, endings, _ in examples for _ in endings]
    second = [e for _, endings, _ in examples for e in endings]
    full = tok(first, second, truncation=False)["input_ids"]
    enc = tok(first, second, truncation=True, max_length=max_len)
    fours = [slice(4 * k, 4 * k + 4) for k in range(len(examples))]             # the four pairs of each example
    segments = {"token_type_ids": [enc["token_type_ids"][k] for k in fours]} if "token_type_ids" in enc else {}
    return {"input_ids": [enc["input_ids"][k] for k in fours], **segments,
            "labels": [y for _, _, y in examples], "full_lengths": [max(len(f) for f in full[k]) for k in fours],
            "targets": ("labels",)}


# --- The head families: what differs between the tasks (one class per output layer) ---

class Classification:
    """GLUE (paper §4.1): the pooled [CLS] vector C, logits = C W^T + b, K labels (1 for STS-B)."""
    model_class = AutoModelForSequenceClassification   # the checkpoint's own architecture (BERT: BertFor...)
    fresh = "random classifier layer"                # one head, in the words of the article's "before" line
    new_head, kept_head = "a new classifier layer", "the checkpoint's classifier layer, kept"    # the weights line's
    eval_batch_size = EVAL_BATCH_SIZE  # dev inputs per forward pass, unless --eval-batch-size
    grouped = False                    # training batches grouped by length (--group-by-length auto)
    hub = "nyu-mll/glue"
    stride = None                      # no windows: a whole input is cut at max_len (recorded as such)

    read, read_tests = staticmethod(read_glue), staticmethod(read_glue_tests)     # the Family's read and read_tests

    def __init__(self, name, max_len, eval_batch_size=None):
        task = GLUE[name]
        self.name, self.max_len = name, max_len
        self.eval_batch_size = eval_batch_size or type(self).eval_batch_size
        self.metrics, self.selection_metric = task.metrics, task.selection_metric   # runs chosen by Table 1's metric
        self.model_kwargs = {"num_labels": max(1, len(task.labels))}                # STS-B: one regression output
        self.label_names = HUB_LABELS.get(name)    # the saved model's id2label (none for STS-B's score)
        self.references = [f"{label}: {value}" for label, value in ((PAPER_DEV, task.paper_dev),
                           (PAPER_TEST, paper_test_text(name)), (HF_DEV, task.hf_dev)) if value]

    def data_problems(self, sources):
        if sources.data_dir is not None:
            return [] if os.path.isdir(sources.data_dir) else [f"--data-dir {sources.data_dir}: no such directory"]
        return [file_problem(None, "--data-dir", self.hub)]

    def encode(self, tok, train, devs):
        return encode_glue(tok, train, self.max_len), {name: encode_glue(tok, d, self.max_len) for name, d in devs.items()}

    @staticmethod
    def loss(model, batch):
        """GLUE and SWAG: the library's loss: cross-entropy over the labels (over the four endings for SWAG), the
        squared error for STS-B's one regression output."""
        return model(**batch).loss

    def describe(self, train):
        cut = sum(n > self.max_len for n in train["full_lengths"])
        return [f"longest training input: {max(train['full_lengths'])} tokens; inputs cut at {self.max_len}: {cut}"]

    def evaluate(self, model, devs, tok, device, dtype):
        """Each dev set's metrics from the model's outputs on every row: the predicted class (argmax), or STS-B's one
        regression output itself; with accuracy, the count of right answers (the FINAL line's (807/872))."""
        out = {}
        for name, enc in devs.items():
            logits = predict_logits(model, enc, device, dtype=dtype, batch_size=self.eval_batch_size)
            pred = logits[:, 0] if logits.shape[1] == 1 and "accuracy" not in self.metrics else logits.argmax(-1)
            scores = {m: METRICS[m](pred, enc["labels"]) for m in self.metrics}
            scores["n"] = len(pred)
            if "accuracy" in self.metrics:
                scores["correct"] = int(np.sum(np.asarray(pred) == np.asarray(enc["labels"])))
            out[name] = scores
        return out

    @property
    def selection_name(self):
        return METRIC_NAMES[self.selection_metric]

    def selection(self, scores):
        """The dev score runs are ranked and selected by: Table 1's metric, on the first dev set (MNLI: matched)."""
        return next(iter(scores.values()))[self.selection_metric]

    def majority(self, train):
        """The majority class of the whole training set (examples (texts, label)): the paper's WNLI submission, and
        what a model that learns nothing predicts (the first of any ties; None for STS-B's scores)."""
        if not GLUE[self.name].labels:
            return None
        return int(np.bincount([y for _, y in train], minlength=len(GLUE[self.name].labels)).argmax())

    def baseline(self, majority, devs):
        """'   (always the training set's majority class, equivalent (1): dev accuracy 0.6838)': what a model that learns
        nothing scores, the class by its name and as GLUE's file writes it (the whole training set's, in a cut run too)."""
        if "accuracy" not in self.metrics or majority is None:
            return ""
        gold = next(iter(devs.values()))["labels"]
        return (f"   (always the training set's majority class, {label_name(self.name, majority)}: dev accuracy "
                f"{accuracy([majority] * len(gold), gold):.4f})")

    def majority_scores(self, majority, devs):
        """What always predicting the majority class scores on each dev set, as the runs are scored (selection_metric,
        in percent): a chosen score at or below it learned nothing the dev set shows. None for STS-B's scores."""
        if majority is None:
            return None
        return [100 * METRICS[self.selection_metric]([majority] * len(d["labels"]), d["labels"]) for d in devs.values()]

    def format(self, scores, final=False):
        """'dev accuracy 0.9255  dev F1 0.9279', 'dev MCC (matched) 0.41', ...: every dev set and metric; final: joined
        by commas, with the count after the first accuracy ('dev accuracy 0.9255 (807/872), dev F1 0.9279')."""
        parts = []
        for name, s in scores.items():
            tag = "" if len(scores) == 1 else f" ({name.replace('dev_', '')})"
            for k, m in enumerate(self.metrics):
                count = f" ({s['correct']}/{s['n']})" if final and k == 0 and m == "accuracy" else ""
                parts.append(f"dev {METRIC_NAMES[m]}{tag} {s[m]:.4f}{count}")
        return (", " if final else "  ").join(parts)

    def extra_outputs(self, training, test_dir):
        """What a run writes beyond its scores: with --glue-submission (test_dir), its test-set predictions and the
        test sets' fingerprint (test_data: predictions of other test sets are never reused)."""
        if not test_dir:
            return {}
        return {"test_predictions": predict_tests(training, test_dir), "test_data": training.data.tests_fingerprint}

    def encode_tests(self, tok, tests):
        """Each test set encoded as a dev set is (labels 0: the server holds the real ones), with its indices."""
        return {name: {**encode_glue(tok, [(texts, 0) for _, texts in rows], self.max_len), "index": [i for i, _ in rows]}
                for name, rows in tests.items()}


class MultipleChoice(Classification):
    """SWAG (paper §4.4): one vector w scores the pooled C_k of each of the four endings, softmax across them."""
    model_class = AutoModelForMultipleChoice
    fresh = "random vector w"
    new_head, kept_head = "a new vector w", "the checkpoint's vector w, kept"
    hub = "allenai/swag"
    read = staticmethod(read_swag)
    metrics, selection_metric, model_kwargs = ("accuracy",), "accuracy", {}
    label_names = None                 # the library's LABEL_k
    references = ["paper, BERT-base dev (Table 4): accuracy 81.6"]

    def __init__(self, name, max_len, eval_batch_size=None):
        self.name, self.max_len = name, max_len
        self.eval_batch_size = eval_batch_size or type(self).eval_batch_size

    def encode(self, tok, train, devs):
        return (encode_swag(tok, train, self.max_len),
                {name: encode_swag(tok, d, self.max_len) for name, d in devs.items()})

    def majority(self, train):
        """The ending most often right in the whole training set (its position, 0-3)."""
        return int(np.bincount([y for _, _, y in train], minlength=4).argmax())

    def baseline(self, majority, devs):
        """'   (always the training set's majority class, 2: dev accuracy 0.2500)': always its most frequent ending."""
        gold = next(iter(devs.values()))["labels"]
        return (f"   (always the training set's majority class, {majority}: dev accuracy "
                f"{accuracy([majority] * len(gold), gold):.4f})")

    def describe(self, train):
        cut = sum(n > self.max_len for n in train["full_lengths"])
        return [f"longest (context, ending) pair: {max(train['full_lengths'])} tokens; examples with a pair cut at "
                f"{self.max_len}: {cut}"]


def span_extraction(name, max_len, stride, eval_batch_size=None):
    """SQuAD's family made for a run: SpanExtraction, which lives with SQuAD's windows and span search
    (part4/tasks/squad_spans.py) and is imported here, for a SQuAD task only: a GLUE or SWAG run imports nothing of
    SQuAD."""
    from part4.tasks.squad_spans import SpanExtraction

    return SpanExtraction(name, max_len, stride, eval_batch_size)


# Which family each task is in, each made by FAMILIES[task](task, max_len, ...): every GLUE task a classifier, SWAG
# multiple choice, SQuAD v1.1 and v2.0 span extraction (their windows' stride too)
FAMILIES = {**{name: Classification for name in GLUE}, "swag": MultipleChoice, "squad": span_extraction,
            "squad_v2": span_extraction}

# --- GLUE's test sets (--glue-submission): each run's predictions, as the GLUE server takes them ---

MAJORITY_CLASS = ("wnli",)           # the paper's WNLI submission: always the majority class


def predict_tests(training, test_dir):
    """A training run's predictions (part4/run/training_run.py TrainingRun) on its task's test sets, written as the
    GLUE server takes them into test_dir/<run name>/<file> (header index, prediction; labels by name). WNLI: the
    training set's majority class, as the paper's submission. Returns the files, relative to test_dir."""
    task, family, run, data = GLUE[training.family.name], training.family, training.run, training.data
    majority = data.majority if family.name in MAJORITY_CLASS else None     # of the whole training set
    files = []
    for server_file, enc in data.tests.items():
        out = predict_logits(training.model, enc, run.device, dtype=run.autocast_dtype, batch_size=family.eval_batch_size)
        labels = prediction_strings(out, task, majority)
        path = os.path.join(test_dir, run.name, server_file)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, submission_text(enc["index"], labels))
        files.append(os.path.relpath(path, test_dir))
        training.log.say(f"test predictions: {server_file}, {len(labels)} rows -> {path}"
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
