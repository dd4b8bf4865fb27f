"""What a command's runs add up to, beside the runs' own results: the restarts of --seeds (each metric's mean and
std), a grid ranked by each task's own metric (--grid), and the paper's GLUE row in one command (§4.1, Table 1, B.1).

    python bert_part4_finetune.py glue                          # every task; the best of lr 5e-5..2e-5 on dev
    python bert_part4_finetune.py glue 2e-5 --tasks cola,mrpc   # one learning rate, two tasks, no selection
    python bert_part4_finetune.py glue --glue-submission DIR    # and the files the GLUE server takes

The paper (§4.1): "We use a batch size of 32 and fine-tune for 3 epochs over the data for all GLUE tasks. For each
task, we selected the best fine-tuning learning rate (among 5e-5, 4e-5, 3e-5, and 2e-5) on the Dev set." WNLI is left
out of Table 1's average, and "for our GLUE submission, we always predicted the majority class" on it. Table 1's
numbers are test-set scores from the GLUE server: one submission per model.

Every run is an ordinary run of bert_part4_finetune.py (its own log and JSON, skipped when its results exist for the
same settings, resumable, spread over processes under torchrun). This file chooses each task's learning rate in Table
1's metric (MCC for CoLA, F1 for MRPC and QQP, Spearman for STS-B, accuracy otherwise; the mean over seeds with
--seeds), writes results/part4_glue_table.{log,json,md} with the published numbers beside ours, and with
--glue-submission the test-set predictions of each task's chosen run (the GLUE server's
files: part4/tasks/families.py's predict_tests, zipped here).
Each run predicts its test sets when it ends, so no model has to be kept to reach the test set after the choice (a
BERT-base is 440 MB; the paper's grid is 36 runs); the cost is one forward pass over the test sets per run.
"""

import dataclasses
import os
import statistics
import zipfile

import numpy as np

from part4.command_line.declarations import TABLE, Fatal, preflight, recorded_in
from part4.command_line.fine_tune_settings import as_recorded_now
from part4.data.readers import GLUE, Sources, label_name, test_problems
from part4.output.results_files import Log, check_writable_dir, fmt, portable, write_atomic
from part4.paper.article import HF_DEV, PAPER_AVERAGE, PAPER_DEV, PAPER_TEST, article_final
from part4.paper.recipe import GLUE_BATCH_SIZE, GLUE_EPOCHS, GLUE_GRID_LRS, lr_tag
from part4.run.run_files import (
    NameParts,
    article_setting,
    check_not_replaced,
    existing_result,
    file_name,
    job_of,
    recorded_command,
    run_name,
    runs_folder,
)
from part4.tasks.families import MAJORITY_CLASS, METRIC_NAMES, QNLI_VERSION, paper_test_text

# --- The summaries of restarts (--seeds) and grids (--grid) ---

def by_setting(results, score):
    """{(batch_size, lr, epochs): [score(r) of each of its runs]}, in the order the settings first come."""
    out = {}
    for r in results:
        out.setdefault((r["batch_size"], r["lr"], r["epochs"]), []).append(score(r))
    return out


def mean_and_std(values):
    """The mean and the sample standard deviation of values over seeds (0 for a single value)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def save_summary(log, config, payload, device):
    """The summary of --seeds or --grid, as its own results file beside the runs'."""
    c = config.settings
    log.save({"task": config.task, "model": portable(c.model), **payload},
                cli=recorded_command(c, task=config.task), device=device)


def restarts(task, lr, seeds, family, results, log):
    """--seeds N: N runs with seeds 0..N-1, then the mean and std of every metric."""
    summary = {}
    for dev in results[0]["final"]:
        for m in family.metrics:
            values = [r["final"][dev][m] for r in results]
            mean, std = mean_and_std(values)
            summary[f"{dev}.{m}"] = {"values": values, "mean": mean, "std": std}
            log.say(f"{task} lr {lr} over {len(values)} seeds: {dev} {METRIC_NAMES[m]} {mean:.4f} +- {std:.4f}  "
                       f"(values {', '.join(f'{v:.4f}' for v in values)})")
    return {"seeds": seeds, "runs": [r["name"] for r in results], "processes": [r["process"] for r in results],
            "summary": summary}


