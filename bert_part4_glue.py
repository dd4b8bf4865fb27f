"""BERT, explained - Part 4: the paper's GLUE row in one command (§4.1, Table 1, B.1).

    python bert_part4_finetune.py glue                          # every task; the best of lr 5e-5..2e-5 on dev
    python bert_part4_finetune.py glue 2e-5 --tasks cola,mrpc   # one learning rate, two tasks, no selection
    python bert_part4_finetune.py glue --glue-submission DIR    # and the files the GLUE server takes

The paper (§4.1): "We use a batch size of 32 and fine-tune for 3 epochs over the data for all GLUE tasks. For each
task, we selected the best fine-tuning learning rate (among 5e-5, 4e-5, 3e-5, and 2e-5) on the Dev set." WNLI is
left out of Table 1's average, and "for our GLUE submission, we always predicted the majority class" on it. Table
1's numbers are test-set scores from the GLUE server: one submission per model.

Every run is an ordinary run of bert_part4_finetune.py (its own log and JSON, skipped when its results exist for
the same settings, resumable, spread over processes under torchrun). This file chooses each task's learning rate in
Table 1's metric (MCC for CoLA, F1 for MRPC and QQP, Spearman for STS-B, accuracy otherwise; the mean over seeds
with --seeds), writes results/part4_glue_table.{log,json,md} with the published numbers beside ours, and with
--glue-submission the test-set predictions of each task's chosen run. Each run predicts its test sets when it
ends, so no model has to be kept to reach the test set after the choice (a BERT-base is 440 MB; the paper's grid
is 36 runs); the cost is one forward pass over the test sets per run.
"""

import argparse
import dataclasses
import json
import os
import statistics
import zipfile

import numpy as np

from bert_part4_common import Fatal, Report, check_writable_dir, portable, write_atomic
from bert_part4_runs import Job, existing_result, lr_tag, results_path, settings_diff
from bert_part4_tasks import (
    HF_DEV,
    METRIC_NAMES,
    PAPER_AVERAGE,
    PAPER_DEV,
    PAPER_TEST,
    QNLI_VERSION,
    TASKS,
    Sources,
    paper_test_text,
    predict_logits,
    read_tests,
)

ONCE_PER_EPOCH = ("mnli", "qqp")     # dev sets of 9,815 + 9,832 and 40,430 pairs: ~30 evaluations would cost 20-40%
MAJORITY_CLASS = ("wnli",)           # the paper's WNLI submission: always the majority class
AVERAGED = [name for name in TASKS if name != "wnli"]   # Table 1's average: WNLI left out


# --- Which tasks: --tasks, and those whose files are in --data-dir ---

def task_list(text):
    """--tasks cola,mrpc -> ['cola', 'mrpc'] in GLUE's order; every task by default; an unknown one is refused."""
    if text is None:
        return list(TASKS)
    names = [t.strip().lower().replace("-", "") for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in TASKS]
    if unknown or not names:
        raise Fatal(f"--tasks {text}: unknown GLUE task(s) {', '.join(unknown) or '(none given)'}; choose from "
                    f"{', '.join(TASKS)}")
    return [t for t in TASKS if t in names]


def missing_data(name, data_dir):
    """Why a task cannot run from data_dir (its training or dev file is absent), or None; the Hub has every task."""
    if data_dir is None:
        return None
    task = TASKS[name]
    ext = (".tsv", ".jsonl") if name == "mnli" else (".tsv",)             # MNLI also as JSON lines (../shared/data)
    wanted = [("train", ext), (task.dev_files[0], ext)]
    absent = [split + ext[0] for split, ext in wanted
              if not any(os.path.isfile(os.path.join(data_dir, task.folder, split + e)) for e in ext)]
    return f"no {', '.join(f'{task.folder}/{f}' for f in absent)} in --data-dir" if absent else None


