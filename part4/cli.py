"""The command line of bert_part4_finetune.py: its flags (the article's commands, every default named with where it
comes from), their checks before any work, and the Settings they become, once, by keyword, in parse. No torch here
(nor anything that imports it): --help and every refused flag answer at once. The defaults are the recipe's
(part4/recipe.py), read from there.
"""

import math
import sys
from dataclasses import asdict, dataclass, fields

from part4.article import ARTICLE_MODEL, PAPER_OPTIMISER
from part4.flags import ArgumentParser, Fatal, add_common_flags, check_positive, say_error
from part4.recipe import (
    CLIP,
    CUT_EVAL_EVERY,
    GLUE_TASKS,
    GRIDS,
    RECIPES,
    STRIDE,
    WARMUP,
    WEIGHT_DECAY,
    check_windows,
    grid_lrs,
    lr_tag,
)

FAMILY_NAMES = {"cola": "GLUE", "squad": "SQuAD v1.1", "squad_v2": "SQuAD v2.0", "swag": "SWAG"}
ALIASES = {"squadv2": "squad_v2", "squad2": "squad_v2", "squadv1": "squad"}
SPAN_FLAGS = ("train_data", "dev_data", "stride")       # what SQuAD reads; GLUE and SWAG read --data-dir
DATA_FLAGS = {"squad": SPAN_FLAGS, "squad_v2": SPAN_FLAGS}
GROUPED = {"auto": None, "on": True, "off": False}


@dataclass(frozen=True)
class Settings:
    """What one command line asks, each flag checked and resolved once (parse), each value in one field: every
    function below main takes what it reads from here (or from a task's Config, which holds these), never the flags."""
    task: str                   # the task; "glue" for the glue command
    tasks: tuple                # the tasks run: the task; the glue command's --tasks, in GLUE's order
    lr: float                   # the peak learning rate given, else the recipe's (a grid tries its own)
    batch_size: int             # given, else the recipe's
    epochs: int
    seed: int                   # the one fixed seed (0 unless given)
    seeds: int                  # --seeds N: restarts 0..N-1; None: the one seed
    grid: str                   # --grid (the glue command without a learning rate: "glue", the paper's choice)
    evals: int                  # --evals as given; None: the recipe's for each task
    grouped: bool               # --group-by-length on/off; None (auto): the head family's
    max_len: int                # given, else the recipe's
    stride: int                 # SQuAD: tokens two windows share
    eval_batch_size: int        # given; None: the head family's
    model: str
    init: str                   # "pretrained" or "random"
    head: str                   # "new" (the paper's new output layer) or "checkpoint" (the checkpoint's own, kept)
    data_dir: str
    train_data: str
    dev_data: str
    submission: str             # --glue-submission: where the GLUE server's files go
    warmup: float
    weight_decay: float
    clip: float
    max_train_examples: int
    max_dev_examples: int
    results_dir: str
    run_tag: str
    save_model: str
    parallel: str               # --parallel under torchrun: data or runs (None: the default for the command)
    padding_free: bool          # how a run is computed, not what it computes: recorded apart (part4/runs.py)
    fused_adamw: bool
    device: str
    backend: str
    dtype: str                  # --dtype as given (auto, fp32, bf16): part4/common.py resolves it on the device
    argv: tuple                 # the command line as given (recorded with the results)

    @property
    def many(self):
        """--seeds or --grid: a summary, and whole runs spread over processes."""
        return bool(self.seeds or self.grid)

    @property
    def reuse(self):
        """Several runs (grids, seeds, glue): those done are skipped, each keeps a model folder of its own."""
        return self.many or self.task == "glue"

    @property
    def cuts(self):
        """The flags that cut the runs ({"--max-train-examples": 200, ...}, None where not given)."""
        return {"--max-train-examples": self.max_train_examples, "--max-dev-examples": self.max_dev_examples,
                "--evals": self.evals}

    @property
    def recorded(self):
        """What a glue table's numbers depend on beyond its name: a table of other settings is not replaced."""
        keys = ("lr", "grid", "batch_size", "epochs", "seeds", "seed", "init", "max_len", "warmup", "weight_decay",
                "clip", "max_train_examples", "max_dev_examples", "group_by_length", "dtype", "run_tag")
        flag = {"group_by_length": {v: k for k, v in GROUPED.items()}[self.grouped]}      # as given: auto, on, off
        table = {k: flag[k] if k in flag else getattr(self, k) for k in keys}
        if self.grid:                                  # no rate was given: each task's is chosen from the grid
            table["lr"] = f"chosen per task on dev from grid {self.grid}"
        return table | ({"head": self.head} if self.head != "new" else {})      # recorded where it is not the paper's


