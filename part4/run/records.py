"""A fine-tuning run's records: its settings objects (Job, a task's Config made from the command's Settings, Where), its
file names and the settings recorded with it, the command line as a results file records it, and the summaries'
means over seeds. The run itself, its results saved, is part4/run/training_run.py's; the paper's settings and grids are
in part4/paper/recipe.py."""

import os
import statistics
from dataclasses import dataclass, replace

import torch

from part4.command_line.declarations import RUN, recorded
from part4.command_line.errors import Fatal
from part4.command_line.fine_tune_settings import as_recorded_now, flags_record, settings_diff
from part4.models.loading import DTYPE_NAMES
from part4.output.log import command_line
from part4.output.results_files import portable, read_results
from part4.paper.article import ARTICLE_RUN, article_final
from part4.paper.recipe import RECIPES, grid_description, lr_tag
from part4.tasks.metrics import METRIC_NAMES

# --- one fine-tuning run's settings: what a grid varies (Job), what a task's runs share (Config), where they run ---

@dataclass(frozen=True)
class Job:
    """One run: what a grid or restarts vary, and its count of dev evaluations (which follows its epochs where the
    recipe evaluates once per epoch)."""
    lr: float
    batch_size: int
    epochs: int
    seed: int
    evals: int                         # dev evaluations during the run: part4/paper/recipe.py's evaluations counts them


def job_of(result):
    """The Job a run's results were made by."""
    return Job(lr=result["lr"], batch_size=result["batch_size"], epochs=result["epochs"], seed=result["seed"],
               evals=as_recorded_now(result["settings"])["dev_evaluations"])


@dataclass(frozen=True)
class Config:
    """What every run of one task shares: the command's Settings (declared in part4/command_line/fine_tune_settings.py,
    made once by part4/command_line/fine_tune_parser.py; each value there, once) and what is the task's own, made for
    the task (task_config)."""
    task: str
    settings: object                   # the Settings of the command line
    recipe: object                     # the task's Recipe (part4/paper/recipe.py) as this command runs it: the paper's batch
    #                                    size and epochs; the glue command evaluates MNLI and QQP once per epoch
    grouped: bool                      # training batches grouped by length
    test_dir: str = None               # --glue-submission: where each run writes its test-set predictions


def task_config(settings, task, family, once_per_epoch=()):
    """A task's Config from the command's Settings: the task's recipe (evaluated once per epoch for the tasks in
    once_per_epoch: the glue command's MNLI and QQP); --group-by-length, else the family's."""
    recipe = replace(RECIPES[task], evals=None) if task in once_per_epoch else RECIPES[task]
    return Config(task=task, settings=settings, recipe=recipe,
                  grouped=family.grouped if settings.grouped is None else settings.grouped,
                  test_dir=runs_folder(settings.submission))


def runs_folder(submission):
    """Where each run writes its test-set predictions: DIR/runs/<run name>/ (None without --glue-submission)."""
    return os.path.join(submission, "runs") if submission else None


@dataclass(frozen=True)
class Where:
    """Where a command runs: its device, the autocast dtype there (None: fp32), and the processes torchrun started."""
    device: torch.device
    dtype: object
    processes: object


# --- a run's name, files and recorded settings ---

@dataclass(frozen=True)
class NameParts:
    """What a result's name may tell, each left out where it is None (each caller leaves out what is the paper's and
    what its name need not tell apart)."""
    lr: float = None
    batch: int = None
    epochs: int = None
    seed: int = None
    grid: str = None
    seeds: int = None
    init: str = "pretrained"
    tag: str = None


def file_name(head, parts=NameParts()):
    """The one builder of result names, for runs, summaries and tables alike:
    part4_<head>[_lr<lr>][_bs<b>][_ep<e>][_seed<s>][_grid_<g>][_seeds<N>][_random-init][_<tag>]."""
    p = parts
    words = [f"part4_{head}", p.lr is not None and f"lr{lr_tag(p.lr)}", p.batch is not None and f"bs{p.batch}",
             p.epochs is not None and f"ep{p.epochs}", p.seed is not None and f"seed{p.seed}", p.grid and f"grid_{p.grid}",
             p.seeds and f"seeds{p.seeds}", p.init == "random" and "random-init", p.tag]
    return "_".join(w for w in words if w)


def unless_paper(value, paper):
    """A setting for a file name: None (left out) where it is the paper's."""
    return None if value == paper else value


def run_name(config, job):
    """part4_<task>_lr<lr>[_bs<b>][_ep<e>][_seed<s>][_random-init][_<tag>]: batch and epochs when they are not the
    paper's for the task, the seed with --seeds or when it is not 0."""
    c = config.settings
    return file_name(config.task, NameParts(lr=job.lr, batch=unless_paper(job.batch_size, config.recipe.batch_size),
                                            epochs=unless_paper(job.epochs, config.recipe.epochs),
                                            seed=job.seed if (c.seeds or job.seed != 0) else None,
                                            init=c.init, tag=c.run_tag))


