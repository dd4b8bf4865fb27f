"""One fine-tuning command across its tasks (`Command`: where it runs, each task's head family and share, the log
each task's runs go to, their results collected and summed up, the GLUE table at the end), and the plan of one task's
runs (`Plan`): which runs, how the processes share them (every batch split, or whole runs each), every input checked
(`check_task_inputs`) and the data read and tokenised once for all of them (`read_data`), each run's settings made once
(part4/run/run_files.py RunSettings: all that bert_part4_finetune.py's fine_tune reads), the runs done before for the
same settings found (and skipped), and every run's results collected from the processes. It answers the recipe's
questions and never calls it: bert_part4_finetune.py loads each run's model and trains it itself. The processes
torchrun starts are joined, and an error every process stops on raised, by part4/models/loading.py's
`start_processes` and `all_agree`."""

import hashlib
import json
import os
from dataclasses import dataclass, replace
from typing import NamedTuple

import torch

from part4.command_line.declarations import RUN, Fatal, preflight, recorded_in
from part4.command_line.fine_tune_settings import computation_on
from part4.data.batches import MASKS_PADDED, dropout_masks, padding_free_problem
from part4.data.readers import Sources
from part4.models.loading import (
    ALONE,
    DTYPE_NAMES,
    all_agree,
    autocast_dtype,
    check_positions,
    gather,
    has_fused_adamw,
    load_model,
    model_problem,
    read_model_folder,
    start_processes,
)
from part4.output.results_files import Log, check_model_target, check_writable_dir, portable
from part4.paper.recipe import ONCE_PER_EPOCH, RECIPES, grid_description
from part4.run import summaries
from part4.run.run_files import (
    RunSettings,
    TaskConfig,
    check_model_not_replaced,
    check_not_replaced,
    existing_result,
    given_flags,
    recorded_command,
    run_name,
    runs_folder,
    saved_model_folders,
    summarised_runs,
    summary_name,
)
from part4.tasks.families import FAMILIES, Family, span_extraction

# --- One fine-tuning command across its tasks: where it runs, each task's share, the log its runs go to ---