def flags_record(settings, **ran):
    """The command's settings as a results file records them (JSON values; ran: what a task's run resolved, e.g.
    its task and evaluations). Under a grid no single learning rate was given: lr is null, the grid names them."""
    record = {k: v for k, v in asdict(settings).items() if k != "argv"}
    return {**record, "lr": None if settings.grid else settings.lr, "tasks": list(settings.tasks), **ran}


def paper_defaults(field, text=str):
    """'GLUE 32, SQuAD v1.1 32, SQuAD v2.0 48, SWAG 16': a setting of RECIPES for each head family, for --help."""
    return ", ".join(f"{label} {text(getattr(RECIPES[task], field))}" for task, label in FAMILY_NAMES.items())


def build_parser():
    """The article's command line, every default named with where it comes from (part4/recipe.py)."""
    p = ArgumentParser(
        description="Part 4: BERT fine-tuned with the paper's recipe on a GLUE task (§4.1, A.3), SQuAD v1.1 "
                    "(§4.2), SQuAD v2.0 (§4.3) or SWAG (§4.4), on CUDA, Apple MPS or the CPU; or every GLUE task with "
                    "the paper's choice of learning rate, in a table beside its Table 1. Defaults are the paper's.",
        epilog="Each run writes results/part4_<task>_lr<lr>.{log,json}; --seeds and --grid add a summary, glue the "
               "table results/part4_glue_table.{log,json,md}.")
    p.add_argument("task", help="one of " + ", ".join(RECIPES) + "; or glue: every GLUE task, the best learning rate "
                                "of the paper's grid on each dev set, and Table 1 beside it (§4.1)")
    p.add_argument("lr", nargs="?", help=f"peak learning rate (default: {paper_defaults('lr', lr_tag)}; glue: each of "
                                         f"the paper's grid {grid_lrs('glue')}, the best on dev; given, that one only)")
    add_data_flags(p)
    add_recipe_flags(p)
    add_run_flags(p)
    return p


def add_data_flags(p):
    p.add_argument("--model", default=ARTICLE_MODEL, help=f"pre-trained BERT: Hub id or local folder (default and "
                                                          f"article: {ARTICLE_MODEL})")
    p.add_argument("--init", choices=["pretrained", "random"], default="pretrained",
                   help="pretrained (the paper; default) or random: the same architecture from random weights, "
                        "fine-tuned with the same recipe, to measure what pre-training buys")
    p.add_argument("--head", choices=["new", "checkpoint"], default="new",
                   help="new (the paper: a new output layer on the pre-trained weights; default) or checkpoint: the "
                        "checkpoint's own output layer, kept (e.g. to go on fine-tuning a fine-tuned model), refused where "
                        "it has none or one of another shape than the task's")
    p.add_argument("--data-dir", help="GLUE folder (DIR/SST-2/train.tsv, dev.tsv, ...) or SWAG folder (DIR/train.csv, "
                                      "val.csv); default: the Hub datasets nyu-mll/glue, allenai/swag (regular)")
    p.add_argument("--train-data", help="SQuAD: official training JSON (default: the Hub dataset rajpurkar/squad or "
                                        "rajpurkar/squad_v2, split train)")
    p.add_argument("--dev-data", help="SQuAD: official dev JSON (default: the same Hub dataset, split validation)")
    p.add_argument("--tasks", help="glue: a comma-separated subset, e.g. cola,mrpc,rte (default: all nine)")
    p.add_argument("--glue-submission", metavar="DIR", help="glue: every run predicts the test set, and the chosen run "
                                                            "of each task is written to DIR as the GLUE server takes it "
                                                            "(CoLA.tsv ... AX.tsv, submission.zip)")


