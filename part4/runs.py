"""The machinery of training runs: what the paper does not say.

What a training loop needs around it, each piece one call away: batches padded to their own longest row
and batches grouped by length; a Run that shares each batch among the processes torchrun started, sums the
loss over them, stops on a non-finite loss, checkpoints and resumes bitwise, and stops cleanly on SIGTERM or
Ctrl-C. Below them, what a fine-tuning run needs that the paper does not say: its settings objects (Job, a
task's Config made from the command's Settings, Where, Fit), how often it evaluates, its file names and the
settings recorded with it, a results file of other settings never overwritten; the plan of one task's runs (the
data prepared once, this process's share, the runs done before, the results collected from every process), a
run's results saved and the summaries' means. This room answers the recipe's questions and never calls it: the
recipe (bert_part4_finetune.py) trains each run itself. The paper's settings and grids are in part4/recipe.py.
"""

import os
import random
import signal
import statistics
import sys
import threading
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import torch

from part4 import cli
from part4.devices import ALONE, DTYPE_NAMES, all_agree, gather, summed
from part4.files import (
    check_model_target,
    check_writable_dir,
    portable,
    read_results,
    replace_atomically,
    replace_folder_atomically,
)
from part4.flags import RUN, Fatal, Stopped, not_a_script, preflight, recorded, recorded_defaults
from part4.log import Report, command_line
from part4.model_folders import loaded_record, read_checkpoint
from part4.models import check_positions, load_model, model_problem
from part4.packing import is_padding_free
from part4.plots import line_plot
from part4.recipe import CUT_EVAL_EVERY, RECIPES, lr_tag

# --- checkpoints: tensors and plain values only, and the signals that stop a long run cleanly ---

def rng_states():
    """The Python, numpy and torch RNG states as tensors and plain values only, so that a checkpoint loads with
    torch.load(..., weights_only=True): nothing in it can run code."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    states = {"python": [version, list(internal), gauss],
              "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
              "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states):
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def plain(obj):
    """obj with numpy scalars and arrays turned into Python numbers and lists (tensors kept): what
    torch.load(..., weights_only=True) reads back without unpickling any other class."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, (np.generic, np.ndarray)):
        return obj.tolist()
    return obj