def run_settings(config, job, family, train_rows, dtype, processes):
    """Everything that decides a run's numbers (a checkpoint or a result of other settings is never reused): the
    command's settings recorded with a run (part4/command_line/fine_tune_settings.py), each as this run resolved it
    (the autocast dtype as "fp32" or "bf16"), its batches grouped or not, its count of dev evaluations, its training
    rows and processes. How it is computed (padding-free steps, the fused AdamW) changes its numbers by float rounding
    only: that is recorded with the results (computation), so results of either way stay valid."""
    ran = {"task": config.task, "lr": job.lr, "batch_size": job.batch_size, "epochs": job.epochs, "seed": job.seed,
           "max_len": family.max_len, "stride": family.stride, "dtype": DTYPE_NAMES.get(dtype, str(dtype))}
    return {**recorded(config.settings, RUN, portable), **ran, "grouped": config.grouped,
            "dev_evaluations": job.evals, "train_rows": train_rows, "processes": processes.world}


def summary_name(config, job):
    """part4_<task>_grid_<grid>[_seeds<N>]... or part4_<task>_lr<lr>[_bs<b>][_ep<e>]_seeds<N>..., with the init and
    the tag: a grid's summary of other batch sizes or epochs is told apart by its runs (summarised_runs)."""
    c = config.settings
    if c.grid:
        return file_name(config.task, NameParts(grid=c.grid, seeds=c.seeds, init=c.init, tag=c.run_tag))
    return file_name(config.task, NameParts(lr=job.lr, batch=unless_paper(job.batch_size, config.recipe.batch_size),
                                            epochs=unless_paper(job.epochs, config.recipe.epochs), seeds=c.seeds,
                                            init=c.init, tag=c.run_tag))


def summarised_runs(saved):
    """What a summary's results depend on: the runs it summarises (a grid's of other batch sizes differ)."""
    return {"runs": sorted(r["name"] if isinstance(r, dict) else r for r in saved.get("runs", []))}


def checkpoint_path(config, name):
    return os.path.join(config.settings.results_dir, name + ".checkpoint")


def results_path(config, job):
    return os.path.join(config.settings.results_dir, run_name(config, job) + ".json")


def model_folders(config, jobs):
    """Where --save-model puts each run's model: the folder itself for one run, a subfolder per run for several."""
    folder = config.settings.save_model
    if not folder:
        return []
    return [os.path.join(folder, run_name(config, job)) for job in jobs] if config.settings.reuse else [folder]


# --- the command line a results file records; the summaries of seeds and grids ---

def recorded_command(settings, **ran):
    """The command line as a results file records it: its argv, and its settings as given (ran: a task's own, its
    task)."""
    return command_line(settings.argv, flags_record(settings, **ran))


def by_setting(results, score):
    """{(batch_size, lr, epochs): [score(r) of each of its runs]}, in the order the settings first come."""
    out = {}
    for r in results:
        out.setdefault((r["batch_size"], r["lr"], r["epochs"]), []).append(score(r))
    return out


def mean_and_std(values):
    """The mean and the sample standard deviation of values over seeds (0 for a single value)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def save_summary(report, config, payload, device):
    """The summary of --seeds or --grid, as its own results file beside the runs'."""
    c = config.settings
    report.save({"task": config.task, "model": portable(c.model), **payload},
                cli=recorded_command(c, task=config.task), device=device)


# --- The summaries of restarts and grids, and the command's lines: the work split, the runs found done ---

def restarts(task, lr, seeds, family, results, report):
    """--seeds N: N runs with seeds 0..N-1, then the mean and std of every metric."""
    summary = {}
    for dev in results[0]["final"]:
        for m in family.metrics:
            values = [r["final"][dev][m] for r in results]
            mean, std = mean_and_std(values)
            summary[f"{dev}.{m}"] = {"values": values, "mean": mean, "std": std}
            report.say(f"{task} lr {lr} over {len(values)} seeds: {dev} {METRIC_NAMES[m]} {mean:.4f} +- {std:.4f}  "
                       f"(values {', '.join(f'{v:.4f}' for v in values)})")
    return {"seeds": seeds, "runs": [r["name"] for r in results], "processes": [r["process"] for r in results],
            "summary": summary}