class Command:
    """What bert_part4_finetune.py's main steps through:

        command = Command(settings)
        for inputs in command.task_inputs:
            plan = command.plan_task(inputs, jobs)   # every input checked, the data read once, the runs done before
            ...                                      # each run of this process's share (plan.runs[k], its settings)
            #                                          unless in plan.done_before
            command.collect(plan, results)
        return command.finish()
    """

    def __init__(self, settings):
        self.settings, self.rows = settings, {}
        self.device, self.processes = start_processes(settings.device, settings.backend)
        self.autocast_dtype = autocast_dtype(self.device, settings.dtype)       # None: fp32
        self.in_table = settings.task == "glue"    # every GLUE task, the lr chosen on dev, beside Table 1 (§4.1)
        if self.in_table:
            to_run, self.absent = summaries.runnable(settings)
            self.table_log = summaries.table_started(settings, to_run, self.absent, self.processes)
        else:
            to_run, self.absent, self.table_log = settings.tasks, {}, None
        once_per_epoch = ONCE_PER_EPOCH if self.in_table else ()
        self.task_inputs = [task_inputs(settings, name, once_per_epoch) for name in to_run]    # in the command's order

    def plan_task(self, inputs, jobs):
        """One task's runs planned (inputs: its TaskInputs; jobs: its runs): how the processes share them; every input
        checked and the data read and tokenised once (a bad input on any process stops every one, with its one line);
        each run's settings made (plan.runs); the runs done before for the same settings found (plan.done_before: not
        trained again); the header lines said (the grid, the work split). Those lines, the skipped runs' (Plan.skip)
        and the summary go to the GLUE table or to the task's own summary of its grid or restarts, which is never one
        of other runs."""
        config, family, c, processes = inputs.config, inputs.family, self.settings, self.processes
        if self.in_table:
            log = self.table_log
        else:
            log = Log(summary_name(config, jobs[0]), c.results_dir, quiet=not processes.is_main)
        mode = work_split(c.parallel, c.many, processes, [job.batch_size for job in jobs])
        with all_agree(processes):                  # a bad input on any process: every one stops, with its one line
            check_writable_dir(c.results_dir, "--results-dir")
            for folder in saved_model_folders(c, [run_name(config, job) for job in jobs]):
                check_model_target(folder, "--save-model")
            checked = check_task_inputs(config, family, inputs.sources)   # the model folder's weights loaded once to check them
            data = read_data(config, family, inputs.sources, checked)
            # the processes that train each run together: all of them in data mode, each process alone in runs mode
            runs = [self.run_settings(config, job, data, processes if mode == "data" else ALONE) for job in jobs]
            earlier = runs_done_before(config, runs, data.tests_fingerprint)
            for k, run in enumerate(runs):          # a model folder there: replaced only by a run of its settings
                if run.saved_model and k not in earlier:
                    check_model_not_replaced(run)
        if c.many and not self.in_table:            # the summary of --grid or --seeds: never one of other runs
            check_not_replaced(os.path.join(c.results_dir, log.name + ".json"),
                               {"runs": sorted(run.name for run in runs)}, "summarises other runs",
                               held=summarised_runs)
        if c.grid:          # 'rte: grid glue (paper §4.1): lr {5e-5, 4e-5, 3e-5, 2e-5} = 4 runs, x 2 seeds = 8 runs'
            log.say((f"{config.task}: " if self.in_table else "") + grid_description(c.grid, c.batch_size, c.epochs)
                    + (f", x {c.seeds} seeds = {len(jobs)} runs" if c.seeds else ""))
        if processes.launched:
            log.say(split_line(mode, processes, len(jobs)))
        # the runs this process takes part in: every one in data mode, run k by process k % N in runs mode
        mine = [k for k in range(len(jobs)) if mode == "data" or k % processes.world == processes.rank]
        return Plan(config=config, family=family, runs=runs, data=data, mode=mode, log=log, mine=mine,
                    done_before=earlier, processes=processes)

    def run_settings(self, config, job, data, processes):
        """One run's settings (part4/run/run_files.py RunSettings), all of them, each as this run resolves it: the
        command's (config.settings), the task's recipe, the job's, the task's data (data: TaskData, its head family
        and training rows), where the command runs (its device, the autocast dtype there; processes: those that train
        the run together; its lines printed on the first process only), how its steps are computed there
        (padding-free where --padding-free asks and the model allows it, AdamW fused where torch has a kernel, the
        batches' widths and attention's kernels as the device calls for: part4/command_line/fine_tune_settings.py
        computation_on), its files. What its results record (recorded) is everything that decides its numbers: a
        checkpoint or a result of other settings is never reused. How it is computed (padding-free steps, the fused
        AdamW) changes its numbers by float rounding only: its results record that apart (computation), so that
        results of either way stay valid."""
        c, device, family, name = config.settings, self.device, data.family, run_name(config, job)
        rows, packed = len(data.train["input_ids"]), c.padding_free and data.padding_free_problem is None
        how = computation_on(c, device.type)
        ran = {"task": config.task, "lr": job.lr, "batch_size": job.batch_size, "epochs": job.epochs, "seed": job.seed,
               "max_len": family.max_len, "stride": family.stride,
               "dtype": DTYPE_NAMES.get(self.autocast_dtype, str(self.autocast_dtype))}
        recorded = {**recorded_in(c, RUN, portable), **ran, "grouped": config.grouped,
                    "dev_evaluations": job.dev_evaluations, "train_rows": rows, "data": data.fingerprint,
                    "processes": processes.world}
        return RunSettings(task=config.task, model=c.model, init=c.init, head=c.head, lr=job.lr,
                           batch_size=job.batch_size, epochs=job.epochs, warmup=c.warmup, weight_decay=c.weight_decay,
                           clip=c.clip, dev_evaluations=job.dev_evaluations, seed=job.seed, device=device,
                           autocast_dtype=self.autocast_dtype, padding_free_steps=packed,
                           dropout_masks=dropout_masks(device, self.autocast_dtype) if packed else MASKS_PADDED,
                           fused_adamw=c.fused_adamw and has_fused_adamw(device),
                           pad_to_multiple_of=how["pad_to_multiple_of"], cudnn_attention=how["cudnn_attention"],
                           processes=processes, quiet=not self.processes.is_main, grouped=config.grouped,
                           max_len=family.max_len, stride=family.stride, train_rows=rows,
                           cut_cadence=c.evals is None and data.n_train < data.n_train_all,
                           cut_by=tuple(flag for flag, n in c.cuts.items() if n), name=name, results_dir=c.results_dir,
                           saved_model=next(iter(saved_model_folders(c, [name])), None), checkpoint_every=c.checkpoint_every,
                           asked={"padding_free": c.padding_free, "cudnn_attention": c.cudnn_attention},
                           argv=c.argv, flags=given_flags(c, task=config.task), recorded=recorded,
                           test_dir=config.test_dir)

    def collect(self, plan, results):
        """Every run's results gathered (results: {k: results} of the runs this process took part in, plan.mine, None
        where another process holds them; in runs mode the processes' results are gathered, and the skipped runs of the
        other processes said after all are done); on the first process the task's row of the GLUE table chosen, or its
        grid or restarts summed up."""
        processes = self.processes
        found = {k: {**r, "process": processes.rank} for k, r in results.items() if r is not None}
        if plan.mode == "runs":
            found = {k: r for part in gather(processes, found) for k, r in part.items()}
            if processes.is_main:
                for k in sorted(found):
                    if found[k].get("skipped") and found[k]["process"] != processes.rank:
                        plan.log.say(skipped_line(found[k]))
        if not processes.is_main:
            return
        results = [found[k] for k in range(len(plan.runs))]          # in the order of plan.runs
        if self.in_table:
            self.rows[plan.config.task] = summaries.choose(results, plan.family, plan.config, plan.data)
        elif self.settings.many:
            summaries.summarise(plan.config, plan.family, results, log=plan.log, device=self.device)

    def finish(self):
        """The GLUE table beside Table 1 (and the server's files), when the command is glue. Returns the exit code."""
        if self.processes.is_main and self.in_table:
            summaries.table_written(self.settings, self.rows, absent=self.absent, log=self.table_log,
                                    cli=recorded_command(self.settings), device=self.device)
        return 0