def save_atomic(obj, path):
    """torch.save, written atomically (see write_atomic in part4/common.py): a checkpoint is whole or absent."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    replace_atomically(path, lambda tmp: torch.save(obj, tmp))


class StopSignals:
    """While active, SIGTERM (a cluster's notice before preemption) and Ctrl-C only raise a flag: the loop
    finishes its step, saves a checkpoint and stops. Outside the main thread it does nothing."""

    NAMES = {signal.SIGINT: ("Ctrl-C", 130), signal.SIGTERM: ("SIGTERM", 143)}

    def __init__(self):
        self.received, self.saved = None, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.NAMES:
                self.saved[sig] = signal.signal(sig, self._catch)
        return self

    def _catch(self, signum, frame):
        self.received = signum

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        return False


class Run:
    """Everything around one training loop that is not the recipe: the processes that share it (each takes its
    part of every batch), the loss summed over them, the check for a non-finite loss, the checkpoint written at
    each evaluation and read back on a rerun, and a clean stop on SIGTERM or Ctrl-C (used as a context manager)."""

    def __init__(self, processes, device, checkpoint, settings):
        self.processes, self.device, self.checkpoint, self.settings = processes, device, checkpoint, settings
        self.losses, self.stop = [], StopSignals()

    def __enter__(self):
        self.stop.__enter__()
        return self

    def __exit__(self, *exc):
        return self.stop.__exit__(*exc)

    def wrap(self, model):
        """The model each step trains through: itself alone, DistributedDataParallel across several processes."""
        if self.processes.world == 1:
            return model
        ids = [self.device.index] if self.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def share(self, idx):
        """This process's rows of a global batch, and the weight of its loss (see shard)."""
        return shard(idx, self.processes)

    @staticmethod
    def weighted(loss_fn, weight):
        """loss_fn with its loss scaled by this process's weight (loss_fn itself when the weight is 1)."""
        return loss_fn if weight == 1.0 else (lambda model, batch: loss_fn(model, batch) * weight)

    def add_loss(self, loss):
        """loss: this process's weighted loss (see weighted); its share of the batch's mean loss is kept."""
        self.losses.append(loss / self.processes.world)

    def mean_loss(self, step, lr):
        """The mean training loss since the last call, summed over the processes (one sync per evaluation, not per
        step); a non-finite loss stops the run, naming its step."""
        window = summed(self.processes, torch.stack(self.losses).float())
        if not torch.isfinite(window).all():
            k = int((~torch.isfinite(window)).nonzero()[0])   # the first bad loss since the last line
            raise Fatal(f"the training loss became {window[k].item()} at step {step - len(self.losses) + 1 + k} "
                        f"(lr {lr}): stopped, no results written", code=1)
        self.losses = []
        return window.mean().item()

    def stop_requested(self):
        """Has any of the processes received SIGTERM or Ctrl-C? (All of them stop at the same step.)"""
        if self.processes.world == 1:
            return self.stop.received is not None
        flag = torch.tensor([float(self.stop.received is not None)], device=self.device)
        return bool(summed(self.processes, flag).item() > 0)

    def after_step(self, step, total, every, model, opt, sched, *, state):
        """A checkpoint at each evaluation before the last; on SIGTERM or Ctrl-C a checkpoint, then Stopped."""
        stopping = self.stop_requested()
        if stopping or (step % every == 0 and step < total):
            self.save(model, opt, sched, {"settings": self.settings, "step": step, **state})
        if stopping:
            signal_name, code = StopSignals.NAMES.get(self.stop.received, ("a signal to another process", 143))
            raise Stopped(f"stopped by {signal_name} at step {step}/{total}: checkpoint saved to "
                          f"{portable(self.checkpoint)}; run the same command again to resume (no results were written)",
                          code)

    def save(self, model, opt, sched, state):
        """Rank 0 writes the model, optimiser, schedule and state, with every process's unsummed losses and RNG
        states: what a resumed run needs to continue exactly where this one stands."""
        everyone = gather(self.processes, {"losses": [float(x) for x in self.losses], "rng": rng_states()})
        if self.processes.main:
            save_atomic({"state": plain(state), "model": model.state_dict(), "opt": opt.state_dict(),
                         "sched": sched.state_dict(), "processes": everyone}, self.checkpoint)

    def resumed(self, model, opt, sched, report, steps):
        """The saved state when a checkpoint was loaded (its log lines restored, and a line saying so), else None."""
        state = self.resume(model, opt, sched)
        if state:
            report.say_again(state["lines"])
            report.say(f"(resumed from {portable(self.checkpoint)} at step {state['step']}/{steps}: the lines above "
                       f"come from the interrupted run)")
        return state

    def resume(self, model, opt, sched):
        """None when there is no checkpoint; else its state, after loading the model, optimiser, schedule, this
        process's losses and RNG states. A checkpoint of other settings is refused."""
        path = self.checkpoint
        if not os.path.isfile(path):
            return None
        try:      # weights_only: a planted pickle is refused before anything in it can run
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
            saved = ckpt["state"]["settings"]
        except Exception as e:  # a truncated, foreign or code-carrying file: torch raises many kinds
            raise Fatal(f"{path}: not a checkpoint of this script ({type(e).__name__}); nothing in it was run; "
                        f"delete it to start over")
        saved, ours = as_recorded_now(saved), as_recorded_now(self.settings)
        if saved != ours:
            raise Fatal(f"{path}: a checkpoint from other settings ({settings_diff(saved, ours)}): refusing to "
                        f"resume from it; delete it to start this run over")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])          # its AdamW kernel (fused or not) comes with it: recorded as computed
        sched.load_state_dict(ckpt["sched"])
        mine = ckpt["processes"][self.processes.rank]
        set_rng_states(mine["rng"])
        self.losses = [torch.tensor(x, device=self.device) for x in mine["losses"]]   # beside the losses to come
        return ckpt["state"]

    def remove_checkpoint(self):
        if os.path.exists(self.checkpoint):
            os.remove(self.checkpoint)                 # the results are written: the checkpoint is spent


