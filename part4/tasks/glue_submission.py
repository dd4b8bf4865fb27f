"""The GLUE server's files (--glue-submission): each run's predictions on its task's test sets, then the chosen run's of
every task copied together and zipped, ready to upload."""

import os
import sys
import zipfile

import numpy as np

from part4.command_line.errors import not_a_script
from part4.output.results_files import portable, replace_atomically, write_atomic
from part4.run.records import runs_folder
from part4.tasks.glue_tasks import TASKS, label_name
from part4.tasks.metrics import predict_logits

# --- Each run: its predictions on its task's test sets ---

MAJORITY_CLASS = ("wnli",)           # the paper's WNLI submission: always the majority class


def predict_tests(run, test_dir):
    """The run's predictions on its task's test sets, written as the GLUE server takes them into
    test_dir/<run name>/<file> (header index, prediction; labels by name). WNLI: the training set's majority class,
    as the paper's submission. Returns the files, relative to test_dir."""
    task, family = TASKS[run.family.name], run.family
    majority = run.data.majority if family.name in MAJORITY_CLASS else None     # of the whole training set
    files = []
    for server_file, enc in run.data.tests.items():
        out = predict_logits(run.model, enc, run.device, dtype=run.dtype, batch_size=family.eval_batch_size)
        labels = prediction_strings(out, task, majority)
        path = os.path.join(test_dir, run.report.name, server_file)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, submission_text(enc["index"], labels))
        files.append(os.path.relpath(path, test_dir))
        run.report.say(f"test predictions: {server_file}, {len(labels)} rows -> {path}"
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


# --- The chosen run of every task: its files copied together and zipped (the glue command's end) ---

def write_submission(folder, rows, report):
    """The submitted run's files of every task copied into folder, their rows checked against the full test sets,
    and folder/submission.zip holding them, ready to upload."""
    runs_dir, written = runs_folder(folder), {}
    for t, row in rows.items():
        expected = {f: n for _, f, n in TASKS[t].tests}
        for rel in row["submitted"]["test_predictions"]:
            name = os.path.basename(rel)
            with open(os.path.join(runs_dir, rel), encoding="utf-8") as f:
                text = f.read()
            write_atomic(os.path.join(folder, name), text)
            n = text.count("\n") - 1
            written[name] = {"rows": n, "run": row["submitted"]["name"], "full_test_set": n == expected[name]}
            report.say(f"submission {name}: {n} rows from {row['submitted']['name']}"
                       + (" (the training set's majority class, not the model: the paper's WNLI submission)"
                          if t in MAJORITY_CLASS else "")
                       + ("" if n == expected[name] else f"   WARNING: the GLUE server's test set has {expected[name]} "
                                                         f"rows: it will not take this file"))
    every = [f for t in TASKS for _, f, _ in TASKS[t].tests]
    missing = [f for f in every if f not in written]
    zip_path = os.path.join(folder, "submission.zip")
    replace_atomically(zip_path, lambda tmp: write_zip(tmp, folder, [name for name in every if name in written]))
    report.say(f"submission.zip: {len(written)} of {len(every)} files -> {zip_path}"
               + (f"; missing {', '.join(missing)} (the server needs all {len(every)})" if missing else ", ready to upload"))
    return {"files": written, "missing": missing, "zip": portable(zip_path)}


def write_zip(path, folder, names):
    """The files names of folder, compressed into the zip file path (each under its own name)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in names:
            z.write(os.path.join(folder, name), name)


if __name__ == "__main__":
    sys.exit(not_a_script("part4/tasks/glue_submission.py", "python bert_part4_finetune.py glue --glue-submission DIR"))