# --- Each task of the command: its TaskConfig, its head family, where its data comes from ---

class TaskInputs(NamedTuple):
    """One task's share of the command."""
    config: TaskConfig                 # its TaskConfig, made for it
    family: Family                     # its head family
    sources: Sources                   # where its data comes from


def task_inputs(settings, task, once_per_epoch=()):
    """One task's share of the command: its TaskConfig (the task's recipe, evaluated once per epoch for the tasks in
    once_per_epoch: the glue command's MNLI and QQP; --group-by-length, else the family's), its head family and where
    its data comes from."""
    windows = {"stride": settings.stride} if FAMILIES[task] is span_extraction else {}     # SQuAD's alone
    family = FAMILIES[task](task, settings.max_len, eval_batch_size=settings.eval_batch_size, **windows)
    recipe = replace(RECIPES[task], evals=None) if task in once_per_epoch else RECIPES[task]
    config = TaskConfig(task=task, settings=settings, recipe=recipe,
                        grouped=family.grouped if settings.group_by_length is None else settings.group_by_length,
                        test_dir=runs_folder(settings.glue_submission))
    sources = Sources(task=task, data_dir=settings.data_dir, train_data=settings.train_data, dev_data=settings.dev_data)
    return TaskInputs(config=config, family=family, sources=sources)


