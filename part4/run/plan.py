"""One fine-tuning command across its tasks (`Command`: where it runs, each task's head family and share, the report
each task's runs go to, their results collected and summed up, the GLUE table at the end), and the plan of one task's
runs: which runs, how the processes share them (every batch split, or whole runs each), every input checked and the
data read and tokenised once for all of them, the runs done before for the same settings found (and skipped), and every
run's results collected from the processes. It answers the recipe's questions and never calls it:
bert_part4_finetune.py trains each run itself. The processes torchrun starts are joined and left here too
(`start_processes`, and `run_cli`, which every script's main runs in), with the error every process stops on
(`all_agree`)."""

import datetime
import os
from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple

import torch
import torch.distributed as dist

from part4.command_line.declarations import Fatal, preflight, run_main
from part4.data.readers import TASKS, Sources
from part4.models.folders import read_model_folder
from part4.models.loading import ALONE, Processes, autocast_dtype, check_positions, gather, load_model, model_problem, pick_device
from part4.output.results_files import Log, check_model_target, check_writable_dir
from part4.paper.recipe import ONCE_PER_EPOCH
from part4.run import glue_row, records
from part4.run.records import (
    Config,
    Where,
    check_not_replaced,
    existing_result,
    model_folders,
    results_path,
    run_name,
    run_settings,
    skipped_line,
    split_line,
    summarised_runs,
    task_config,
)
from part4.tasks.families import Classification, Family, MultipleChoice, SpanExtraction

# --- One fine-tuning command across its tasks: where it runs, each task's share, the report its runs go to ---

class Command:
    """What bert_part4_finetune.py's main steps through:

        command = Command(settings)
        for task in command.each_task():
            plan = command.plan_task(task, jobs)          # the task's runs planned, the data read once
            ...                                      # each run of this process's share, unless done
            command.collect(plan, results)
        return command.finish()
    """

    def __init__(self, settings):
        self.settings, self.rows = settings, {}
        device, self.processes = start_processes(settings.device, settings.backend)
        self.where = Where(device=device, dtype=autocast_dtype(device, settings.dtype), processes=self.processes)
        self.in_table = settings.task == "glue"    # every GLUE task, the lr chosen on dev, beside Table 1 (§4.1)
        if self.in_table:
            self.to_run, self.absent = glue_row.runnable(settings)
            self.glue_log = glue_row.start(settings, self.to_run, self.absent, self.processes)
        else:
            self.to_run, self.absent, self.glue_log = settings.tasks, {}, None

    def each_task(self):
        """Each task's inputs (its Config, family and data sources), in the command's order."""
        for name in self.to_run:
            yield task_inputs(self.settings, name, ONCE_PER_EPOCH if self.in_table else ())

    def plan_task(self, task, jobs):
        """The task's runs planned (part4/run/plan.py), their skipped lines and summary going to the GLUE table or to the
        task's own summary of its grid or restarts."""
        config = task.config
        if self.in_table:
            report = self.glue_log
        else:
            report = Log(records.summary_name(config, jobs[0]), self.settings.results_dir, quiet=not self.processes.is_main)
        return plan_runs(task, jobs, where=self.where, report=report, summary=self.settings.many and not self.in_table,
                         header=records.grid_header(config, len(jobs), self.in_table))

    def collect(self, plan, mine):
        """Every run's results gathered (mine: this process's, by their place in plan.jobs); on the first process the
        task's row of the GLUE table chosen, or its grid or restarts summed up."""
        results = collected(plan, mine)
        if not self.processes.is_main:
            return
        if self.in_table:
            self.rows[plan.config.task] = glue_row.choose(results, plan.family, plan.config, plan.data)
        elif self.settings.many:
            records.summarise(plan.config, plan.family, results, report=plan.report, device=self.where.device)

    def finish(self):
        """The GLUE table beside Table 1 (and the server's files), when the command is glue. Returns the exit code."""
        if self.processes.is_main and self.in_table:
            glue_row.table_written(self.settings, self.rows, absent=self.absent, report=self.glue_log,
                        cli=records.recorded_command(self.settings), device=self.where.device)
        return 0



# --- Each task of the command: its Config, its head family, where its data comes from ---

FAMILIES = {**{name: Classification for name in TASKS}, "swag": MultipleChoice, "squad": SpanExtraction,
            "squad_v2": SpanExtraction}


class TaskInputs(NamedTuple):
    """One task's share of the command."""
    config: Config                     # its Config, made for it
    family: Family                     # its head family
    sources: Sources                   # where its data comes from


def task_inputs(settings, task, once_per_epoch=()):
    """One task's share of the command: its Config (made for it), its head family and where its data comes from."""
    windows = {"stride": settings.stride} if FAMILIES[task] is SpanExtraction else {}     # SQuAD's alone
    family = FAMILIES[task](task, settings.max_len, eval_batch_size=settings.eval_batch_size, **windows)
    sources = Sources(task=task, data_dir=settings.data_dir, train_data=settings.train_data, dev_data=settings.dev_data)
    return TaskInputs(config=task_config(settings, task, family, once_per_epoch), family=family, sources=sources)