def runs_folder(submission):
    """Where each run writes its test-set predictions: DIR/runs/<run name>/ (None without --glue-submission)."""
    return os.path.join(submission, "runs") if submission else None


def table_name(args):
    """part4_glue_table[_lr<lr>][_bs<b>][_ep<e>][_grid_a3][_seeds<N>][_random-init][_<tag>]: what tells two tables
    apart."""
    name = "part4_glue_table" + ("" if args.grid else f"_lr{lr_tag(args.lr)}")
    if args.grid != "a3":
        name += (f"_bs{args.batch_size}" if args.batch_size != 32 else "") + (f"_ep{args.epochs}" if args.epochs != 3
                                                                              else "")
    name += ("_grid_a3" if args.grid == "a3" else "") + (f"_seeds{args.seeds}" if args.seeds else "")
    return name + ("_random-init" if args.init == "random" else "") + (f"_{args.run_tag}" if args.run_tag else "")


# --- The command: every task's runs, the choice on dev, the table, the test-server files ---

def glue_table(args, argv, run_task, procs, device):
    """Every task's runs (run_task(args of one task) -> results, family, config), the best setting of each on
    dev, the table beside Table 1, and with --glue-submission the server's files. Before any training: which tasks
    have data, the submission folder and the test files in --data-dir, a table of other settings in the way; each
    task's own inputs (its data, results of other settings) are checked before its first run."""
    absent = {t: why for t in args.tasks if (why := missing_data(t, args.data_dir))}
    run = [t for t in args.tasks if t not in absent]
    if args.data_dir is not None and not os.path.isdir(args.data_dir):
        raise Fatal(f"--data-dir {args.data_dir}: no such directory")
    if not run:
        raise Fatal(f"no GLUE task can run: {'; '.join(f'{t}: {why}' for t, why in absent.items())}")
    if args.glue_submission:
        check_writable_dir(args.glue_submission, "--glue-submission")
        for t in run if args.data_dir else []:           # the test files' columns, before any training
            read_tests(Sources(t, args.data_dir))
    report = Report(table_name(args), args.results_dir, quiet=not procs.main)
    settings = table_settings(args, run)
    check_table(os.path.join(args.results_dir, report.name + ".json"), settings)
    report.say(f"GLUE (paper §4.1): {len(run)} of {len(args.tasks)} tasks run ({', '.join(run)})"
               + (f"; not run: {'; '.join(f'{t} ({why})' for t, why in absent.items())}" if absent else ""))
    report.say(selection_line(args))
    rows = {}
    for t in run:
        task_args = argparse.Namespace(**{**vars(args), "task": t, "evals_flag": args.evals_flag if args.evals_flag
                                          is not None else (0 if t in ONCE_PER_EPOCH else None)})
        results, family, config = run_task(task_args, summarise=False, report=report)
        rows[t] = choose(results, family, config) if procs.main else None
    if not procs.main:
        return 0
    payload = {**table(rows, absent, args, report), "settings": settings}
    if args.glue_submission:
        payload["submission"] = write_submission(args.glue_submission, rows, report)
    report.save(payload, args=args, argv=argv, device=device)
    write_atomic(os.path.join(args.results_dir, report.name + ".md"), markdown(payload, args))
    return 0


def table_settings(args, run):
    """What the table's numbers depend on beyond its name: a table of other settings is never replaced."""
    keys = ("lr", "grid", "batch_size", "epochs", "seeds", "seed", "init", "max_len", "warmup", "weight_decay", "clip",
            "max_train_examples", "max_dev_examples", "group_by_length", "dtype", "run_tag")
    return {"tasks": run, "model": portable(args.model), "data_dir": portable(args.data_dir),
            **{k: getattr(args, k) for k in keys}}


def check_table(path, settings):
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as f:
        saved = json.load(f).get("settings")
    if saved != settings:
        diff = settings_diff(saved, settings)
        raise Fatal(f"{portable(path)}: a table of other settings ({diff}); refusing to overwrite it: pass --run-tag or "
                    f"--results-dir, or delete it")