# --- The plan of one task's runs: the data read once, the work split, the runs done before ---

@dataclass(frozen=True)
class TaskData:
    """A task's data, read, cut and tokenised once for every run of the command (read_data), with its head family
    (how it encodes, computes its loss and scores) and what the model folder allows its steps (padding-free or not)."""
    family: object                     # the task's head family (part4/tasks/families.py)
    train: dict                        # the training set encoded: {"input_ids": [...], ...} (its family's encode)
    devs: dict                         # {dev set name: its encoded examples}
    tok: object                        # the model folder's tokenizer
    model_folder: object               # the model folder read (part4/models/loading.py read_model_folder)
    n_train: int                       # training examples used (after --max-train-examples)
    n_train_all: int                   # training examples in the data
    n_dev: dict                        # {dev set name: examples used} (after --max-dev-examples)
    n_dev_all: dict                    # {dev set name: examples in the data}
    majority: object                   # the majority class of the whole training set
    tests: dict                        # {server file: encoded test examples} with --glue-submission, else {}
    padding_free_problem: str          # why padding-free steps cannot compute the model (None: they can)
    fingerprint: str                   # the examples it trains and is scored on, after the cuts: the first 12 hex
    #                                    digits of the sha256 of them as JSON lines (read_data; a run records it: no
    #                                    result, checkpoint or saved model of other data is reused)
    tests_fingerprint: str             # the test sets' likewise (with --glue-submission; None without)
    output_layer: object               # how each run's output layer comes (part4/models/loading.py OutputLayer: a new
    #                                    layer, or the checkpoint's kept; found when check_task_inputs loaded them);
    #                                    None: --init random


@dataclass(frozen=True)
class Plan:
    """The runs of one task, as planned: its TaskConfig and family, each run's settings, the data read and tokenised
    once for all of them, how the processes share the work ("data": every run by all of them, each taking part of every
    batch; "runs": run k by process k % N alone), and the log their skipped lines go to."""
    config: TaskConfig
    family: object
    runs: list                         # each run's RunSettings, in the order of the jobs planned
    data: TaskData
    mode: str
    log: Log
    mine: list                         # the runs this process takes part in, by their place in runs
    done_before: dict                  # {k: the earlier results of run k}: runs not trained again
    processes: object                  # every process torchrun started (ALONE alone)

    def skip(self, k):
        """Run k's earlier results, marked skipped, its line said in its turn (on the first process; another
        process's are said in collect)."""
        if self.processes.is_main:
            self.log.say(skipped_line(self.done_before[k]))
        return {**self.done_before[k], "skipped": True}


def check_task_inputs(config, family, sources):
    """Every input of a task checked before any work: the model folder and the data (every problem in one line); the
    model folder read for what it holds (its config, files and tokenizer); its weights loaded once to check them, then
    let go (each run loads its own); whether padding-free steps can compute its architecture. Returns (the model folder
    read, how each run's output layer comes (None: --init random), why padding-free steps cannot compute the model
    (None: they can))."""
    c = config.settings
    preflight([model_problem(c.model, "--model"), *family.data_problems(sources)])
    model_folder = read_model_folder(c.model, "--model", weights=c.init == "pretrained")
    check_positions(family.max_len, model_folder.config)
    output_layer = None             # a loading report or a task head (--head) that cannot be: refused here
    if c.init == "pretrained":
        _, output_layer = load_model(family.model_class, c.model, head=c.head, **family.model_kwargs)
    with torch.device("meta"):      # the architecture alone, no weights: can padding-free steps compute it?
        why_padded = padding_free_problem(family.model_class.from_config(model_folder.config))
    return model_folder, output_layer, why_padded