def add_recipe_flags(p):
    p.add_argument("--batch-size", type=int, help=f"default: the paper's ({paper_defaults('batch_size')})")
    p.add_argument("--epochs", type=int, help=f"default: the paper's ({paper_defaults('epochs')})")
    p.add_argument("--max-len", type=int, help=f"longest input in tokens (default: {paper_defaults('max_len')}: "
                                               "run_classifier.py's inputs, run_squad.py's windows)")
    p.add_argument("--stride", type=int, help=f"SQuAD: tokens two windows share (default {STRIDE}, as "
                                              f"bert_part4_squad.py)")
    p.add_argument("--warmup", type=float, default=WARMUP, help=f"share of steps with a rising lr (default {WARMUP}, "
                                                                f"run_classifier.py)")
    p.add_argument("--weight-decay", type=float, default=WEIGHT_DECAY,
                   help=f"AdamW weight decay, not on biases and LayerNorm (default {WEIGHT_DECAY}, paper A.2); AdamW is "
                        f"torch's, eps 1e-8 with bias correction (paper: {PAPER_OPTIMISER})")
    p.add_argument("--clip", type=float, default=CLIP, help=f"gradient-norm clipping (default {CLIP}, run_classifier.py)")
    p.add_argument("--seed", type=int, help="the one fixed seed (default 0; restarts: --seeds)")
    p.add_argument("--seeds", type=int, help="N restarts with seeds 0..N-1, then mean and std (paper §5.2: 5 restarts); "
                                             "with --grid or glue, each setting is chosen by its mean over the seeds "
                                             "(paper, BERT-large: the best restart on dev)")
    p.add_argument("--grid", choices=sorted(GRIDS), help=f"glue: lr {grid_lrs('glue')} (§4.1); a3: batch x lr x epochs "
                                                         "(A.3); with --seeds, every setting with every seed")
    p.add_argument("--evals", type=int, help=f"dev evaluations during training (default: GLUE {RECIPES['cola'].evals}, as "
                                             "the article, once per epoch for MNLI and QQP under glue; SQuAD, SWAG once "
                                             "per epoch; a run cut by --max-train-examples evaluates no more often than "
                                             f"every {CUT_EVAL_EVERY} steps: its preamble says how often)")
    p.add_argument("--group-by-length", choices=list(GROUPED), default="auto",
                   help="batches cut from length-sorted groups of 50 batches, in random order (default auto: on for "
                        "SQuAD, whose windows run from 100 to 384 tokens; off for GLUE and SWAG; paper: random batches)")
    p.add_argument("--max-train-examples", type=int, help="only the first N training examples (SQuAD: questions)")
    p.add_argument("--max-dev-examples", type=int, help="only the first N examples of each dev set (SQuAD: questions)")


def add_run_flags(p):
    p.add_argument("--padding-free", choices=["on", "off"], default="on",
                   help="on (the default): each training step runs every layer but attention on the batch's real "
                        "tokens only, skipping the padding: faster where batches hold much padding. On the CPU it is "
                        "the same run up to float rounding; on CUDA and MPS the dropout masks fall otherwise (the same "
                        "distribution, not the same masks). Choose off to train on padded batches, as the paper's code")
    p.add_argument("--fused-adamw", choices=["on", "off"], default="on",
                   help="on (the default): AdamW's fused kernel where torch has one (CUDA; the CPU and MPS from torch "
                        "2.4), as Hugging Face's Trainer: faster on a GPU, the same numbers up to float rounding. Choose "
                        "off for torch's loop of tensor operations (e.g. to compare a run made that way)")
    p.add_argument("--eval-batch-size", type=int, help="dev batch size (default: the head family's, part4/tasks.py; "
                                                       "SQuAD's windows as bert_part4_squad.py)")
    p.add_argument("--dtype", default="auto", help="auto (bf16 autocast on CUDA, fp32 elsewhere; the default), fp32 or bf16")
    p.add_argument("--save-model", help="keep the fine-tuned model in this folder (config, safetensors weights, "
                                        "tokenizer; several runs: one subfolder each)")
    add_common_flags(p)
    p.add_argument("--run-tag", help="appended to the results file names, e.g. the model's name")
    p.add_argument("--parallel", choices=["data", "runs"],
                   help="under torchrun: data = every batch split over the processes (default for one run); runs = "
                        "whole runs of --grid/--seeds spread over them (default for those)")
    p.add_argument("--backend", default="auto", help="under torchrun: auto (nccl on CUDA, gloo on CPU; the default), nccl, gloo")


# --- The checks: every flag that this command would not use, or that cannot be, refused in one line ---

def task_name(text):
    """'SQuAD-v2' -> 'squad_v2': the task as the recipe names it; an unknown one is refused."""
    task = text.lower().replace("-", "")
    task = ALIASES.get(task, task)
    if task not in RECIPES and task != "glue":
        raise Fatal(f"unknown task '{text}': choose one of {', '.join(RECIPES)}, or glue")
    return task


def task_list(text):
    """--tasks cola,mrpc -> ('cola', 'mrpc') in GLUE's order; every task by default; an unknown one is refused."""
    if text is None:
        return GLUE_TASKS
    names = [t.strip().lower().replace("-", "") for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in GLUE_TASKS]
    if unknown or not names:
        raise Fatal(f"--tasks {text}: unknown GLUE task(s) {', '.join(unknown) or '(none given)'}; choose from "
                    f"{', '.join(GLUE_TASKS)}")
    return tuple(t for t in GLUE_TASKS if t in names)


def refuse_data_flags(task, data_dir, train_data, dev_data, stride):
    """A data flag the task's family does not read is refused in one line, never ignored (GLUE and SWAG read
    --data-dir; SQuAD --train-data, --dev-data, --stride)."""
    takes = DATA_FLAGS.get(task, ("data_dir",))
    given = {"data_dir": data_dir, "train_data": train_data, "dev_data": dev_data, "stride": stride}
    for name, value in given.items():
        if value is not None and name not in takes:
            raise Fatal(f"--{name.replace('_', '-')}: {task} does not take it "
                        f"({', '.join('--' + t.replace('_', '-') for t in takes)} {'does' if len(takes) == 1 else 'do'})")