def selection_line(args):
    if args.grid is None:
        return (f"learning rate {lr_tag(args.lr)} for every task, as given: no selection (paper: the best of 5e-5, "
                f"4e-5, 3e-5, 2e-5 on dev); batch {args.batch_size}, {args.epochs} epochs")
    what = "learning rate (5e-5, 4e-5, 3e-5, 2e-5)" if args.grid == "glue" else "setting of grid a3 (paper A.3)"
    return (f"the best {what} of each task, chosen on dev in Table 1's metric (MCC for CoLA, F1 for MRPC and QQP, "
            f"Spearman for STS-B, accuracy otherwise)" + (f", the mean over {args.seeds} seeds" if args.seeds else "")
            + (f"; batch {args.batch_size}, {args.epochs} epochs" if args.grid == "glue" else ""))


def scores(family, final):
    """A run's dev score(s) in Table 1's metric, in percent: one per dev set (MNLI: matched, mismatched)."""
    return [100 * s[family.selection_metric] for s in final.values()]


def choose(results, family, config):
    """The setting with the best mean dev score in Table 1's metric (the first of any ties, in the grid's order),
    its runs (one per seed), the best of them on dev (whose test predictions are submitted), and every setting's
    score."""
    settings = {}
    for r in results:
        settings.setdefault((r["batch_size"], r["lr"], r["epochs"]), []).append(r)
    mean = {key: statistics.mean(family.selection(r["final"]) for r in runs) for key, runs in settings.items()}
    (batch, lr, epochs), runs = max(settings.items(), key=lambda kv: mean[kv[0]])
    dev = np.mean([scores(family, r["final"]) for r in runs], axis=0).tolist()
    return {"lr": lr, "batch_size": batch, "epochs": epochs, "metric": family.selection_metric, "dev": dev,
            "runs": [r["name"] for r in runs], "submitted": max(runs, key=lambda r: family.selection(r["final"])),
            "settings": [{"lr": lr_, "batch_size": b, "epochs": e, "dev": 100 * mean[(b, lr_, e)]}
                         for (b, lr_, e) in settings],
            "other_init": other_init(config, family, runs)}


def other_init(config, family, runs):
    """The same setting's dev score from the other initialisation (random weights beside pre-trained ones, or the
    reverse), where its runs exist for the same settings; None where they do not."""
    other = dataclasses.replace(config, init="pretrained" if config.init == "random" else "random")
    found = []
    for r in runs:
        settings = {k: v for k, v in r["settings"].items() if k != "init"}
        settings |= {"init": "random"} if other.init == "random" else {}
        done = existing_result(results_path(other, Job(r["lr"], r["batch_size"], r["epochs"], r["seed"])), settings,
                               ignore=("processes", "evals"))           # evaluations change no final number
        if done is None:
            return None
        found.append(scores(family, done["final"]))
    return {"init": other.init, "dev": np.mean(found, axis=0).tolist()}


# --- The table: ours beside Table 1, each number labelled with what it is ---

def columns(rows):
    """Table 1's nine columns (MNLI matched and mismatched apart, WNLI left out) from our rows: {column: score}."""
    out = {}
    for t in AVERAGED:
        if rows.get(t):
            names = ["mnli-m", "mnli-mm"] if t == "mnli" else [t]
            out |= dict(zip(names, rows[t]["dev"]))
    return out


def average(values):
    """Table 1's average: the plain mean of its columns (paper Table 1, BERT-base: 79.6 over nine columns)."""
    return sum(values) / len(values)


def paper_columns():
    """Table 1's BERT-base row as {column: test score}: the nine columns its average is taken over."""
    return columns({t: {"dev": TASKS[t].paper_test} for t in AVERAGED})


def setting(row, args):
    """The chosen learning rate ('2e-5'); under --grid a3 with its batch size and epochs ('2e-5/16/4')."""
    return lr_tag(row["lr"]) + (f"/{row['batch_size']}/{row['epochs']}" if args.grid == "a3" else "")