def read_data(config, family, sources, checked):
    """The task's data read, cut (--max-train-examples, --max-dev-examples) and tokenised once with the model folder's
    tokenizer, for every run of the command, beside what check_task_inputs found (checked). What a cut run leaves out is
    kept as counts (n_train_all, n_dev_all), and the majority class is the whole training set's. The examples as
    read are fingerprinted (TaskData.fingerprint, tests_fingerprint): what the runs' results record of their data."""
    c = config.settings
    model_folder, output_layer, why_padded = checked
    train_all, devs_all = family.read(sources)
    train = train_all[:c.max_train_examples]
    devs = {name: d[:c.max_dev_examples] for name, d in devs_all.items()}
    if not train or not all(devs.values()):
        raise Fatal(f"no {'training' if not train else 'dev'} examples for {config.task}")
    tests = family.read_tests(sources) if config.test_dir else {}
    # the examples as read (lists, dicts, strings, numbers), each training example and each dev or test set as one line
    # of JSON, into one sha256: the same examples, the same print (and no copy of a whole training set as text)
    prints = []
    for rows in ([*train, *devs.items()], [*tests.items()]):
        digest = hashlib.sha256()
        for row in rows:
            digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
        prints.append(digest.hexdigest()[:12])
    tok = model_folder.tokenizer
    enc_train, enc_devs = family.encode(tok, train, devs)
    if not enc_train["input_ids"]:
        raise Fatal(f"no usable training examples for {config.task}")
    return TaskData(family=family, train=enc_train, devs=enc_devs, tok=tok, model_folder=model_folder,
                    n_train=len(train), n_train_all=len(train_all),
                    n_dev={name: len(d) for name, d in devs.items()}, n_dev_all={k: len(d) for k, d in devs_all.items()},
                    majority=family.majority(train_all), tests=family.encode_tests(tok, tests) if tests else {},
                    padding_free_problem=why_padded, output_layer=output_layer,
                    fingerprint=prints[0], tests_fingerprint=prints[1] if tests else None)


def runs_done_before(config, runs, tests_fingerprint):
    """{k: the earlier results of run k} where runs are reused (grids, seeds, glue) and its results exist for the same
    settings (with --glue-submission, its test-set predictions too, made from the same test sets (tests_fingerprint):
    missing, or of other test sets, it is run again). The count of dev
    evaluations is left out: it draws the learning curve and changes no final number (evaluation uses no random
    numbers), so a single run with the article's 30 serves the glue command's once per epoch; so are the processes.
    Every other run's results file, where one exists, is of the same settings: no run replaces a result of other
    settings (a quick check with --max-train-examples must not overwrite hours of a full run), stopped before any
    training."""
    earlier = {}
    for k, run in enumerate(runs):
        path = os.path.join(config.settings.results_dir, run.name + ".json")
        ours = run.recorded
        done = existing_result(path, ours, ignore=("processes", "dev_evaluations")) if config.settings.reuse else None
        if done is None:
            check_not_replaced(path, ours, "holds a result of other settings")
            continue
        files = done.get("test_predictions") or []          # with --glue-submission: of these test sets, all there
        same_tests = done.get("test_data", tests_fingerprint) == tests_fingerprint     # none: an earlier version's
        predicted = bool(files) and same_tests and all(
            os.path.isfile(os.path.join(config.test_dir, f)) for f in files)
        if not config.test_dir or predicted:
            earlier[k] = done
    return earlier


# --- how the processes share the work, and the lines that say so ---

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
    """The line that says how the processes torchrun started share the command's runs (work_split's mode)."""
    if mode == "data":
        return (f"work split: {processes.world} processes ({processes.backend}), data parallel: each of the {n_runs} run(s) "
                f"uses every process, each taking 1/{processes.world} of every batch")
    return (f"work split: {processes.world} processes ({processes.backend}), whole runs: process r trains runs r, r + "
            f"{processes.world}, ... of the {n_runs}, each alone on its own device")


def skipped_line(result):
    """The line that says a run was not trained again: its results exist for the same settings."""
    return f"run {result['name']}: its results already exist for the same settings ({result['name']}.json): skipped"
