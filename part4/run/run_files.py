"""One fine-tuning run's settings and files: what a run is (Job: what a grid or restarts vary; TaskConfig: what a task's
runs share, made from the command's Settings; RunSettings: everything one run reads, in the recipe's words, made once
by the plan, and the settings its files record, derived from it), the name its files share, its results reused for the
same settings and never replaced by other ones, and its checkpoint written and read back to resume bitwise (refused
when of other settings; the step the run reached kept beside it). The run itself, its results saved, is
part4/run/training_run.py's; the summaries of restarts and grids part4/run/summaries.py's; the paper's settings and
grids are in part4/paper/recipe.py. A checkpoint holds tensors and plain values only: it loads with weights_only."""

import json
import os
import random
from dataclasses import dataclass, fields

import numpy as np
import torch

from part4.command_line.declarations import Fatal, settings_diff
from part4.command_line.fine_tune_settings import as_recorded_now
from part4.models.loading import gather
from part4.output.results_files import command_line, portable, read_json, read_results, write_atomic
from part4.paper.article import ARTICLE_RUN
from part4.paper.recipe import lr_tag

# --- a run's settings: what a grid varies (Job), what a task's runs share (TaskConfig), all one run reads ---

@dataclass(frozen=True)
class Job:
    """One run: what a grid or restarts vary, and its count of dev evaluations (which follows its epochs where the
    recipe evaluates once per epoch)."""
    lr: float
    batch_size: int
    epochs: int
    seed: int
    dev_evaluations: int               # dev evaluations asked of the run (--evals resolved: planned_jobs); it makes
    #                                    part4/paper/recipe.py's evaluations_made of them: more where the cadence does
    #                                    not divide its steps (RTE: 34 of 30), fewer when cut


def job_of(result):
    """The Job a run's results were made by."""
    return Job(lr=result["lr"], batch_size=result["batch_size"], epochs=result["epochs"], seed=result["seed"],
               dev_evaluations=as_recorded_now(result["settings"])["dev_evaluations"])


@dataclass(frozen=True)
class TaskConfig:
    """What every run of one task shares: the command's Settings (declared in part4/command_line/fine_tune_settings.py,
    made once by part4/command_line/fine_tune_settings.py; each value there, once) and what is the task's own, made for
    the task (part4/run/command.py task_inputs)."""
    task: str
    settings: object                   # the Settings of the command line
    recipe: object                     # the task's Recipe (part4/paper/recipe.py) as this command runs it: the paper's batch
    #                                    size and epochs; the glue command evaluates MNLI and QQP once per epoch
    grouped: bool                      # training batches grouped by length
    test_dir: str = None               # --glue-submission: where each run writes its test-set predictions


def runs_folder(submission):
    """Where each run writes its test-set predictions: DIR/runs/<run name>/ (None without --glue-submission)."""
    return os.path.join(submission, "runs") if submission else None