def shard(idx, processes):
    """This process's rows of a global batch, and the weight that makes the processes' mean gradients add up to
    the gradient of the whole batch's mean loss (DDP averages over processes). A process left without a row (a
    last batch shorter than the number of processes) takes one with weight 0."""
    rows = np.array_split(np.asarray(idx), processes.world)[processes.rank].tolist()
    if not rows:
        return idx[:1], 0.0
    return rows, len(rows) * processes.world / len(idx)


# --- many runs: grids, seeds, and whole runs spread over processes ---

EARLIER_DTYPES = {"None": "fp32", "torch.bfloat16": "bf16"}  # as results of earlier versions recorded it
EARLIER_NAMES = {"evals": "dev_evaluations"}               # a recorded setting's name in results of earlier versions


def as_recorded_now(settings, place=RUN):
    """Settings recorded in place (a run's, RUN, or a table's, part4/flags.py's TABLE) in this version's terms, to be
    compared: an earlier name of a setting (evals: the count of dev evaluations, now dev_evaluations), an earlier
    spelling of its value (dtype "None" is "fp32"), and a setting not recorded (declared after the file was written,
    or at its default where it is recorded unless default: init "pretrained") at its declared default. Results and
    checkpoints of earlier versions so stay valid. None stays None."""
    if settings is None:
        return None
    now = {EARLIER_NAMES.get(k, k): v for k, v in settings.items()}
    if now.get("dtype") in EARLIER_DTYPES:
        now["dtype"] = EARLIER_DTYPES[now["dtype"]]
    return {**recorded_defaults(cli.Settings, place), **now}


def settings_diff(saved, ours, ignore=()):
    """'lr 3e-05 -> 2e-05; seed 0 -> 1': what differs between recorded settings and ours ('' when nothing does)."""
    saved = saved or {}
    return "; ".join(f"{k} {saved.get(k)!r} -> {v!r}" for k, v in ours.items() if k not in ignore and saved.get(k) != v)


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


def work_split(parallel, many, processes, batch_sizes):
    """How the processes share the work: "data" (every batch split over them) or "runs" (whole runs each)."""
    if parallel and not processes.launched:
        raise Fatal(f"--parallel {parallel}: needs several processes started by torchrun "
                    f"(torchrun --nproc-per-node N bert_part4_finetune.py ...)")
    if parallel == "runs" and not many:
        raise Fatal("--parallel runs spreads whole runs over the processes: it needs --grid or --seeds "
                    "(one run: --parallel data)")
    mode = parallel or ("runs" if many else "data")
    if mode == "data":
        for batch in sorted(set(batch_sizes)):
            if batch % processes.world:
                raise Fatal(f"batch {batch} cannot be split over {processes.world} processes: choose a batch size divisible "
                            f"by {processes.world} (the global batch stays the paper's; each process takes batch / N)")
    return mode


def split_line(mode, processes, n_runs):
    if mode == "data":
        return (f"work split: {processes.world} processes ({processes.backend}), data parallel: each of the {n_runs} run(s) "
                f"uses every process, each taking 1/{processes.world} of every batch")
    return (f"work split: {processes.world} processes ({processes.backend}), whole runs: process r trains runs r, r + "
            f"{processes.world}, ... of the {n_runs}, each alone on its own device")


# --- one fine-tuning run's settings: what a grid varies (Job), what a task's runs share (Config), where they run ---

@dataclass(frozen=True)
class Job:
    """One run: what a grid or restarts vary, and its count of dev evaluations (which follows its epochs where the
    recipe evaluates once per epoch)."""
    lr: float
    batch_size: int
    epochs: int
    seed: int
    evals: int                         # dev evaluations during the run: part4/recipe.py's evaluations counts them


def job_of(result):
    """The Job a run's results were made by."""
    return Job(lr=result["lr"], batch_size=result["batch_size"], epochs=result["epochs"], seed=result["seed"],
               evals=as_recorded_now(result["settings"])["dev_evaluations"])