def grid_table(config, family, results, log, labels=None):
    """--grid: every (batch, lr, epochs) of the grid, in a table sorted by the task's own metric (Table 1's: MCC for
    CoLA, F1 for MRPC and QQP, Spearman for STS-B); with --seeds, each setting's mean over the seeds first. labels:
    {run name: the article's number for its setting} where there is one."""
    name, task, seeds = config.settings.grid, config.task, config.settings.seeds
    if seeds:
        log.say(f"grid {name} on {task}, mean +- std over {seeds} seeds, sorted by dev {family.selection_name} "
                   f"(paper, BERT-large: the best of several restarts on dev):")
        points = {key: mean_and_std(v) for key, v in by_setting(results, lambda r: family.selection(r["final"])).items()}
        for (b, lr, e), (mean, std) in sorted(points.items(), key=lambda kv: -kv[1][0]):
            log.say(f"  batch {b:>2}  lr {lr:<6g}  epochs {e}  {mean:.4f} +- {std:.4f}")
    ranked = sorted(results, key=lambda r: -family.selection(r["final"]))
    log.say(f"grid {name} on {task}, sorted by dev {family.selection_name} (model at the end of training):")
    for r in ranked:
        log.say(f"  batch {r['batch_size']:>2}  lr {r['lr']:<6g}  epochs {r['epochs']}  "
                   f"{family.format(r['final'], final=True)}  ({r['seconds']:.0f} s)" + (labels or {}).get(r["name"], ""))
    return {"grid": name, "runs": [{k: r[k] for k in ("name", "lr", "batch_size", "epochs", "final", "process")}
                                   for r in ranked]}


def article_numbers(task, results, init):
    """{run name: the article's number} for the runs in the article's setting that it printed a number for."""
    return {r["name"]: article_final(task, r["lr"]) for r in results
            if article_setting(job_of(r), init)}


def summarise(config, family, results, *, log, device):
    """--seeds: the mean and std of every metric over the restarts; --grid: every setting, ranked by Table 1's metric,
    the article's number beside a run in its setting."""
    c = config.settings
    labels = article_numbers(config.task, results, c.init)
    payload = (grid_table(config, family, results, log, labels=labels) if c.grid
               else restarts(config.task, results[0]["lr"], c.seeds, family, results=results, log=log))
    save_summary(log, config, payload, device)


# --- The GLUE row: every task, each with its learning rate chosen on dev ---

AVERAGED = [name for name in GLUE if name != "wnli"]   # Table 1's average: WNLI left out


# --- Which tasks: those of --tasks whose files are in --data-dir ---

def missing_data(name, data_dir):
    """Why a task cannot run from data_dir (its training or dev file is absent), or None; the Hub has every task."""
    if data_dir is None:
        return None
    task = GLUE[name]
    ext = (".tsv", ".jsonl") if name == "mnli" else (".tsv",)             # MNLI also as JSON lines (../shared/data)
    wanted = [("train", ext), (task.dev_files[0], ext)]
    absent = [split + ext[0] for split, ext in wanted
              if not any(os.path.isfile(os.path.join(data_dir, task.folder, split + e)) for e in ext)]
    return f"no {', '.join(f'{task.folder}/{f}' for f in absent)} in --data-dir" if absent else None


def table_settings(settings):
    """What a table's numbers depend on beyond its name: the command's settings declared as recorded with a table
    (part4/command_line/fine_tune_settings.py), its model and data folder among them; under a grid no single learning
    rate was given: each task's is chosen from the grid. A table of other settings is not replaced."""
    recorded_settings = recorded_in(settings, TABLE, portable)
    if settings.grid:
        recorded_settings["lr"] = f"chosen per task on dev from grid {settings.grid}"
    return recorded_settings


def saved_table_settings(saved):
    """A saved table's settings as this version records them."""
    return as_recorded_now(saved.get("settings"), TABLE)