@dataclass(frozen=True)
class RunSettings:
    """Everything one fine-tune reads, in the recipe's words: bert_part4_finetune.py's fine_tune and its run
    (part4/run/training_run.py) take their settings from here alone. Made once by the plan (part4/run/command.py
    Command.run_settings) from the command's Settings, the task's recipe and family, a Job and where the command
    runs, each value as this run resolved it; what its results and checkpoint record (recorded) and the command line
    its results keep (argv, flags) are made there from it and kept beside it. Its fields in four groups: the recipe
    (what fine_tune's lines read), where and how the steps are computed, the data, the files."""
    # the recipe: the task, the weights it starts from, the article's AdamW, schedule, clipping and seed
    task: str
    model: str                         # the pre-trained weights: a Hub id or a local folder (--model)
    init: str                          # "pretrained" (the paper) or "random" (--init random: every weight random)
    head: str                          # the output layer asked for: "new" (the paper) or "checkpoint" (--head)
    lr: float                          # the peak learning rate
    batch_size: int
    epochs: int
    warmup: float                      # the share of the steps with a rising learning rate
    weight_decay: float                # AdamW's, none on biases and LayerNorm
    clip: float                        # the gradients' global norm, at most
    dev_evaluations: int               # dev evaluations asked of it (it makes evaluations_made of them, as Job says)
    seed: int
    # where and how its steps are computed, and how its batches are formed (the recipe's lines read the same)
    device: torch.device
    autocast_dtype: object             # a torch dtype (None: fp32), --dtype as it resolves on the device
    padding_free_steps: bool           # each training step on the real tokens only (--padding-free, where the model
    #                                    allows it: part4/data/batches.py padding_free_problem)
    dropout_masks: str                 # how its padding-free steps draw their dropout masks on its device and dtype
    #                                    (part4/data/batches.py dropout_masks; MASKS_PADDED where its steps are padded)
    fused_adamw: bool                  # AdamW's fused kernel (--fused-adamw, where torch has one)
    pad_to_multiple_of: int            # each batch's width rounded up to a multiple of it (1: its own longest row)
    cudnn_attention: bool              # the training steps' attention may run on cuDNN's kernels (CUDA)
    processes: object                  # those that train the run together (part4/models/loading.py Processes): all of
    #                                    them when every batch is split, this one alone when whole runs are shared
    quiet: bool                        # its lines not printed (a process other than the first)
    grouped: bool                      # training batches grouped by length
    # its data: the inputs as encoded, and how much of the task's it trains on
    max_len: int                       # the longest input, in tokens (SQuAD: the window)
    stride: int                        # SQuAD: the tokens two windows share (None elsewhere)
    train_rows: int                    # the rows of its training set, encoded (SQuAD: windows)
    cut_cadence: bool                  # its training set cut (--max-train-examples) and --evals not given: it evaluates
    #                                    as often as a cut run can (part4/paper/recipe.py eval_every's cut)
    cut_by: tuple                      # the flags that cut its data, as given ('--max-train-examples', ...)
    # its files: the log, results, checkpoint and saved model, and what they record of it
    name: str                          # its files' name: results/<name>.log, .json, .checkpoint
    results_dir: str
    saved_model: str                   # the folder --save-model keeps its model in (None: not kept)
    checkpoint_every: float            # seconds between its checkpoints, at least (--checkpoint-every)
    asked: dict                        # the flags that choose how its steps are computed, as given ({"padding_free":
    #                                    ..., "cudnn_attention": ...}): its preamble says where one could not be followed
    argv: tuple                        # the command line as given (its results record it, its checkpoint says how to
    #                                    resume with it)
    flags: dict                        # the command's settings as given, as its results record them (given_flags)
    recorded: dict                     # everything that decides its numbers, as its results and checkpoint record it
    test_dir: str = None               # --glue-submission: where it writes its test-set predictions


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


def file_name(subject, parts=NameParts(), paper=(None, None)):
    """The one builder of result names, for runs, summaries and tables alike:
    part4_<subject>[_lr<lr>][_bs<b>][_ep<e>][_seed<s>][_grid_<g>][_seeds<N>][_random-init][_<tag>] (subject: the task,
    or glue_table); the batch size and epochs left out where they are the paper's (paper: its batch size and epochs
    for the task)."""
    p = parts
    batch, epochs = (None if given == ours else given for given, ours in zip((p.batch, p.epochs), paper))
    words = [f"part4_{subject}", p.lr is not None and f"lr{lr_tag(p.lr)}", batch is not None and f"bs{batch}",
             epochs is not None and f"ep{epochs}", p.seed is not None and f"seed{p.seed}", p.grid and f"grid_{p.grid}",
             p.seeds and f"seeds{p.seeds}", p.init == "random" and "random-init", p.tag]
    return "_".join(w for w in words if w)


def run_name(config, job):
    """part4_<task>_lr<lr>[_bs<b>][_ep<e>][_seed<s>][_random-init][_<tag>]: batch and epochs when they are not the
    paper's for the task, the seed with --seeds or when it is not 0."""
    c = config.settings
    return file_name(config.task, NameParts(lr=job.lr, batch=job.batch_size, epochs=job.epochs,
                                            seed=job.seed if (c.seeds or job.seed != 0) else None,
                                            init=c.init, tag=c.run_tag), paper=(config.recipe.batch_size, config.recipe.epochs))


def summary_name(config, job):
    """part4_<task>_grid_<grid>[_seeds<N>]... or part4_<task>_lr<lr>[_bs<b>][_ep<e>]_seeds<N>..., with the init and
    the tag: a grid's summary of other batch sizes or epochs is told apart by its runs (summarised_runs)."""
    c = config.settings
    if c.grid:
        return file_name(config.task, NameParts(grid=c.grid, seeds=c.seeds, init=c.init, tag=c.run_tag))
    return file_name(config.task, NameParts(lr=job.lr, batch=job.batch_size, epochs=job.epochs, seeds=c.seeds,
                                            init=c.init, tag=c.run_tag), paper=(config.recipe.batch_size, config.recipe.epochs))


def summarised_runs(saved):
    """What a summary's results depend on: the runs it summarises (a grid's of other batch sizes differ)."""
    return {"runs": sorted(r["name"] if isinstance(r, dict) else r for r in saved.get("runs", []))}


def saved_model_folders(settings, names):
    """Where --save-model puts the models of the runs of these names: the folder itself for one run, a subfolder per
    run for several (settings: the command's)."""
    folder = settings.save_model
    if not folder:
        return []
    return [os.path.join(folder, name) for name in names] if settings.reuse else [folder]