def grid_table(config, family, results, report, labels=None):
    """--grid: every (batch, lr, epochs) of the grid, in a table sorted by the task's own metric (Table 1's: MCC for
    CoLA, F1 for MRPC and QQP, Spearman for STS-B); with --seeds, each setting's mean over the seeds first. labels:
    {run name: the article's number for its setting} where there is one."""
    name, task, seeds = config.settings.grid, config.task, config.settings.seeds
    if seeds:
        report.say(f"grid {name} on {task}, mean +- std over {seeds} seeds, sorted by dev {family.selection_name} "
                   f"(paper, BERT-large: the best of several restarts on dev):")
        points = {key: mean_and_std(v) for key, v in by_setting(results, lambda r: family.selection(r["final"])).items()}
        for (b, lr, e), (mean, std) in sorted(points.items(), key=lambda kv: -kv[1][0]):
            report.say(f"  batch {b:>2}  lr {lr:<6g}  epochs {e}  {mean:.4f} +- {std:.4f}")
    ranked = sorted(results, key=lambda r: -family.selection(r["final"]))
    report.say(f"grid {name} on {task}, sorted by dev {family.selection_name} (model at the end of training):")
    for r in ranked:
        report.say(f"  batch {r['batch_size']:>2}  lr {r['lr']:<6g}  epochs {r['epochs']}  "
                   f"{family.format(r['final'], final=True)}  ({r['seconds']:.0f} s)" + (labels or {}).get(r["name"], ""))
    return {"grid": name, "runs": [{k: r[k] for k in ("name", "lr", "batch_size", "epochs", "final", "process")}
                                   for r in ranked]}


def grid_header(config, n_runs, in_table):
    """'rte: grid glue (paper §4.1): lr {5e-5, 4e-5, 3e-5, 2e-5} = 4 runs, x 2 seeds = 8 runs' (no line without --grid)."""
    c = config.settings
    if not c.grid:
        return []
    return [(f"{config.task}: " if in_table else "") + grid_description(c.grid, c.batch_size, c.epochs)
            + (f", x {c.seeds} seeds = {n_runs} runs" if c.seeds else "")]


def article_numbers(task, results, init):
    """{run name: the article's number} for the runs in the article's setting that it printed a number for."""
    return {r["name"]: article_final(task, r["lr"]) for r in results
            if article_setting(job_of(r), init)}


def summarise(config, family, results, *, report, device):
    """--seeds: the mean and std of every metric over the restarts; --grid: every setting, ranked by Table 1's metric,
    the article's number beside a run in its setting."""
    c = config.settings
    labels = article_numbers(config.task, results, c.init)
    payload = (grid_table(config, family, results, report, labels=labels) if c.grid
               else restarts(config.task, results[0]["lr"], c.seeds, family, results=results, report=report))
    save_summary(report, config, payload, device)


def split_line(mode, processes, n_runs):
    if mode == "data":
        return (f"work split: {processes.world} processes ({processes.backend}), data parallel: each of the {n_runs} run(s) "
                f"uses every process, each taking 1/{processes.world} of every batch")
    return (f"work split: {processes.world} processes ({processes.backend}), whole runs: process r trains runs r, r + "
            f"{processes.world}, ... of the {n_runs}, each alone on its own device")


def skipped_line(result):
    return f"run {result['name']}: its results already exist for the same settings ({result['name']}.json): skipped"


def article_setting(job, init):
    """Is this run in the setting the article's numbers are for (batch 32, 3 epochs, seed 0, pre-trained weights)?"""
    return (job.batch_size, job.epochs, job.seed) == ARTICLE_RUN and init == "pretrained"


# --- One results file: the same settings, or never replaced ---

def existing_result(path, settings, ignore=("processes",)):
    """The results JSON at path when it exists for the same settings (keys in ignore aside), else None."""
    done = read_results(path)
    if done is None:
        return None

    def same(s):
        return {k: v for k, v in s.items() if k not in ignore}

    return done if same(as_recorded_now(done.get("settings") or {})) == same(as_recorded_now(settings)) else None


def check_not_replaced(path, ours, what, recorded=None, ignore=("processes",)):
    """The one guard of every results file (a run's, a summary's, a table's): it is never replaced by one of other
    settings (a quick check with --max-train-examples must not overwrite hours of a full run). Stops before any
    training, naming what differs. recorded(saved): the settings a saved file holds (default: its "settings")."""
    saved = read_results(path)
    if saved is None:
        return
    if recorded is None:                        # a run's settings, each side as this version records them
        theirs, ours = as_recorded_now(saved.get("settings")), as_recorded_now(ours)
    else:
        theirs = recorded(saved)
    if theirs is None:
        raise Fatal(f"{portable(path)}: a result written by an older version of this script (it records no "
                    f"settings); refusing to overwrite it: move it away, or pass --run-tag or --results-dir")
    diff = settings_diff(theirs, ours, ignore)
    diff = diff if len(diff) < 400 else diff[:400] + " ..."
    if diff:
        raise Fatal(f"{portable(path)}: {what} ({diff}); refusing to overwrite it: pass --run-tag or --results-dir, or "
                    f"delete it")