# --- The plan of one task's runs: the data read once, the work split, the runs done before ---

@dataclass(frozen=True)
class TaskData:
    """A task's data, read, cut and tokenised once for every run of the command (prepare)."""
    train: dict                        # the training set encoded: {"input_ids": [...], ...} (its family's encode)
    devs: dict                         # {dev set name: its encoded examples}
    tok: object                        # the model folder's tokenizer
    model_folder: object               # the model folder read (part4/models/folders.py read_model_folder)
    head: object                       # the task head every run gets (--head); None with --init random
    n_train: int                       # training examples used (after --max-train-examples)
    n_train_all: int                   # training examples in the data
    n_dev: dict                        # {dev set name: examples used} (after --max-dev-examples)
    n_dev_all: dict                    # {dev set name: examples in the data}
    majority: object                   # the majority class of the whole training set
    tests: dict                        # {server file: encoded test examples} with --glue-submission, else {}

    @property
    def cut(self):
        """Is the training set cut (--max-train-examples below its size)?"""
        return self.n_train < self.n_train_all


@dataclass(frozen=True)
class Plan:
    """The runs of one task, as planned: its Config and family, the jobs, the data read and tokenised once for all of
    them, how the processes share the work ("data": every run by all of them, each taking part of every batch; "runs":
    run k by process k % N alone), and the report their skipped lines go to."""
    config: Config
    family: object
    jobs: list
    data: TaskData
    mode: str
    where: Where
    report: Log
    earlier: dict                      # {k: the earlier results of run k} for the runs of this process done before

    def mine(self):
        """The runs this process takes part in, by their place in jobs."""
        p = self.where.processes
        return [k for k in range(len(self.jobs)) if self.mode == "data" or k % p.world == p.rank]

    def run_done_before(self, k):
        """Run k's earlier results when it was done before for the same settings (marked skipped, and said so on the
        first process), else None: it is to be trained."""
        earlier = self.earlier.get(k)
        if earlier is None:
            return None
        if self.where.processes.is_main:
            self.report.say(skipped_line(earlier))
        return {**earlier, "skipped": True}

    def sharing(self):
        """The processes that train one run together: all of them in data mode, each alone in runs mode."""
        return self.where.processes if self.mode == "data" else ALONE


def plan_runs(task, jobs, *, where, report, summary=False, header=()):
    """Every run of one task's command planned (task: its TaskInputs, part4/run/plan.py): how the processes share them,
    the inputs checked and the data read and tokenised once, the header lines said (and with them how the work is
    split), and the runs done before (where runs are reused) found. report: the summary's or the table's; summary: it is
    to be written (a summary of --grid or --seeds), and is never one of other runs."""
    config, family, processes = task.config, task.family, where.processes
    mode = work_split(config.settings.parallel, config.settings.many, processes, [job.batch_size for job in jobs])
    data = all_agree(processes, partial(prepare, config, family, task.sources, jobs=jobs, dtype=where.dtype))
    if summary:
        check_not_replaced(os.path.join(config.settings.results_dir, report.name + ".json"),
                           {"runs": sorted(run_name(config, job) for job in jobs)}, "summarises other runs",
                           recorded=summarised_runs)
    for line in list(header) + ([split_line(mode, processes, len(jobs))] if processes.launched else []):
        report.say(line)
    plan = Plan(config=config, family=family, jobs=jobs, data=data, mode=mode, where=where, report=report, earlier={})
    train_rows = len(data.train["input_ids"])
    earlier = {}
    for k in plan.mine():
        # where runs are reused, a job's results that exist for the same settings (and its test-set predictions, with
        # --glue-submission): skipped; its test predictions missing, it is run again
        ours = run_settings(config, jobs[k], family=family, train_rows=train_rows, dtype=where.dtype, processes=ALONE)
        result = reusable(config, jobs[k], ours)
        files = (result or {}).get("test_predictions")
        if result and not (config.test_dir and not (files and all(os.path.isfile(os.path.join(config.test_dir, f))
                                                                   for f in files))):
            earlier[k] = result
    return replace(plan, earlier=earlier)


def collected(plan, mine):
    """Every run's results in the order of plan.jobs, on rank 0 (None elsewhere); mine: {k: results} of the runs this
    process took part in (None where another process holds them). In runs mode the processes' results are gathered,
    and the skipped runs of the other processes said after all are done."""
    processes = plan.where.processes
    mine = {k: {**r, "process": processes.rank} for k, r in mine.items() if r is not None}
    if plan.mode == "runs":
        mine = {k: r for part in gather(processes, mine) for k, r in part.items()}
        if processes.is_main:
            for k in sorted(mine):
                if mine[k].get("skipped") and mine[k]["process"] != processes.rank:
                    plan.report.say(skipped_line(mine[k]))
    return [mine[k] for k in range(len(plan.jobs))] if processes.is_main else None


# --- the runs done before for the same settings, and no results file of other settings replaced ---