def given_flags(settings, **ran):
    """The command's settings as given, as a results file records them (ran: a task's own, its task): every flag's
    value, JSON values. Under a grid no single learning rate was given: lr is null, the grid names them."""
    flags = {f.name: getattr(settings, f.name) for f in fields(settings) if f.metadata.get("flag") is not None}
    return {**flags, "lr": None if settings.grid else settings.lr, "tasks": list(settings.tasks), **ran}


def recorded_command(settings, **ran):
    """The command line as a results file records it, when the file is written (its paths made portable then, as they
    stand): its argv, and its settings as given (given_flags)."""
    return command_line(settings.argv, given_flags(settings, **ran))


# --- One results file: reused for the same settings, never replaced by other ones ---

def existing_result(path, settings, ignore=("processes",)):
    """The results JSON at path when it exists for the same settings (keys in ignore aside), else None."""
    done = read_results(path)
    if done is None:
        return None

    def same(s):
        return {k: v for k, v in s.items() if k not in ignore}

    theirs = done.get("settings") or {}
    return done if same(as_recorded_now(theirs, beside=settings)) == same(as_recorded_now(settings, beside=theirs)) else None


def check_not_replaced(path, ours, what, held=None, ignore=("processes",)):
    """The one guard of every results file (a run's, a summary's, a table's): it is never replaced by one of other
    settings (a quick check with --max-train-examples must not overwrite hours of a full run). Stops before any
    training, naming what differs. held(saved): the settings a saved file holds (default: its "settings")."""
    saved = read_results(path)
    if saved is None:
        return
    if held is None:                            # a run's settings, each side as this version records them
        theirs, ours = as_recorded_now(saved.get("settings"), beside=ours), as_recorded_now(ours, beside=saved.get("settings"))
    else:
        theirs = held(saved)
    if theirs is None:
        raise Fatal(f"{portable(path)}: a result written by an older version of this script (it records no "
                    f"settings); refusing to overwrite it: move it away, or pass --run-tag or --results-dir")
    diff = settings_diff(theirs, ours, ignore)
    diff = diff if len(diff) < 400 else diff[:400] + " ..."
    if diff:
        raise Fatal(f"{portable(path)}: {what} ({diff}); refusing to overwrite it: pass --run-tag or --results-dir, or "
                    f"delete it")


# A folder --save-model wrote holds, beside the model, the run that saved it: {"name": its name, "settings": as its
# results record them}. Only a run of the same settings replaces it (the same command run again).
SAVED_BY = "part4_saved_by.json"


def check_model_not_replaced(run):
    """The guard of a --save-model folder (run: a RunSettings): a model folder already there is replaced only by a run
    of the same settings as the one that saved it (its SAVED_BY); the model the run starts from, a model this script
    did not save and one saved by a run of other settings are refused before any training, naming which."""
    folder = run.saved_model
    if not os.path.isdir(folder) or not os.listdir(folder):
        return
    refused = f"--save-model {folder}: "
    if os.path.realpath(folder) == os.path.realpath(os.path.expanduser(run.model)):
        raise Fatal(refused + "the model this run starts from (--model); refusing to replace it: choose another folder")
    saved_by = read_json(os.path.join(folder, SAVED_BY))
    if saved_by is None:
        raise Fatal(refused + f"a model folder with no {SAVED_BY} (saved by hand, by another program or by an "
                              "earlier version of this script): its run cannot be told; refusing to replace it: choose "
                              "another folder, or delete it")
    theirs = saved_by.get("settings") or {}
    diff = settings_diff(as_recorded_now(theirs, beside=run.recorded), as_recorded_now(run.recorded, beside=theirs),
                         ("processes", "dev_evaluations"))        # as existing_result compares a run's results
    if diff:
        raise Fatal(refused + f"a model saved by a run of other settings ({diff[:400]}); refusing to replace it: "
                              "choose another folder, or delete it")


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


