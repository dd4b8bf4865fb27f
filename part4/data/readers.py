"""Where each task's data comes from and how it is read: GLUE's nine tasks (their folders, columns and labels) and their
TSV files (and MNLI's JSON lines), GLUE's test files, SWAG's CSV files, SQuAD's official JSON, or the Hub's datasets; a
malformed file stops with one line."""

import csv
import json
import os
from dataclasses import dataclass

from huggingface_hub import constants as hub_constants

from part4.command_line.declarations import Fatal
from part4.models.hub import hub_offline, hub_reachable
from part4.paper.article import HF_DEV_NUMBERS, PAPER_DEV_NUMBERS, TABLE1_BASE


@dataclass(frozen=True)
class Sources:
    """Where a task's data comes from: local files or folders, else the Hub (read whole: part4/run/command.py read_data
    cuts it)."""
    task: str
    data_dir: str = None               # GLUE's or SWAG's folder
    train_data: str = None             # SQuAD's training JSON
    dev_data: str = None               # SQuAD's dev JSON


# --- The Hub's datasets: read from it, or from the local cache ---

def dataset_cached(name):
    """Is the Hub dataset `name` in a local cache (the datasets cache, or the Hub's download cache)?"""
    import datasets

    return (os.path.isdir(os.path.join(datasets.config.HF_DATASETS_CACHE, name.replace("/", "___")))
            or os.path.isdir(os.path.join(hub_constants.HF_HUB_CACHE, "datasets--" + name.replace("/", "--"))))


def file_problem(path, flag, hub_name=None):
    """Why a data file cannot be read, or None; with no path, whether the Hub dataset can be fetched."""
    if path is None:
        if hub_name and hub_offline() and not dataset_cached(hub_name):
            return (f"HF_HUB_OFFLINE is set and the dataset '{hub_name}' is not in the local datasets cache; pass "
                    f"local files with {flag}")
        if hub_name and not hub_offline() and not hub_reachable():
            return (f"the Hugging Face Hub cannot be reached to download the dataset '{hub_name}'; pass local files "
                    f"with {flag} (or set HF_HUB_OFFLINE=1 to use a local datasets cache)")
        return None
    return None if os.path.isfile(os.path.expanduser(path)) else f"{flag} {path}: no such file"


def load_hub_dataset(name, config, split, flag):
    """datasets.load_dataset(name, config, split=split), with one clear line when the Hub is out of reach.

    With HF_HUB_OFFLINE=1 the local datasets cache is used; otherwise an unreachable Hub fails at once.
    """
    problem = file_problem(None, flag, name)
    if problem:
        raise Fatal(problem)
    import datasets

    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as e:  # datasets raises many kinds (ConnectionError, OSError, DatasetNotFoundError)
        raise Fatal(f"could not load the dataset '{name}' ({type(e).__name__}: {str(e).splitlines()[0]}); "
                    f"pass local files with {flag}")


# --- GLUE's nine tasks (paper §4.1, B.1): their folders, columns and labels, Table 1's metric and number ---

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


