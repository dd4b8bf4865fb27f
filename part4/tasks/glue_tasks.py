"""GLUE's nine tasks (paper §4.1, B.1): their folders, columns and labels, Table 1's metric and number, their test files,
and the published numbers printed beside ours."""

import sys
from dataclasses import dataclass

from part4.command_line.errors import not_a_script
from part4.paper.article import TABLE1_BASE
from part4.paper.article_labels import PAPER_DEV, PAPER_TEST
from part4.tasks.metrics import METRIC_NAMES


@dataclass(frozen=True)
class Task:
    """One GLUE task: where its files are, how it is labelled and scored, and the published numbers for it."""
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


TASKS = {       # paper_test: Table 1's BERT-base row (part4/paper/article.py)
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


if __name__ == "__main__":
    sys.exit(not_a_script("part4/tasks/glue_tasks.py", "python bert_part4_finetune.py glue (--help says more)"))
