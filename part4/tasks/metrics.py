"""GLUE's metrics (accuracy, F1, MCC, Pearson, Spearman) and the names the lines print them by, and a model's outputs on
every row of a GLUE or SWAG dev or test set (scored by part4/tasks/families.py's Classification.evaluate)."""

import math

import numpy as np
import torch

from part4.data.batches import batches_by_length, collate
from part4.models.loading import autocast


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


# --- the model's outputs on every row of a dev or test set ---

@torch.inference_mode()
def predict_logits(model, enc, device, dtype, batch_size):
    """The model's outputs on every row; inputs sorted by length so that each batch carries little padding."""
    model.eval()
    out = None
    for idx in batches_by_length(enc["input_ids"], batch_size):
        batch = collate(enc, idx, device)
        batch.pop("labels")
        with autocast(device, dtype):
            logits = model(**batch).logits.float().cpu().numpy()
        out = np.zeros((len(enc["labels"]), logits.shape[1])) if out is None else out
        out[idx] = logits
    model.train()
    return out