GLUE = {       # GLUE's nine tasks, in part4/paper/recipe.py's GLUE_TASKS order; the published numbers (paper_test,
               # paper_dev, hf_dev) from part4/paper/article.py
    "cola": Task(folder="CoLA", columns=(3,), hub_columns=("sentence",), labels=("0", "1"), dev_files=("dev",),
                 metrics=("accuracy", "mcc"), selection_metric="mcc", tests=(("test", "CoLA.tsv", 1063),),
                 paper_test=TABLE1_BASE.get("cola", ()), hf_dev=HF_DEV_NUMBERS["cola"]),
    "sst2": Task(folder="SST-2", columns=("sentence",), hub_columns=("sentence",), labels=("0", "1"), dev_files=("dev",),
                 metrics=("accuracy", "f1"), selection_metric="accuracy", tests=(("test", "SST-2.tsv", 1821),),
                 paper_test=TABLE1_BASE.get("sst2", ()), paper_dev=PAPER_DEV_NUMBERS["sst2"], hf_dev=HF_DEV_NUMBERS["sst2"]),
    "mrpc": Task(folder="MRPC", columns=("#1 String", "#2 String"), hub_columns=("sentence1", "sentence2"), labels=("0", "1"),
                 dev_files=("dev",), metrics=("accuracy", "f1"), selection_metric="f1", tests=(("test", "MRPC.tsv", 1725),),
                 paper_test=TABLE1_BASE.get("mrpc", ()), paper_dev=PAPER_DEV_NUMBERS["mrpc"], hf_dev=HF_DEV_NUMBERS["mrpc"]),
    "stsb": Task(folder="STS-B", columns=("sentence1", "sentence2"), hub_columns=("sentence1", "sentence2"), labels=(),
                 dev_files=("dev",), metrics=("pearson", "spearman"), selection_metric="spearman",
                 tests=(("test", "STS-B.tsv", 1379),), paper_test=TABLE1_BASE.get("stsb", ()),
                 hf_dev=HF_DEV_NUMBERS["stsb"]),
    "qqp": Task(folder="QQP", columns=("question1", "question2"), hub_columns=("question1", "question2"), labels=("0", "1"),
                dev_files=("dev",), metrics=("accuracy", "f1"), selection_metric="f1", tests=(("test", "QQP.tsv", 390965),),
                paper_test=TABLE1_BASE.get("qqp", ()), hf_dev=HF_DEV_NUMBERS["qqp"]),
    "mnli": Task(folder="MNLI", columns=("sentence1", "sentence2"), hub_columns=("premise", "hypothesis"),
                 labels=("entailment", "neutral", "contradiction"), dev_files=("dev_matched", "dev_mismatched"),
                 metrics=("accuracy",), selection_metric="accuracy",
                 tests=(("test_matched", "MNLI-m.tsv", 9796), ("test_mismatched", "MNLI-mm.tsv", 9847),
                        ("diagnostic", "AX.tsv", 1104)),
                 paper_test=TABLE1_BASE.get("mnli", ()), paper_dev=PAPER_DEV_NUMBERS["mnli"], hf_dev=HF_DEV_NUMBERS["mnli"]),
    "qnli": Task(folder="QNLI", columns=("question", "sentence"), hub_columns=("question", "sentence"),
                 labels=("entailment", "not_entailment"), dev_files=("dev",), metrics=("accuracy",),
                 selection_metric="accuracy", tests=(("test", "QNLI.tsv", 5463),), paper_test=TABLE1_BASE.get("qnli", ()),
                 paper_dev=PAPER_DEV_NUMBERS["qnli"], hf_dev=HF_DEV_NUMBERS["qnli"]),
    "rte": Task(folder="RTE", columns=("sentence1", "sentence2"), hub_columns=("sentence1", "sentence2"),
                labels=("entailment", "not_entailment"), dev_files=("dev",), metrics=("accuracy",), selection_metric="accuracy",
                tests=(("test", "RTE.tsv", 3000),), paper_test=TABLE1_BASE.get("rte", ()), hf_dev=HF_DEV_NUMBERS["rte"]),
    "wnli": Task(folder="WNLI", columns=("sentence1", "sentence2"), hub_columns=("sentence1", "sentence2"), labels=("0", "1"),
                 dev_files=("dev",), metrics=("accuracy",), selection_metric="accuracy", tests=(("test", "WNLI.tsv", 146),),
                 paper_test=TABLE1_BASE.get("wnli", ()), hf_dev=HF_DEV_NUMBERS["wnli"]),
}


TEST_INDEX = {"qqp": "id"}              # the column GLUE's test files are indexed by: `index`, but QQP's `id`
LABEL_COLUMN = {"cola": 1, "sst2": "label", "mrpc": "Quality", "stsb": "score", "qqp": "is_duplicate",
                "mnli": "gold_label", "qnli": "label", "rte": "label", "wnli": "label"}

# The Hub's name of each of our labels (GLUE[name].labels, GLUE's TSV strings), in our order: the Hub dataset's
# labels are read by name, so a dataset whose label order differs from ours is still read right.
HUB_LABELS = {"cola": ("unacceptable", "acceptable"), "sst2": ("negative", "positive"),
              "mrpc": ("not_equivalent", "equivalent"), "qqp": ("not_duplicate", "duplicate"),
              "mnli": ("entailment", "neutral", "contradiction"), "qnli": ("entailment", "not_entailment"),
              "rte": ("entailment", "not_entailment"), "wnli": ("not_entailment", "entailment")}