def table_name(settings):
    """settings: the command's Settings (part4/command_line/fine_tune_settings.py).
    part4_glue_table[_lr<lr>][_bs<b>][_ep<e>][_grid_a3][_seeds<N>][_random-init][_<tag>]: what tells two tables
    apart (grid glue's batch and epochs are in its name, grid a3's are its own)."""
    a3 = settings.grid == "a3"
    return file_name("glue_table", NameParts(lr=None if settings.grid else settings.lr,
                                             batch=None if a3 else settings.batch_size,
                                             epochs=None if a3 else settings.epochs,
                                             grid="a3" if a3 else None, seeds=settings.seeds, init=settings.init,
                                             tag=settings.run_tag), paper=(GLUE_BATCH_SIZE, GLUE_EPOCHS))


# --- The command: which tasks can run, every input checked up front, then each task's runs and their choice ---

def runnable(settings):
    """The tasks that can run (those whose files are in --data-dir, every one from the Hub) and why the others
    cannot; none at all stops the command."""
    if settings.data_dir is not None and not os.path.isdir(settings.data_dir):
        raise Fatal(f"--data-dir {settings.data_dir}: no such directory")
    absent = {t: why for t in settings.tasks if (why := missing_data(t, settings.data_dir))}
    run = [t for t in settings.tasks if t not in absent]
    if not run:
        raise Fatal(f"no GLUE task can run: {'; '.join(f'{t}: {why}' for t, why in absent.items())}")
    return run, absent


def table_started(settings, run, absent, processes):
    """The table started, before any training: the submission folder and every test file in --data-dir (each problem
    in one message), a table of other settings in the way; then the table's first lines. Each task's own inputs (its
    data, results of other settings) are checked before its first run. Returns the table's log."""
    if settings.glue_submission:
        check_writable_dir(settings.glue_submission, "--glue-submission")
        preflight([p for t in run for p in test_problems(Sources(task=t, data_dir=settings.data_dir))])
    log = Log(table_name(settings), settings.results_dir, quiet=not processes.is_main)
    check_not_replaced(os.path.join(settings.results_dir, log.name + ".json"), {"tasks": run, **table_settings(settings)},
                       "a table of other settings", held=saved_table_settings)
    log.say(f"GLUE (paper §4.1): {len(run)} of {len(settings.tasks)} tasks run ({', '.join(run)})"
               + (f"; not run: {'; '.join(f'{t} ({why})' for t, why in absent.items())}" if absent else ""))
    log.say(selection_line(settings))
    return log


def table_written(settings, rows, absent, log, cli, device):
    """The table beside Table 1, the server's files with --glue-submission, and the table's files, each named."""
    payload = {**table_payload(rows, absent, settings, log), "settings": {"tasks": list(rows), **table_settings(settings)}}
    if settings.glue_submission:
        payload["glue_submission"] = write_submission(settings.glue_submission, rows, log)
    text = markdown(payload, settings)
    log.save(payload, cli=cli, device=device, also=", .md" + written_besides(settings, rows, payload.get("glue_submission")))
    write_atomic(os.path.join(settings.results_dir, log.name + ".md"), text)


def written_besides(settings, rows, submission):
    """'; its 8 runs: results/part4_<task>_*.log, .json; the GLUE server's files: ...': what the table's .log, .json and
    .md stand on, each folder as the user gave it (the table's runs, done now or found done, and the server's files)."""
    n = sum(s["seeds"] for row in rows.values() for s in row["settings"])
    text = f"; its {n} run{plural(n)}: {os.path.join(settings.results_dir, 'part4_<task>_')}*.log, .json"
    if submission:
        folder = settings.glue_submission
        text += (f"; the GLUE server's files: {os.path.join(folder, '')} ({len(submission['files'])} files), "
                 f"each run's test predictions in {os.path.join(runs_folder(folder), '')} and "
                 f"{os.path.join(folder, 'submission.zip')}")
    return text