def save_atomic(obj, path, kept=""):
    """torch.save, written atomically (see write_atomic in part4/output/results_files.py): a checkpoint is whole or absent;
    one that cannot be written (no space left) is one line, ending with kept."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomic(path, lambda tmp: torch.save(obj, tmp), kept)


# --- the checkpoint of one run: written, read back, refused when of other settings ---

class Checkpoint:
    """The checkpoint file of one run (path: results/<run name>.checkpoint) of these settings (recorded: as the run's
    results record them, RunSettings.recorded), shared by the processes that train the run together (each keeps its
    own RNG states and losses in it) on device."""

    def __init__(self, path, recorded, processes, device, again=""):
        self.path, self.recorded, self.processes, self.device = path, recorded, processes, device
        self.again, self.step_kept = again, None        # the command that resumes it; the step of the one on disk
        # results/<run name>.progress, beside it: {"step", "settings"}, the step the run last reached (reached). What an
        # interrupted run of these settings had reached is read once, here: a run resumed from an older checkpoint, or
        # started over, says how many steps it repeats (None: none kept, unreadable, as it is only a note, or another
        # run's settings)
        self.progress, self.reached_before = os.path.splitext(path)[0] + ".progress", None
        try:
            with open(self.progress, encoding="utf-8") as f:
                kept = json.load(f)
            step = int(kept["step"])
        except (OSError, ValueError, TypeError, KeyError):
            return
        if as_recorded_now(kept.get("settings"), beside=recorded) == as_recorded_now(recorded, beside=kept.get("settings")):
            self.reached_before = step

    def write_checkpoint(self, model, opt, sched, state, *, losses):
        """Rank 0 writes the model, optimiser, schedule and state, with every process's unsummed losses (losses: this
        process's) and RNG states: what a resumed run needs to continue exactly where this one stands. Every process
        calls it (it gathers), alike on all of them."""
        everyone = gather(self.processes, {"losses": [float(x) for x in losses], "rng": rng_states()})
        if self.processes.is_main:
            save_atomic({"state": plain(state), "model": model.state_dict(), "opt": opt.state_dict(),
                         "sched": sched.state_dict(), "processes": everyone}, self.path, self.kept())
            self.step_kept = state["step"]

    def kept(self):
        """What a run keeps when a write fails, and the command that goes on, as the end of its one line."""
        kept = ("no checkpoint yet: the run starts over" if self.step_kept is None else
                f"the checkpoint at step {self.step_kept} is kept")
        return f"; {kept}; to resume once there is room: {self.again or 'run the same command again'}"

    def load_into(self, model, opt, sched, *, log, steps):
        """None when there is no checkpoint; else (its state, this process's unsummed losses on the run's device), after
        loading the model, optimiser, schedule and this process's RNG states, its log lines said again and a line saying
        so, with the steps it repeats where the interrupted run went past it. A checkpoint of other settings is
        refused."""
        path = self.path
        if not os.path.isfile(path):
            return None
        try:      # weights_only: a planted pickle is refused before anything in it can run
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
            saved = ckpt["state"]["settings"]
        except Exception as e:  # a truncated, foreign or code-carrying file: torch raises many kinds
            raise Fatal(f"{path}: not a checkpoint of this script ({type(e).__name__}); nothing in it was run; "
                        f"delete it to start over")
        saved, ours = as_recorded_now(saved, beside=self.recorded), as_recorded_now(self.recorded, beside=saved)
        if saved != ours:
            raise Fatal(f"{path}: a checkpoint from other settings ({settings_diff(saved, ours)}): refusing to "
                        f"resume from it; delete it to start this run over")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])          # its AdamW kernel (fused or not) comes with it: recorded as computed
        sched.load_state_dict(ckpt["sched"])
        mine = ckpt["processes"][self.processes.rank]
        set_rng_states(mine["rng"])
        state = ckpt["state"]
        self.step_kept = state["step"]
        log.say_again(state["lines"])
        reached = self.reached_before
        repeated = (f"; it had reached step {reached}: {reached - state['step']} steps repeated"
                    if reached is not None and reached > state["step"] else "")
        log.say(f"(resumed from {path} at step {state['step']}/{steps}: the lines above come from the interrupted "
                   f"run{repeated})")
        return state, [torch.tensor(x, device=self.device) for x in mine["losses"]]   # beside the losses to come

    # --- the step reached, kept beside the checkpoint: what a run resumed from an older checkpoint repeats ---

    def keep_step_reached(self, step):
        """Keep the step the run has reached (at each dev evaluation; a few bytes, written atomically by the first
        process), so that a run killed past its last checkpoint says, resumed, how many steps it repeats."""
        if self.processes.is_main:
            os.makedirs(os.path.dirname(os.path.abspath(self.progress)), exist_ok=True)
            write_atomic(self.progress, json.dumps({"step": step, "settings": self.recorded}) + "\n")

    def remove(self):
        """The checkpoint and its step reached removed: the results are written, the checkpoint is spent."""
        for path in (self.path, self.progress):
            if os.path.exists(path):
                os.remove(path)


def article_setting(job, init):
    """Is this run in the setting the article's numbers are for (batch 32, 3 epochs, seed 0, pre-trained weights)?"""
    return (job.batch_size, job.epochs, job.seed) == ARTICLE_RUN and init == "pretrained"