def refuse_conflicts(a, task):
    """Flags that contradict each other or the command (a: the parsed flags, before any default)."""
    if a.grid and a.lr is not None:
        raise Fatal(f"--grid {a.grid} tries its own learning rates: drop the learning rate {a.lr}, or drop --grid")
    if a.grid == "a3" and (a.batch_size or a.epochs):
        raise Fatal("--grid a3 tries its own batch sizes and epochs (paper A.3): drop --batch-size and --epochs")
    if a.head == "checkpoint" and a.init == "random":
        raise Fatal("--head checkpoint keeps the checkpoint's output layer, but --init random starts from random weights: "
                    "drop one of them")
    if a.seeds and a.seed is not None:
        raise Fatal(f"--seeds {a.seeds} runs the seeds 0..{a.seeds - 1}: drop --seed {a.seed}")
    for flag, value in (("--tasks", a.tasks), ("--glue-submission", a.glue_submission)):
        if value is not None and task != "glue":
            raise Fatal(f"{flag}: only with the glue command (bert_part4_finetune.py glue ...)")


def learning_rate(text, default):
    """The positional learning rate: a positive number (the recipe's when not given)."""
    try:
        lr = float(text) if text is not None else default
    except ValueError:
        raise Fatal(f"learning rate '{text}' is not a number (e.g. 2e-5)")
    if not (math.isfinite(lr) and lr > 0):
        raise Fatal(f"learning rate {lr}: must be a positive number (e.g. 2e-5)")
    return lr


def check_training(dtype, warmup, weight_decay, clip):
    if dtype == "fp16":
        raise Fatal("--dtype fp16: training in fp16 needs loss scaling, which this script does not do; use bf16 or fp32")
    if dtype not in ("auto", "fp32", "bf16"):
        raise Fatal(f"--dtype {dtype}: choose auto, fp32 or bf16")
    if not 0 <= warmup < 1 or weight_decay < 0 or clip <= 0:
        raise Fatal("--warmup must be in [0, 1), --weight-decay >= 0 and --clip > 0")


def check_flags(a, task):
    refuse_data_flags(task, a.data_dir, a.train_data, a.dev_data, a.stride)
    refuse_conflicts(a, task)
    check_positive({f"--{name.replace('_', '-')}": getattr(a, name) for name in (
        "batch_size", "epochs", "max_len", "evals", "eval_batch_size", "seeds", "max_train_examples", "max_dev_examples")})
    check_training(a.dtype, a.warmup, a.weight_decay, a.clip)


# --- The command line, checked, as Settings ---

def parse(argv):
    """The command line, checked, as the Settings every function below main takes its settings from; where a flag is
    not given, the recipe's setting for the task (part4/recipe.py). A field of Settings named as its flag takes the
    flag's value as given; the others are resolved here."""
    a = build_parser().parse_intermixed_args(argv)
    task = task_name(a.task)
    check_flags(a, task)
    recipe = RECIPES.get(task, RECIPES[GLUE_TASKS[0]])       # the glue command: GLUE's recipe
    stride = STRIDE if a.stride is None else a.stride
    max_len = a.max_len or recipe.max_len
    if task in DATA_FLAGS:
        check_windows(max_len, stride)
    resolved = {"task": task, "tasks": task_list(a.tasks) if task == "glue" else (task,), "lr": learning_rate(a.lr, recipe.lr),
                "batch_size": a.batch_size or recipe.batch_size, "epochs": a.epochs or recipe.epochs, "seed": a.seed or 0,
                "grid": a.grid or ("glue" if task == "glue" and a.lr is None else None),  # glue: the paper's choice
                "grouped": GROUPED[a.group_by_length], "max_len": max_len, "stride": stride if task in DATA_FLAGS else None,
                "submission": a.glue_submission, "padding_free": a.padding_free == "on",
                "fused_adamw": a.fused_adamw == "on", "argv": tuple(sys.argv[1:] if argv is None else argv)}
    as_given = {f.name: getattr(a, f.name) for f in fields(Settings) if f.name not in resolved}   # a flag's own value
    return Settings(**as_given, **resolved)


def answer_now(argv):
    """Run as a script: --help, and a command line that would be refused, answered before torch loads (exit 0 or 2
    with its one line); a good command line returns, to be parsed again by main once torch is there."""
    try:
        parse(argv)
    except Fatal as e:
        say_error(f"error: {e}")
        sys.exit(e.code)


if __name__ == "__main__":
    say_error("part4/cli.py is a module, not a script: run python bert_part4_finetune.py (--help lists its flags)")
    sys.exit(2)