def selection_line(settings):
    if settings.grid is None:
        return (f"learning rate {lr_tag(settings.lr)} for every task, as given: no selection (paper: the best of "
                f"{GLUE_GRID_LRS} on dev); batch {settings.batch_size}, {settings.epochs} epoch{plural(settings.epochs)}")
    what = f"learning rate ({GLUE_GRID_LRS})" if settings.grid == "glue" else "setting of grid a3 (paper A.3)"
    return (f"the best {what} of each task, chosen on dev in Table 1's metric (MCC for CoLA, F1 for MRPC and QQP, "
            f"Spearman for STS-B, accuracy otherwise)" + (
                f", the mean over {settings.seeds} seeds (paper: for BERT-large, the best of several random restarts on "
                f"dev)" if settings.seeds else "")
            + (f"; batch {settings.batch_size}, {settings.epochs} epoch{plural(settings.epochs)}"
               if settings.grid == "glue" else ""))


def plural(n):
    return "" if n == 1 else "s"


def cut_line(rows, settings):
    """'cut runs, not the paper's (--max-train-examples 200): RTE 200 of 2,490 training examples, ...': what a table
    of cut runs leaves out, or None; with --evals, that the curves have other points (the final numbers do not
    change)."""
    parts = []
    for t, row in rows.items():
        (n, total), devs = row.get("train_examples", (0, 0)), row.get("dev_examples", {})
        cut = ([f"{n:,} of {total:,} training examples"] if n < total else []) + [
            f"{m:,} of {every:,} {name.replace('_', ' ')} examples" for name, (m, every) in devs.items() if m < every]
        parts += [f"{GLUE[t].folder} " + ", ".join(cut)] if cut else []
    flags = " ".join(f"{k} {v}" for k, v in settings.cuts.items() if v)
    evals = settings.evals
    lines = ([f"cut runs, not the paper's ({flags}): " + ("; ".join(parts) or "no example left out")] if flags else [])\
        + ([f"--evals {evals}: {evals} dev evaluation{plural(evals)} per run of those trained here (the article: about "
            f"30), the learning curves' points; the final numbers do not depend on them"] if evals else [])
    return "; ".join(lines) or None


def scores(family, final):
    """A run's dev score(s) in Table 1's metric, in percent: one per dev set (MNLI: matched, mismatched)."""
    return [100 * s[family.selection_metric] for s in final.values()]


def choose(results, family, config, data=None):
    """The setting with the best mean dev score in Table 1's metric (the first of any ties, in the grid's order, and
    whether there was one), its runs (one per seed), the best of them on dev (whose test predictions are submitted),
    every setting's score (mean and std over its seeds), and from data, how many examples the runs saw of how many
    and what always predicting the majority class scores on dev."""
    settings = by_setting(results, lambda r: r)
    values = {key: [family.selection(r["final"]) for r in runs] for key, runs in settings.items()}
    mean, std = ({key: mean_and_std(v)[k] for key, v in values.items()} for k in (0, 1))
    (batch, lr, epochs), runs = max(settings.items(), key=lambda kv: mean[kv[0]])
    dev = np.mean([scores(family, r["final"]) for r in runs], axis=0).tolist()
    sizes = {"train_examples": (data.n_train, data.n_train_all),
             "dev_examples": {k: (n, data.n_dev_all[k]) for k, n in data.n_dev.items()}} if data else {}
    baseline = family.majority_scores(data.majority, data.devs) if data else None
    return {"lr": lr, "batch_size": batch, "epochs": epochs, "metric": family.selection_metric, "dev": dev,
            "tie": sum(m == mean[(batch, lr, epochs)] for m in mean.values()) > 1,       # chosen by the grid's order
            "majority": baseline and {"class": label_name(family.name, data.majority), "dev": baseline},
            "runs": [r["name"] for r in runs], "submitted": max(runs, key=lambda r: family.selection(r["final"])),
            "settings": [{"lr": lr_, "batch_size": b, "epochs": e, "dev": 100 * mean[(b, lr_, e)],
                          "std": 100 * std[(b, lr_, e)],
                          "seeds": len(values[(b, lr_, e)]), "chosen": (b, lr_, e) == (batch, lr, epochs)}
                         for (b, lr_, e) in settings],
            "other_init": other_init(config, family, runs), **sizes}