def label_name(name, k):
    """'equivalent (1)', 'entailment': label k of a task by the Hub's name, and as GLUE's file writes it where that is a
    number."""
    raw, named = GLUE[name].labels[k], HUB_LABELS[name][k]
    return raw if raw == named else f"{named} ({raw})"


# --- GLUE: the TSV files of GLUE's download script, or the Hub dataset ---

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
    task = GLUE[task_name]
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
    for name in GLUE[sources.task].dev_files:
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
    folder = "diagnostic" if split == "diagnostic" else GLUE[sources.task].folder
    return os.path.join(sources.data_dir, folder, split + ".tsv")


def test_problems(sources):
    """Every reason the test files of a task in sources.data_dir cannot be read (none, from the Hub)."""
    if sources.data_dir is None:
        return []
    problems = []
    for split, _, _ in GLUE[sources.task].tests:
        try:
            read_test_tsv(test_path(sources, split), GLUE[sources.task], sources.task)
        except Fatal as e:
            problems.append(str(e))
    return problems


def read_glue_tests(sources):
    """Every test set of a GLUE task, by the server's file name: {"CoLA.tsv": [(index, texts), ...]}; MNLI has
    three (matched, mismatched, and the diagnostic set AX, which the MNLI model predicts)."""
    task, out = GLUE[sources.task], {}
    for split, server_file, _ in task.tests:
        if sources.data_dir is None:
            config, hub_split = ("ax", "test") if split == "diagnostic" else (sources.task, split)
            rows = load_hub_dataset("nyu-mll/glue", config, hub_split, "--data-dir")
            out[server_file] = [(str(r["idx"]), [r[c] for c in task.hub_columns]) for r in rows]
        else:
            out[server_file] = read_test_tsv(test_path(sources, split), task, sources.task)
    return out


# --- SWAG: the official train.csv / val.csv, or the Hub dataset allenai/swag ---

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


# --- SQuAD: the official JSON, or the Hub datasets ---

HUB_DATASETS = {"1.1": "rajpurkar/squad", "2.0": "rajpurkar/squad_v2"}


def read_squad_json(path, version, flag):
    """Questions in file order: dicts with id, question, context, golds (texts), starts (their answer_start),
    impossible."""
    if not os.path.isfile(path):
        raise Fatal(f"{flag} {path}: no such file")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)["data"]
        examples = [{"id": qa["id"], "question": qa["question"], "context": par["context"],
                     "golds": [a["text"] for a in qa["answers"]], "starts": [a["answer_start"] for a in qa["answers"]],
                     "impossible": bool(qa.get("is_impossible", False)),
                     "v2": "is_impossible" in qa}
                    for doc in data for par in doc["paragraphs"] for qa in par["qas"]]
    except (ValueError, KeyError, TypeError) as e:
        raise Fatal(f"{flag} {path}: not an official SQuAD JSON file ({type(e).__name__}: {e})")
    if not examples:
        raise Fatal(f"{flag} {path}: holds no questions")
    is_v2 = any(ex["v2"] for ex in examples)
    if version == "2.0" and not is_v2:
        raise Fatal(f"{flag} {path}: looks like SQuAD v1.1 (no 'is_impossible' field); pass a v2.0 file")
    if version == "1.1" and is_v2:
        raise Fatal(f"{flag} {path}: looks like SQuAD v2.0 (it has 'is_impossible'); pass a v1.1 file")
    return examples


def read_squad(path, version, flag, split="validation"):
    if path:
        return read_squad_json(path, version, flag)
    rows = load_hub_dataset(HUB_DATASETS[version], None, split, flag)
    return [{"id": r["id"], "question": r["question"], "context": r["context"], "golds": r["answers"]["text"],
             "starts": r["answers"]["answer_start"], "impossible": not r["answers"]["text"], "v2": version == "2.0"}
            for r in rows]


SQUAD_VERSION = {"squad": "1.1", "squad_v2": "2.0"}


def read_squad_task(sources):
    version = SQUAD_VERSION[sources.task]
    train = read_squad(sources.train_data, version, "--train-data", split="train")
    dev = read_squad(sources.dev_data, version, "--dev-data")
    return train, {"dev": dev}