def fmt(values):
    return "/".join(f"{v:.2f}" for v in values) if values else "-"


def table(rows, absent, args, report):
    """The table in the log, and its numbers for the JSON."""
    ours_label = "random init" if args.init == "random" else "ours"
    other_label = "pre-trained" if args.init == "random" else "random init"
    report.say("")
    report.say(f"{'task':<6} {'metric':<9} {'lr':<6} {ours_label + ' (dev)':<17} {other_label + ' (dev)':<17} "
               f"{'paper Table 1 (test)':<21} {'paper dev acc':<13} HF bert-base-cased (dev)")
    out = {}
    for t, task in TASKS.items():
        row = rows.get(t)
        if t in absent or row is None:
            why = absent.get(t, "not in --tasks")
            report.say(f"{task.folder:<6} not run: {why}")
            out[t] = {"run": False, "why": why}
            continue
        other = row["other_init"]["dev"] if row["other_init"] else None
        report.say(f"{task.folder:<6} {METRIC_NAMES[row['metric']]:<9} {setting(row, args):<6} {fmt(row['dev']):<17} "
                   f"{fmt(other):<17} {'/'.join(f'{v:.1f}' for v in task.paper_test) or '-':<21} "
                   f"{task.paper_dev or '-':<13} {task.hf_dev}")
        out[t] = {"run": True, **{k: v for k, v in row.items() if k != "submitted"},
                  "submitted_run": row["submitted"]["name"], "paper_test": paper_test_text(t),
                  "paper_dev": task.paper_dev, "hf_dev": task.hf_dev}
    result = average_row(rows, ours_label, report)
    for line in notes(args):
        report.say(line)
    return {"tasks": out, "not_run": absent, "average": result, "selection": selection_line(args),
            "model": portable(args.model), "init": args.init, "references": {"paper_test": PAPER_TEST,
                                                                             "paper_dev": PAPER_DEV, "hf_dev": HF_DEV}}


def average_row(rows, ours_label, report):
    """Our average of Table 1's nine columns beside the paper's 79.6; where a task was not run, not computed, but the
    average over the columns run beside Table 1's over the same columns."""
    ours, paper = columns(rows), paper_columns()
    missing = [t + (" (no mismatched dev set)" if rows.get(t) else "") for t in AVERAGED
               if not rows.get(t) or (t == "mnli" and len(rows[t]["dev"]) < 2)]
    result = {"ours": average(list(ours.values())) if not missing else None, "paper": PAPER_AVERAGE,
              "paper_from_its_columns": average(list(paper.values())), "missing": missing}
    if not missing:
        report.say(f"average of Table 1's nine columns (WNLI left out, MNLI matched and mismatched apart): "
                   f"{ours_label} {result['ours']:.2f} (dev)   [paper Table 1, BERT-base: {PAPER_AVERAGE} (test)]")
        return result
    same = {c: paper[c] for c in ours}
    result |= {"ours_on_columns_run": average(list(ours.values())) if ours else None, "columns_run": list(ours),
               "paper_on_columns_run": average(list(same.values())) if same else None}
    report.say(f"average of Table 1's columns (WNLI left out): not computed, {', '.join(missing)} not run"
               + (f"; over the {len(ours)} columns run ({', '.join(ours)}): {ours_label} {result['ours_on_columns_run']:.2f}"
                  f" (dev)   [paper Table 1 on the same columns: {result['paper_on_columns_run']:.2f} (test)]" if ours else ""))
    return result


def notes(args):
    return ["notes: ours are dev scores; Table 1's are test scores from the GLUE server (hidden labels, one submission "
            "per model): not the same quantity, and a learning rate chosen on dev flatters the dev score a little",
            f"  QNLI: {QNLI_VERSION}; paper dev: Table 5's BERT-base dev accuracies (MNLI: matched); HF: {HF_DEV}",
            f"  model {portable(args.model)} (the paper's row: BERT-base, bert-base-uncased), init {args.init}"]