def other_init(config, family, runs):
    """The same setting's dev score from the other initialisation (random weights beside pre-trained ones, or the
    reverse), where its runs exist for the same settings; None where they do not."""
    init = "pretrained" if config.settings.init == "random" else "random"
    other = dataclasses.replace(config, settings=dataclasses.replace(config.settings, init=init))
    found = []
    for r in runs:
        settings = {**as_recorded_now(r["settings"]), "init": init}
        path = os.path.join(other.settings.results_dir, run_name(other, job_of(r)) + ".json")
        done = existing_result(path, settings,
                               ignore=("processes", "dev_evaluations"))      # evaluations change no final number
        if done is None:
            return None
        found.append(scores(family, done["final"]))
    return {"init": init, "dev": np.mean(found, axis=0).tolist()}


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
    return columns({t: {"dev": GLUE[t].paper_test} for t in AVERAGED})


def chosen_setting(row, grid):
    """The chosen learning rate ('2e-5'); under --grid a3 with its batch size and epochs ('2e-5/16/4')."""
    return lr_tag(row["lr"]) + (f"/{row['batch_size']}/{row['epochs']}" if grid == "a3" else "")


def labels(init):
    """The columns of ours and of the other initialisation's runs."""
    return ("random init", "pre-trained") if init == "random" else ("ours", "random init")


def table_payload(rows, absent, settings, log):
    """The table in the log, and its numbers for the JSON."""
    ours_label, other_label = labels(settings.init)
    log.say("")
    if (cut := cut_line(rows, settings)) is not None:
        log.say(cut)
    log.say(f"{'task':<6} {'metric':<9} {'lr':<6} {ours_label + ' (dev)':<17} {other_label + ' (dev)':<17} "
               f"{'majority class (dev)':<20} {'paper Table 1 (test)':<21} {'paper dev acc':<13} HF bert-base-cased (dev)")
    out = {}
    for t, task in GLUE.items():
        row = rows.get(t)
        if t in absent or row is None:
            why = absent.get(t, "not in --tasks")
            log.say(f"{task.folder:<6} not run: {why}")
            out[t] = {"run": False, "why": why}
            continue
        other = row["other_init"]["dev"] if row["other_init"] else None
        log.say(f"{task.folder:<6} {METRIC_NAMES[row['metric']]:<9} {chosen_setting(row, settings.grid):<6} "
                   f"{fmt(row['dev'], '-'):<17} {fmt(other, '-'):<17} {fmt(majority_dev(row), '-'):<20} "
                   f"{'/'.join(f'{v:.1f}' for v in task.paper_test) or '-':<21} "
                   f"{task.paper_dev or '-':<13} {task.hf_dev}")
        out[t] = {"run": True, **{k: v for k, v in row.items() if k != "submitted"},
                  "submitted_run": row["submitted"]["name"], "paper_test": paper_test_text(t),
                  "paper_dev": task.paper_dev, "hf_dev": task.hf_dev}
    below = below_majority(rows)
    result = average_row(rows, ours_label, log)
    heading, *grid = every_setting(rows, settings) or [None]
    for line in ([below_line(below)] if below else []) + ([heading] if heading else []) + [
            f"  {task:<6} {metric:<9} " + "   ".join(cells) for task, metric, cells in grid] + notes(settings):
        log.say(line)
    return {"tasks": out, "not_run": absent, "average": result, "below_majority": below,
            "selection": selection_line(settings), "cut": cut,
            "model": portable(settings.model), "init": settings.init, "references": {"paper_test": PAPER_TEST,
                                                                               "paper_dev": PAPER_DEV, "hf_dev": HF_DEV}}


def majority_dev(row):
    """What always predicting the majority class scores on the task's dev set(s), in Table 1's metric (None for STS-B)."""
    return row["majority"]["dev"] if row.get("majority") else None