def reusable(config, job, settings):
    """Where runs are reused (grids, seeds, glue), the earlier results of this job for the same settings, else None.
    The count of dev evaluations is left out: it draws the learning curve and changes no final number (evaluation
    uses no random numbers), so a single run with the article's 30 serves the glue command's once per epoch."""
    if not config.settings.reuse:
        return None
    return existing_result(results_path(config, job), settings, ignore=("processes", "dev_evaluations"))


# --- every input checked, the data read and tokenised once ---

def prepare(config, family, sources, jobs, dtype):
    """Check every input (the folders we write, the model read for what it holds and its weights loaded once, the
    data, the window length, results of other settings in the way), then read the data, cut it (--max-train-examples,
    --max-dev-examples) and tokenise it once, for every run of this invocation. What a cut run leaves out is kept as
    counts (n_train_all, n_dev_all), and the majority class is the whole training set's."""
    c = config.settings
    check_writable_dir(c.results_dir, "--results-dir")
    for folder in model_folders(config, jobs):
        check_model_target(folder, "--save-model")
    preflight([model_problem(c.model, "--model"), *family.data_problems(sources)])
    model_folder = read_model_folder(c.model, "--model", weights=c.init == "pretrained")    # its config, files, tokenizer
    check_positions(family.max_len, model_folder.config)
    # the weights loaded once per task before any work, then let go (each run loads them again for its own model), so
    # that the loading report and the task head (--head) are refused before the first line: the Head every run records
    # (none for --init random, which reads no weights)
    head = load_model(family.model_class, c.model, head=c.head, **family.model_kwargs)[1] if c.init == "pretrained" else None
    train_all, devs_all = family.read(sources)
    train = train_all[:c.max_train_examples]
    devs = {name: d[:c.max_dev_examples] for name, d in devs_all.items()}
    if not train or not all(devs.values()):
        raise Fatal(f"no {'training' if not train else 'dev'} examples for {config.task}")
    tests = family.read_tests(sources) if config.test_dir else {}
    tok = model_folder.tokenizer
    enc_train, enc_devs = family.encode(tok, train, devs)
    if not enc_train["input_ids"]:
        raise Fatal(f"no usable training examples for {config.task}")
    for job in jobs:            # no run replaces the results of a run with other settings: stopped before any training
        ours = run_settings(config, job, family=family, train_rows=len(enc_train["input_ids"]), dtype=dtype, processes=ALONE)
        if not reusable(config, job, ours):            # a reused result is not overwritten
            check_not_replaced(results_path(config, job), ours, "holds a result of other settings")
    return TaskData(train=enc_train, devs=enc_devs, tok=tok, model_folder=model_folder, head=head,
                    n_train=len(train), n_train_all=len(train_all),
                    n_dev={name: len(d) for name, d in devs.items()}, n_dev_all={k: len(d) for k, d in devs_all.items()},
                    majority=family.majority(train_all), tests=family.encode_tests(tok, tests) if tests else {})


# --- how the processes share the work ---

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


# --- The processes torchrun starts: their group joined and left, an error every process stops on ---

def start_processes(device_name="auto", backend="auto"):
    """The device and the Processes of this process. Under torchrun (RANK, WORLD_SIZE and LOCAL_RANK in the
    environment) it joins the process group: nccl with cuda:LOCAL_RANK on CUDA, gloo on the CPU."""
    device = pick_device(device_name)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        if backend not in ("auto", None):
            raise Fatal(f"--backend {backend}: only under torchrun (one process needs no backend)")
        return device, ALONE
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    backend = ("nccl" if device.type == "cuda" else "gloo") if backend in ("auto", None) else backend
    if backend not in ("nccl", "gloo"):
        raise Fatal(f"--backend {backend}: choose auto, nccl or gloo")
    if backend == "nccl" and device.type != "cuda":
        raise Fatal(f"--backend nccl needs CUDA devices, but this run uses --device {device.type}; use --backend gloo "
                    f"(or auto) on the CPU")
    if device.type == "cuda":
        if local >= torch.cuda.device_count():
            raise Fatal(f"LOCAL_RANK {local}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=datetime.timedelta(minutes=30))
    return device, Processes(rank=rank, world=world, launched=True, backend=backend)


def end_processes():
    """Leave the process group, if this process joined one (nothing to do when run alone)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def run_cli(main, argv=None):
    """Run `main(argv)` as a script: Fatal and Ctrl-C become one line on stderr and a non-zero exit code
    (part4/command_line/declarations.py's run_main); the processes are ended last, whatever happened."""
    return run_main(main, argv, end=end_processes)


def all_agree(processes, work):
    """Run work() on every process; if it fails on any of them with a Fatal, every process stops with that
    one line (no process is left waiting for the others)."""
    error = None
    try:
        result = work()
    except Fatal as e:
        error, result = (str(e), e.code), None
    except OSError as e:                              # an unreadable file: as clear as any other bad input
        error, result = (f"{e.filename or 'a file'}: {e.strerror or e}", 2), None
    error = next((e for e in gather(processes, error) if e), None)
    if error:
        raise Fatal(error[0], error[1])
    return result
