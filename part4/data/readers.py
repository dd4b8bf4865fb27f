"""Where each task's data comes from and how it is read: GLUE's TSV files (and MNLI's JSON lines), GLUE's test files, SWAG's
CSV files, SQuAD's JSON (through part4/tasks/squad_spans.py), or the Hub's datasets; a malformed file stops with one line."""

import csv
import json
import os
import sys
from dataclasses import dataclass

from part4.command_line.errors import Fatal, not_a_script
from part4.models.hub import load_hub_dataset
from part4.tasks import squad_spans
from part4.tasks.glue_tasks import HUB_LABELS, LABEL_COLUMN, TASKS, TEST_INDEX


@dataclass(frozen=True)
class Sources:
    """Where a task's data comes from: local files or folders, else the Hub (read whole: prepare cuts it)."""
    task: str
    data_dir: str = None               # GLUE's or SWAG's folder
    train_data: str = None             # SQuAD's training JSON
    dev_data: str = None               # SQuAD's dev JSON


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


def read_glue_tests(sources):
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


# --- SQuAD: part4/tasks/squad_spans.py's read_squad (official JSON, or the Hub), as bert_part4_squad.py reads it ---

SQUAD_VERSION = {"squad": "1.1", "squad_v2": "2.0"}


def read_squad_task(sources):
    version = SQUAD_VERSION[sources.task]
    train = squad_spans.read_squad(sources.train_data, version, "--train-data", split="train")
    dev = squad_spans.read_squad(sources.dev_data, version, "--dev-data")
    return train, {"dev": dev}


if __name__ == "__main__":
    sys.exit(not_a_script("part4/data/readers.py", "python bert_part4_finetune.py <task> (--help lists the tasks)"))