def below_majority(rows):
    """['RTE 47.29 <= 52.71', ...]: the tasks whose chosen dev score is not above always predicting the majority class
    (on any of its dev sets)."""
    return [f"{GLUE[t].folder} {fmt(row['dev'])} <= {fmt(majority_dev(row))}" for t, row in rows.items()
            if row and majority_dev(row) and any(d <= m for d, m in zip(row["dev"], majority_dev(row)))]


def below_line(below):
    return ("not above always predicting the majority class (the model learned nothing the dev set shows): "
            + ", ".join(below))


def every_setting(rows, settings):
    """Under a grid, every setting's dev score of each task in Table 1's metric (mean +- std over the seeds), the
    chosen one marked, and said when another scored the same (the grid's order chose): the choice can be checked
    here, without opening each run's file. Returns the heading and (task, metric, cells) of each task run ([]
    without a grid)."""
    if settings.grid is None:
        return []
    heading = ("every setting tried, dev in Table 1's metric" + (f" (mean +- std over {settings.seeds} seeds)" if settings.seeds
                                                                 else "") + ", * = chosen:")
    return [heading] + [(GLUE[t].folder, METRIC_NAMES[row["metric"]], [
        f"{chosen_setting(s, settings.grid)} {s['dev']:.2f}" + (f" +- {s['std']:.2f}" if settings.seeds else "")
        + ("*" + (" (tie: the first of the grid)" if row.get("tie") else "") if s["chosen"] else "")
        for s in row["settings"]]) for t, row in rows.items() if row.get("settings")]


def average_row(rows, ours_label, log):
    """Our average of Table 1's nine columns beside the paper's 79.6; where a task was not run, not computed, but the
    average over the columns run beside Table 1's over the same columns (and its 79.6 over all nine)."""
    ours, paper = columns(rows), paper_columns()
    missing = [t + (" (no mismatched dev set)" if rows.get(t) else "") for t in AVERAGED
               if not rows.get(t) or (t == "mnli" and len(rows[t]["dev"]) < 2)]
    result = {"ours": average(list(ours.values())) if not missing else None, "paper": PAPER_AVERAGE,
              "paper_from_its_columns": average(list(paper.values())), "missing": missing}
    if not missing:
        log.say(f"average of Table 1's nine columns (WNLI left out, MNLI matched and mismatched apart): "
                   f"{ours_label} {result['ours']:.2f} (dev)   [paper Table 1, BERT-base: {PAPER_AVERAGE} (test)]")
        return result
    same = {c: paper[c] for c in ours}
    result |= {"ours_on_columns_run": average(list(ours.values())) if ours else None, "columns_run": list(ours),
               "paper_on_columns_run": average(list(same.values())) if same else None}
    log.say(f"average of Table 1's columns (WNLI left out): not computed, {', '.join(missing)} not run"
               + (f"; over the {len(ours)} column{plural(len(ours))} run ({', '.join(ours)}): {ours_label} "
                  f"{result['ours_on_columns_run']:.2f} (dev)   [paper Table 1 on the same columns: "
                  f"{result['paper_on_columns_run']:.2f} (test); over all nine: {PAPER_AVERAGE}]" if ours else ""))
    return result


def notes(settings):
    return ["notes: ours are dev scores; Table 1's are test scores from the GLUE server (hidden labels, one submission "
            "per model): not the same quantity, and a learning rate chosen on dev flatters the dev score a little",
            f"  QNLI: {QNLI_VERSION}; paper dev: Table 5's BERT-base dev accuracies (MNLI: matched); HF: {HF_DEV}",
            f"  model {portable(settings.model)} (the paper's row: BERT-base, bert-base-uncased), init {settings.init}"]