@dataclass(frozen=True)
class Config:
    """What every run of one task shares: the command's Settings (part4/cli.py; each value there, once) and what is the
    task's own, made for the task (task_config)."""
    task: str
    command: object                    # the Settings of the command line
    recipe: object                     # the task's Recipe (part4/recipe.py) as this command runs it: the paper's batch
    #                                    size and epochs; the glue command evaluates MNLI and QQP once per epoch
    grouped: bool                      # training batches grouped by length
    test_dir: str = None               # --glue-submission: where each run writes its test-set predictions


def task_config(settings, task, family, once_per_epoch=()):
    """A task's Config from the command's Settings: the task's recipe (evaluated once per epoch for the tasks in
    once_per_epoch: the glue command's MNLI and QQP); --group-by-length, else the family's."""
    recipe = replace(RECIPES[task], evals=None) if task in once_per_epoch else RECIPES[task]
    return Config(task=task, command=settings, recipe=recipe,
                  grouped=family.grouped if settings.grouped is None else settings.grouped,
                  test_dir=runs_folder(settings.submission))


def runs_folder(submission):
    """Where each run writes its test-set predictions: DIR/runs/<run name>/ (None without --glue-submission)."""
    return os.path.join(submission, "runs") if submission else None


def eval_every(evals, steps, cut):
    """Steps between two dev evaluations: steps // evals (evals: the run's count, Job.evals); a run cut by
    --max-train-examples (cut) evaluates no more often than every CUT_EVAL_EVERY steps (its curve has fewer points; a
    full run keeps the recipe's, the article's ~30), unless --evals was given (cut is then False)."""
    every = max(1, steps // evals)
    return max(every, min(CUT_EVAL_EVERY, steps)) if cut else every


@dataclass(frozen=True)
class Where:
    """Where a command runs: its device, the autocast dtype there (None: fp32), and the processes torchrun started."""
    device: torch.device
    dtype: object
    processes: object


@dataclass(frozen=True)
class Fit:
    """One run in progress: the model, its optimiser and schedule, the task's family and data, where it runs
    (device, autocast dtype, the Run around the loop) and its log."""
    model: torch.nn.Module
    opt: torch.optim.Optimizer
    sched: object
    family: object
    data: dict
    device: torch.device
    dtype: object
    run: Run
    report: Report


# --- a run's name, files and recorded settings ---

def file_name(head, lr=None, batch=None, epochs=None, seed=None, grid=None, seeds=None, init="pretrained", tag=None):
    """The one builder of result names, for runs, summaries and tables alike:
    part4_<head>[_lr<lr>][_bs<b>][_ep<e>][_seed<s>][_grid_<g>][_seeds<N>][_random-init][_<tag>], a part left out
    where it is None (each caller leaves out what is the paper's and what its name need not tell apart)."""
    parts = [f"part4_{head}", lr is not None and f"lr{lr_tag(lr)}", batch is not None and f"bs{batch}",
             epochs is not None and f"ep{epochs}", seed is not None and f"seed{seed}", grid and f"grid_{grid}",
             seeds and f"seeds{seeds}", init == "random" and "random-init", tag]
    return "_".join(p for p in parts if p)


def unless_paper(value, paper):
    """A setting for a file name: None (left out) where it is the paper's."""
    return None if value == paper else value


def run_name(config, job):
    """part4_<task>_lr<lr>[_bs<b>][_ep<e>][_seed<s>][_random-init][_<tag>]: batch and epochs when they are not the
    paper's for the task, the seed with --seeds or when it is not 0."""
    c = config.command
    return file_name(config.task, job.lr, unless_paper(job.batch_size, config.recipe.batch_size),
                     unless_paper(job.epochs, config.recipe.epochs), job.seed if (c.seeds or job.seed != 0) else None,
                     init=c.init, tag=c.run_tag)


def run_settings(config, job, family, train_rows, dtype, processes):
    """Everything that decides a run's numbers: a checkpoint or a result of other settings is never reused. The
    command's settings declared as recorded with a run (part4/cli.py), each as this run resolved it: its task, its
    Job's rate, batch size, epochs and seed, its family's input length and windows, the dtype it computed in (the
    autocast dtype: "fp32", none, or "bf16"); then its batches grouped or not, its count of dev evaluations, its
    training rows and processes. How the run is computed (padding-free steps, the fused AdamW kernel) changes its
    numbers by float rounding only, as any kernel does: it is recorded with the results (computation), not here, so
    results of either way stay valid."""
    ran = {"task": config.task, "lr": job.lr, "batch_size": job.batch_size, "epochs": job.epochs, "seed": job.seed,
           "max_len": family.max_len, "stride": family.stride, "dtype": DTYPE_NAMES.get(dtype, str(dtype))}
    return {**recorded(config.command, RUN, portable), **ran, "grouped": config.grouped,
            "dev_evaluations": job.evals, "train_rows": train_rows, "processes": processes.world}


def summary_name(config, job):
    """part4_<task>_grid_<grid>[_seeds<N>]... or part4_<task>_lr<lr>[_bs<b>][_ep<e>]_seeds<N>..., with the init and
    the tag: a grid's summary of other batch sizes or epochs is told apart by its runs (summarised_runs)."""
    c = config.command
    if c.grid:
        return file_name(config.task, grid=c.grid, seeds=c.seeds, init=c.init, tag=c.run_tag)
    return file_name(config.task, job.lr, unless_paper(job.batch_size, config.recipe.batch_size),
                     unless_paper(job.epochs, config.recipe.epochs), seeds=c.seeds, init=c.init, tag=c.run_tag)


def summarised_runs(saved):
    """What a summary's results depend on: the runs it summarises (a grid's of other batch sizes differ)."""
    return {"runs": sorted(r["name"] if isinstance(r, dict) else r for r in saved.get("runs", []))}


def checkpoint_path(config, name):
    return os.path.join(config.command.results_dir, name + ".checkpoint")


def results_path(config, job):
    return os.path.join(config.command.results_dir, run_name(config, job) + ".json")


def model_folders(config, jobs):
    """Where --save-model puts each run's model: the folder itself for one run, a subfolder per run for several."""
    folder = config.command.save_model
    if not folder:
        return []
    return [os.path.join(folder, run_name(config, job)) for job in jobs] if config.command.reuse else [folder]


# --- the runs of one task: planned, the data prepared once, this process's share, those done before ---

@dataclass(frozen=True)
class Plan:
    """The runs of one task, as planned: the jobs, the data read and tokenised once for all of them, how the processes
    share the work ("data": every run by all of them, each taking part of every batch; "runs": run k by process
    k % N alone), and the report their skipped lines go to."""
    jobs: list
    data: dict
    mode: str
    where: Where
    report: Report
    earlier: dict                      # {k: the earlier results of run k} for the runs of this process done before

    def mine(self):
        """The runs this process takes part in, by their place in jobs."""
        p = self.where.processes
        return [k for k in range(len(self.jobs)) if self.mode == "data" or k % p.world == p.rank]

    def sharing(self):
        """The processes that train one run together: all of them in data mode, each alone in runs mode."""
        return self.where.processes if self.mode == "data" else ALONE


def plan_runs(config, family, sources, jobs, where, report, summary=False, header=()):
    """Every run of one task's command planned: how the processes share them, the inputs checked and the data read and
    tokenised once, the header lines said (and with them how the work is split), and the runs done before (where runs
    are reused) found. report: the summary's or the table's; summary: it is to be written (a summary of --grid or
    --seeds), and is never one of other runs."""
    processes = where.processes
    mode = work_split(config.command.parallel, config.command.many, processes, [job.batch_size for job in jobs])
    data = all_agree(processes, partial(prepare, config, family, sources, jobs, where.dtype))
    if summary:
        check_not_replaced(os.path.join(config.command.results_dir, report.name + ".json"),
                           {"runs": sorted(run_name(config, job) for job in jobs)}, "summarises other runs",
                           recorded=summarised_runs)
    for line in list(header) + ([split_line(mode, processes, len(jobs))] if processes.launched else []):
        report.say(line)
    plan = Plan(jobs=jobs, data=data, mode=mode, where=where, report=report, earlier={})
    train_rows = len(data["train"]["input_ids"])
    return replace(plan, earlier={k: e for k in plan.mine() if (e := done_before(config, jobs[k], family, train_rows,
                                                                                  where.dtype))})


def earlier_result(plan, k):
    """Run k's earlier results when it was done before for the same settings (marked skipped, and said on rank 0 in
    its turn), else None: the run is to be trained."""
    earlier = plan.earlier.get(k)
    if earlier and plan.where.processes.main:
        plan.report.say(skipped_line(earlier))
    return {**earlier, "skipped": True} if earlier else None


def skipped_line(result):
    return f"run {result['name']}: its results already exist for the same settings ({result['name']}.json): skipped"


def collected(plan, mine):
    """Every run's results in the order of plan.jobs, on rank 0 (None elsewhere); mine: {k: results} of the runs this
    process took part in (None where another process holds them). In runs mode the processes' results are gathered,
    and the skipped runs of the other processes said after all are done."""
    processes = plan.where.processes
    mine = {k: {**r, "process": processes.rank} for k, r in mine.items() if r is not None}
    if plan.mode == "runs":
        mine = {k: r for part in gather(processes, mine) for k, r in part.items()}
        for k in sorted(mine) if processes.main else []:
            if mine[k].get("skipped") and mine[k]["process"] != processes.rank:
                plan.report.say(skipped_line(mine[k]))
    return [mine[k] for k in range(len(plan.jobs))] if processes.main else None


def done_before(config, job, family, train_rows, dtype):
    """Where runs are reused, a job's results that exist for the same settings (and its test-set predictions, with
    --glue-submission), else None."""
    earlier = reusable(config, job, run_settings(config, job, family, train_rows, dtype, ALONE))
    files = (earlier or {}).get("test_predictions")
    if earlier and config.test_dir and not (files and all(os.path.isfile(os.path.join(config.test_dir, f))
                                                          for f in files)):
        return None                                    # its test predictions are missing: the run is run again
    return earlier


def reusable(config, job, settings):
    """Where runs are reused (grids, seeds, glue), the earlier results of this job for the same settings, else None.
    The count of dev evaluations is left out: it draws the learning curve and changes no final number (evaluation
    uses no random numbers), so a single run with the article's 30 serves the glue command's once per epoch."""
    if not config.command.reuse:
        return None
    return existing_result(results_path(config, job), settings, ignore=("processes", "dev_evaluations"))


def check_not_overwritten(config, jobs, family, train_rows, dtype):
    """No run replaces the results of a run with other settings: stop before any training, naming what differs."""
    for job in jobs:
        ours = run_settings(config, job, family, train_rows, dtype, ALONE)
        if not reusable(config, job, ours):            # a reused result is not overwritten
            check_not_replaced(results_path(config, job), ours, "holds a result of other settings")


def prepare(config, family, sources, jobs, dtype):
    """Check every input (the folders we write, the model read for what it holds and its weights loaded once, the
    data, the window length, results of other settings in the way), then read the data, cut it (--max-train-examples,
    --max-dev-examples) and tokenise it once, for every run of this invocation. What a cut run leaves out is kept as
    counts (n_train_all, n_dev_all), and the majority class is the whole training set's."""
    c = config.command
    check_writable_dir(c.results_dir, "--results-dir")
    for folder in model_folders(config, jobs):
        check_model_target(folder, "--save-model")
    preflight([model_problem(c.model, "--model"), *family.data_problems(sources)])
    checkpoint = read_checkpoint(c.model, "--model", weights=c.init == "pretrained")    # its config, files, tokenizer
    check_positions(family.max_len, checkpoint.config)
    head = checked_head(config, family)
    train_all, devs_all = family.read(sources)
    train = train_all[:c.max_train_examples]
    devs = {name: d[:c.max_dev_examples] for name, d in devs_all.items()}
    if not train or not all(devs.values()):
        raise Fatal(f"no {'training' if not train else 'dev'} examples for {config.task}")
    tests = family.read_tests(sources) if config.test_dir else {}
    tok = checkpoint.tokenizer
    enc_train, enc_devs = family.encode(tok, train, devs)
    if not enc_train["input_ids"]:
        raise Fatal(f"no usable training examples for {config.task}")
    check_not_overwritten(config, jobs, family, len(enc_train["input_ids"]), dtype)
    return {"train": enc_train, "devs": enc_devs, "tok": tok, "checkpoint": checkpoint, "head": head,
            "n_train": len(train), "n_train_all": len(train_all),
            "n_dev": {name: len(d) for name, d in devs.items()}, "n_dev_all": {k: len(d) for k, d in devs_all.items()},
            "majority": family.majority(train_all), "tests": family.encode_tests(tok, tests) if tests else {}}


def checked_head(config, family):
    """The checkpoint's weights loaded once before any work (then let go), so that its loading report and its task
    head (--head) are refused before the first line, not at the start of a later run: the Head every run of the task
    gets. None for --init random, which reads no weights."""
    c = config.command
    if c.init != "pretrained":
        return None
    return load_model(family.model_class, c.model, head=c.head, **family.model_kwargs)[1]


# --- a run's results: its JSON and log, the model kept when asked, its curve; the summaries of seeds and grids ---

def computation(padding_free, opt):
    """How the run was computed, beside its settings (which decide its numbers): padding-free training steps or
    padded ones, AdamW's fused kernel or its loop of tensor operations."""
    return {"padding_free": padding_free, "fused_adamw": bool(opt.param_groups[0].get("fused"))}


def best_seen(curve, family):
    """The evaluation with the best dev score in Table 1's metric (MCC for CoLA, F1 for MRPC, Spearman for STS-B),
    the first of any ties: reported beside the result, never taken for it."""
    return max(curve, key=lambda c: family.selection(c["dev"]))


def save_results(fit, config, job, n):
    """The results JSON and log of a run (n: its steps, warmup steps, scores before and after, curve and seconds;
    where it ran, its settings and computation), the model kept when asked, the task's own outputs (its family's
    extra_outputs: GLUE's test-set predictions with --glue-submission), the checkpoint removed and the learning curve
    drawn. Returns the results."""
    c, report, best = config.command, fit.report, best_seen(n["curve"], fit.family)
    result = {"name": report.name, "task": config.task, "model": portable(c.model), "lr": job.lr,
              "batch_size": job.batch_size, "epochs": job.epochs, "steps": n["steps"], "warmup_steps": n["warmup_steps"],
              "seed": job.seed, "device": str(fit.device), "before": n["before"], "final": n["final"], "curve": n["curve"],
              "best_during_training": {"step": best["step"], "dev": best["dev"]}, "seconds": n["seconds"],
              "train_examples": fit.data["n_train"], "train_rows": len(fit.data["train"]["input_ids"]),
              **fit.family.summary(fit.data["train"]), "settings": fit.run.settings,
              "weights": loaded_record(fit.data["checkpoint"], fit.data["head"]) if c.init == "pretrained" else None,
              "computation": computation(is_padding_free(fit.model), fit.opt)}
    if c.save_model:
        result["saved_model"] = portable(save_model(fit.model, fit.data["tok"], model_folders(config, [job])[0]))
        report.say(f"model saved to {result['saved_model']} (config, safetensors weights, tokenizer)")
    result |= fit.family.extra_outputs(fit, config.test_dir)
    report.save(result, cli=recorded_command(c, task=config.task), device=fit.device)
    fit.run.remove_checkpoint()
    line_plot(os.path.join(c.results_dir, report.name + "_curve.png"), [p["step"] for p in n["curve"]],
              {"train loss": [p["train_loss"] for p in n["curve"]]}, "step",
              right=("dev score", [fit.family.selection(p["dev"]) for p in n["curve"]]))
    return result


def recorded_command(settings, **ran):
    """The command line as a results file records it: its argv, and its settings as given (ran: a task's own, its
    task)."""
    return command_line(settings.argv, cli.flags_record(settings, **ran))


def save_model(model, tok, path):
    """save_pretrained into a temporary folder beside path, then rename: never half a model folder."""
    def write(tmp):
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return replace_folder_atomically(path, write)


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
    c = config.command
    report.save({"task": config.task, "model": portable(c.model), **payload},
                cli=recorded_command(c, task=config.task), device=device)


if __name__ == "__main__":
    sys.exit(not_a_script("part4/runs.py", "bert_part4_finetune.py (python bert_part4_finetune.py --help)"))