def markdown(payload, args):
    """The table as Markdown, which a code host renders."""
    ours = "random init" if args.init == "random" else "ours"
    lines = [f"# GLUE (paper §4.1): {payload['selection']}", "",
             f"| task | metric | lr | {ours} (dev) | {'pre-trained' if args.init == 'random' else 'random init'} (dev) "
             f"| paper Table 1, BERT-base (test) | paper, BERT-base (dev accuracy) | HF, bert-base-cased (dev) |",
             "|---|---|---|---|---|---|---|---|"]
    for t, row in payload["tasks"].items():
        if not row["run"]:
            lines.append(f"| {TASKS[t].folder} | not run: {row['why']} | | | | {paper_test_text(t)} | "
                         f"{TASKS[t].paper_dev or '-'} | {TASKS[t].hf_dev} |")
            continue
        other = row["other_init"]["dev"] if row["other_init"] else None
        lines.append(f"| {TASKS[t].folder} | {METRIC_NAMES[row['metric']]} | {setting(row, args)} | {fmt(row['dev'])} | "
                     f"{fmt(other)} | {paper_test_text(t)} | {row['paper_dev'] or '-'} | {row['hf_dev']} |")
    a = payload["average"]
    lines += ["", "Average of Table 1's nine columns (WNLI left out): " + (
        f"{ours} {a['ours']:.2f} (dev); paper {a['paper']} (test)." if a["ours"] is not None else
        f"not computed ({', '.join(a['missing'])} not run)" + (
            f"; over the columns run ({', '.join(a['columns_run'])}): {ours} {a['ours_on_columns_run']:.2f} (dev), "
            f"paper Table 1 on the same columns {a['paper_on_columns_run']:.2f} (test)." if a.get("columns_run") else "."))]
    return "\n".join(lines + [""] + notes(args)) + "\n"


# --- The test-server files: each run's predictions, then the chosen run's of every task (--glue-submission) ---

def predict_tests(fit, test_dir, report):
    """The run's predictions on its task's test sets, written as the GLUE server takes them into
    test_dir/<run name>/<file> (header index, prediction; labels by name). WNLI: the training set's majority class,
    as the paper's submission. Returns the files, relative to test_dir."""
    task, family = TASKS[fit.family.name], fit.family
    majority = int(np.bincount(fit.data["train"]["labels"]).argmax()) if family.name in MAJORITY_CLASS else None
    files = []
    for server_file, enc in fit.data["tests"].items():
        out = predict_logits(fit.model, enc, fit.device, fit.dtype, family.eval_batch_size)
        labels = prediction_strings(out, task, majority)
        path = os.path.join(test_dir, report.name, server_file)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, submission_text(enc["index"], labels))
        files.append(os.path.relpath(path, test_dir))
        report.say(f"test predictions: {server_file}, {len(labels)} rows -> {portable(path)}"
                   + (f" (the majority class {task.labels[majority]} of the training set, as the paper's WNLI "
                      f"submission; not the model)" if majority is not None else ""))
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
                       + ("" if n == expected[name] else f"   WARNING: the GLUE server's test set has {expected[name]} "
                                                         f"rows: it will not take this file"))
    every = [f for t in TASKS for _, f, _ in TASKS[t].tests]
    missing = [f for f in every if f not in written]
    zip_path = os.path.join(folder, "submission.zip")
    tmp = zip_path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name in every:
            if name in written:
                z.write(os.path.join(folder, name), name)
    os.replace(tmp, zip_path)
    report.say(f"submission.zip: {len(written)} of {len(every)} files -> {portable(zip_path)}"
               + (f"; missing {', '.join(missing)} (the server needs all {len(every)})" if missing else ", ready to upload"))
    return {"files": written, "missing": missing, "zip": portable(zip_path)}