def markdown(payload, settings):
    """The table as Markdown, which a code host renders."""
    ours, other_label = labels(settings.init)
    lines = [f"# GLUE (paper §4.1): {payload['selection']}", ""] + ([f"**{payload['cut']}**", ""] if payload["cut"]
                                                                    else []) + [
             f"| task | metric | lr | {ours} (dev) | {other_label} (dev) | majority class (dev) "
             f"| paper Table 1, BERT-base (test) | paper, BERT-base (dev accuracy) | HF, bert-base-cased (dev) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for t, row in payload["tasks"].items():
        if not row["run"]:
            lines.append(f"| {GLUE[t].folder} | not run: {row['why']} | | | | | {paper_test_text(t)} | "
                         f"{GLUE[t].paper_dev or '-'} | {GLUE[t].hf_dev} |")
            continue
        other = row["other_init"]["dev"] if row["other_init"] else None
        lines.append(f"| {GLUE[t].folder} | {METRIC_NAMES[row['metric']]} | {chosen_setting(row, settings.grid)} | "
                     f"{fmt(row['dev'], '-')} | {fmt(other, '-')} | {fmt(majority_dev(row), '-')} | {paper_test_text(t)} | "
                     f"{row['paper_dev'] or '-'} | {row['hf_dev']} |")
    a = payload["average"]
    lines += ["", "Average of Table 1's nine columns (WNLI left out): " + (
        f"{ours} {a['ours']:.2f} (dev); paper {a['paper']} (test)." if a["ours"] is not None else
        f"not computed ({', '.join(a['missing'])} not run)" + (
            f"; over the columns run ({', '.join(a['columns_run'])}): {ours} {a['ours_on_columns_run']:.2f} (dev), "
            f"paper Table 1 on the same columns {a['paper_on_columns_run']:.2f} (test), over all nine {a['paper']} "
            f"(test)." if a.get("columns_run") else "."))]
    lines += ["", below_line(payload["below_majority"]) + "."] if payload["below_majority"] else []
    heading, *grid = every_setting({t: r for t, r in payload["tasks"].items() if r["run"]}, settings) or [None]
    lines += ["", heading, ""] + [f"- {task} ({metric}): {', '.join(cells)}" for task, metric, cells in grid] if heading\
        else []
    if "glue_submission" in payload:
        sub = payload["glue_submission"]
        lines += ["", f"The GLUE server's files: `{portable(settings.glue_submission)}/` ({len(sub['files'])} files), to upload: "
                      f"`{sub['zip']}`" + (f"; missing {', '.join(sub['missing'])}." if sub["missing"] else ".")]
    return "\n".join(lines + [""] + notes(settings)) + "\n"


# --- The chosen run of every task: its files copied together and zipped (the glue command's end) ---

def write_submission(folder, rows, log):
    """The submitted run's files of every task copied into folder, their rows checked against the full test sets,
    and folder/submission.zip holding them, ready to upload."""
    runs_dir, written = runs_folder(folder), {}
    for t, row in rows.items():
        expected = {f: n for _, f, n in GLUE[t].tests}
        for rel in row["submitted"]["test_predictions"]:
            name = os.path.basename(rel)
            with open(os.path.join(runs_dir, rel), encoding="utf-8") as f:
                text = f.read()
            write_atomic(os.path.join(folder, name), text)
            n = text.count("\n") - 1
            written[name] = {"rows": n, "run": row["submitted"]["name"], "full_test_set": n == expected[name]}
            log.say(f"submission {name}: {n} rows from {row['submitted']['name']}"
                       + (" (the training set's majority class, not the model: the paper's WNLI submission)"
                          if t in MAJORITY_CLASS else "")
                       + ("" if n == expected[name] else f"   WARNING: the GLUE server's test set has {expected[name]} "
                                                         f"rows: it will not take this file"))
    every = [f for t in GLUE for _, f, _ in GLUE[t].tests]
    missing = [f for f in every if f not in written]
    zip_path = os.path.join(folder, "submission.zip")
    write_atomic(zip_path, lambda tmp: write_zip(tmp, folder, [name for name in every if name in written]))
    log.say(f"submission.zip: {len(written)} of {len(every)} files -> {zip_path}"
               + (f"; missing {', '.join(missing)} (the server needs all {len(every)})" if missing else ", ready to upload"))
    return {"files": written, "missing": missing, "zip": portable(zip_path)}


def write_zip(path, folder, names):
    """The files names of folder, compressed into the zip file path (each under its own name)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in names:
            z.write(os.path.join(folder, name), name)
