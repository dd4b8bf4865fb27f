"""The command line of bert_part4_finetune.py: its Settings, each declared once (flag, default, help, range or
choices, where it is recorded), the parser and --help made from them (the article's commands, every default named
with where it comes from), their checks before any work, and the Settings they become, once, by keyword, in parse.
No torch here (nor anything that imports it): --help and every refused flag answer at once. The defaults are the
recipe's (part4/recipe.py), read from there.
"""

import math
import sys
from dataclasses import asdict, dataclass, fields

from part4.article import ARTICLE_MODEL, PAPER_OPTIMISER
from part4.flags import (
    COMMON_FLAGS,
    POSITIVE,
    RUN,
    TABLE,
    ArgumentParser,
    Fatal,
    Range,
    add_settings,
    check_given,
    flag_name,
    given_or_default,
    say_error,
    setting,
)
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
ON_OFF = {"on": True, "off": False}


def paper_defaults(field, text=str):
    """'GLUE 32, SQuAD v1.1 32, SQuAD v2.0 48, SWAG 16': a setting of RECIPES for each head family, for --help."""
    return ", ".join(f"{label} {text(getattr(RECIPES[task], field))}" for task, label in FAMILY_NAMES.items())


def training_dtype(dtype):
    """--dtype: None when it can train, else what it must be."""
    if dtype == "fp16":
        return "training in fp16 needs loss scaling, which this script does not do; use bf16 or fp32"
    return None if dtype in ("auto", "fp32", "bf16") else "choose auto, fp32 or bf16"


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What one command line asks, each setting declared once here: its flag, default (the recipe's, part4/recipe.py,
    where the paper sets it), help, range or choices and where it is recorded (part4/flags.py's setting). The
    parser, the checks, --help and the recorded settings are made from these declarations; parse makes the Settings
    once, by keyword. Every function below main takes what it reads from here (or from a task's Config, which holds
    these), never the flags. Adding a setting: one declaration here, and the line that reads it."""

    # --- the article's command: the task and the learning rate ---
    task: str = setting(flag="positional", record=(RUN,),
                        help="one of " + ", ".join(RECIPES) + "; or glue: every GLUE task, the best learning rate of the "
                             "paper's grid on each dev set, and Table 1 beside it (§4.1)")
    lr: float = setting(flag="optional positional", type=str, recipe=True, record=(RUN, TABLE),
                        help=f"peak learning rate (default: {paper_defaults('lr', lr_tag)}; glue: each of the paper's "
                             f"grid {grid_lrs('glue')}, the best on dev; given, that one only)")

    # --- the model and the data ---
    model: str = setting(ARTICLE_MODEL, record=(RUN, TABLE), path=True,
                         help=f"pre-trained BERT: Hub id or local folder (default and article: {ARTICLE_MODEL})")
    init: str = setting("pretrained", choices=("pretrained", "random"), record=(RUN, TABLE), unless_default=(RUN,),
                        help="pretrained (the paper; default) or random: the same architecture from random weights, "
                             "fine-tuned with the same recipe, to measure what pre-training buys")
    head: str = setting("new", choices=("new", "checkpoint"), record=(RUN, TABLE), unless_default=(RUN, TABLE),
                        help="new (the paper: a new output layer on the pre-trained weights; default) or checkpoint: the "
                             "checkpoint's own output layer, kept (e.g. to go on fine-tuning a fine-tuned model), refused "
                             "where it has none or one of another shape than the task's")
    data_dir: str = setting(record=(TABLE,), path=True,
                            help="GLUE folder (DIR/SST-2/train.tsv, dev.tsv, ...) or SWAG folder (DIR/train.csv, "
                                 "val.csv); default: the Hub datasets nyu-mll/glue, allenai/swag (regular)")
    train_data: str = setting(help="SQuAD: official training JSON (default: the Hub dataset rajpurkar/squad or "
                                   "rajpurkar/squad_v2, split train)")
    dev_data: str = setting(help="SQuAD: official dev JSON (default: the same Hub dataset, split validation)")
    tasks: tuple = setting((), type=str, help="glue: a comma-separated subset, e.g. cola,mrpc,rte (default: all nine)")
    submission: str = setting(flag="--glue-submission", metavar="DIR",
                              help="glue: every run predicts the test set, and the chosen run of each task is written "
                                   "to DIR as the GLUE server takes it (CoLA.tsv ... AX.tsv, submission.zip)")

    # --- the recipe (paper §4.1-4.4, A.3) ---
    batch_size: int = setting(recipe=True, check=POSITIVE, record=(RUN, TABLE),
                              help=f"default: the paper's ({paper_defaults('batch_size')})")
    epochs: int = setting(recipe=True, check=POSITIVE, record=(RUN, TABLE),
                          help=f"default: the paper's ({paper_defaults('epochs')})")
    max_len: int = setting(recipe=True, check=POSITIVE, record=(RUN, TABLE),
                           help=f"longest input in tokens (default: {paper_defaults('max_len')}: run_classifier.py's "
                                "inputs, run_squad.py's windows)")
    stride: int = setting(STRIDE, record=(RUN,),
                          help=f"SQuAD: tokens two windows share (default {STRIDE}, as bert_part4_squad.py)")
    warmup: float = setting(WARMUP, check=Range(0, 1), record=(RUN, TABLE),
                            help=f"share of steps with a rising lr (default {WARMUP}, run_classifier.py)")
    weight_decay: float = setting(WEIGHT_DECAY, check=Range(0), record=(RUN, TABLE),
                                  help=f"AdamW weight decay, not on biases and LayerNorm (default {WEIGHT_DECAY}, paper "
                                       f"A.2); AdamW is torch's, eps 1e-8 with bias correction (paper: {PAPER_OPTIMISER})")
    clip: float = setting(CLIP, check=POSITIVE, record=(RUN, TABLE),
                          help=f"gradient-norm clipping (default {CLIP}, run_classifier.py)")
    seed: int = setting(0, record=(RUN, TABLE), help="the one fixed seed (default 0; restarts: --seeds)")
    seeds: int = setting(check=POSITIVE, record=(TABLE,),
                         help="N restarts with seeds 0..N-1, then mean and std (paper §5.2: 5 restarts); with --grid or "
                              "glue, each setting is chosen by its mean over the seeds (paper, BERT-large: the best "
                              "restart on dev)")
    grid: str = setting(choices=sorted(GRIDS), record=(TABLE,),
                        help=f"glue: lr {grid_lrs('glue')} (§4.1); a3: batch x lr x epochs (A.3); with --seeds, every "
                             "setting with every seed")
    evals: int = setting(check=POSITIVE,     # --evals as given; each run's count: Job.evals (part4/recipe.py's evaluations)
                         help=f"dev evaluations during training (default: GLUE {RECIPES['cola'].evals}, as the article, "
                              "once per epoch for MNLI and QQP under glue; SQuAD, SWAG once per epoch; a run cut by "
                              f"--max-train-examples evaluates no more often than every {CUT_EVAL_EVERY} steps: its "
                              "preamble says how often)")
    grouped: bool = setting(flag="--group-by-length", choices={"auto": None, "on": True, "off": False}, record=(TABLE,),
                            help="batches cut from length-sorted groups of 50 batches, in random order (default auto: on "
                                 "for SQuAD, whose windows run from 100 to 384 tokens; off for GLUE and SWAG; paper: "
                                 "random batches)")
    max_train_examples: int = setting(check=POSITIVE, record=(RUN, TABLE), cuts=True,
                                      help="only the first N training examples (SQuAD: questions)")
    max_dev_examples: int = setting(check=POSITIVE, record=(RUN, TABLE), cuts=True,
                                    help="only the first N examples of each dev set (SQuAD: questions)")

    # --- how the runs are computed and where they go ---
    padding_free: bool = setting(True, choices=ON_OFF,        # how a run is computed: recorded apart (part4/runs.py)
                                 help="on (the default): each training step runs every layer but attention on the "
                                      "batch's real tokens only, skipping the padding: faster where batches hold much "
                                      "padding. On the CPU it is the same run up to float rounding; on CUDA and MPS the "
                                      "dropout masks fall otherwise (the same distribution, not the same masks). Choose "
                                      "off to train on padded batches, as the paper's code")
    fused_adamw: bool = setting(True, choices=ON_OFF,
                                help="on (the default): AdamW's fused kernel where torch has one (CUDA; the CPU and MPS "
                                     "from torch 2.4), as Hugging Face's Trainer: faster on a GPU, the same numbers up to "
                                     "float rounding. Choose off for torch's loop of tensor operations (e.g. to compare a "
                                     "run made that way)")
    eval_batch_size: int = setting(check=POSITIVE,        # None: the head family's
                                   help="dev batch size (default: the head family's, part4/tasks.py; SQuAD's windows as "
                                        "bert_part4_squad.py)")
    dtype: str = setting("auto", check=training_dtype, record=(RUN, TABLE),   # resolved on the device: part4/common.py
                         help="auto (bf16 autocast on CUDA, fp32 elsewhere; the default), fp32 or bf16")
    save_model: str = setting(help="keep the fine-tuned model in this folder (config, safetensors weights, tokenizer; "
                                   "several runs: one subfolder each)")
    device: str = setting(COMMON_FLAGS["device"][0], help=COMMON_FLAGS["device"][1])
    results_dir: str = setting(COMMON_FLAGS["results_dir"][0], help=COMMON_FLAGS["results_dir"][1])
    run_tag: str = setting(record=(TABLE,), help="appended to the results file names, e.g. the model's name")
    parallel: str = setting(choices=("data", "runs"),      # None: the default for the command
                            help="under torchrun: data = every batch split over the processes (default for one run); "
                                 "runs = whole runs of --grid/--seeds spread over them (default for those)")
    backend: str = setting("auto", help="under torchrun: auto (nccl on CUDA, gloo on CPU; the default), nccl, gloo")
    argv: tuple = setting((), flag=None, help="the command line as given (recorded with the results)")

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
        return {flag_name(f.name): getattr(self, f.name) for f in fields(self) if f.metadata["cuts"]}


def flags_record(settings, **ran):
    """The command's settings as a results file records them (JSON values; ran: what a task's run resolved, its
    task). Under a grid no single learning rate was given: lr is null, the grid names them."""
    record = {k: v for k, v in asdict(settings).items() if k != "argv"}
    return {**record, "lr": None if settings.grid else settings.lr, "tasks": list(settings.tasks), **ran}


def build_parser():
    """The article's command line, made from the declarations of Settings: every default named with where it comes
    from (part4/recipe.py)."""
    p = ArgumentParser(
        description="Part 4: BERT fine-tuned with the paper's recipe on a GLUE task (§4.1, A.3), SQuAD v1.1 "
                    "(§4.2), SQuAD v2.0 (§4.3) or SWAG (§4.4), on CUDA, Apple MPS or the CPU; or every GLUE task with "
                    "the paper's choice of learning rate, in a table beside its Table 1. Defaults are the paper's.",
        epilog="Each run writes results/part4_<task>_lr<lr>.{log,json}; --seeds and --grid add a summary, glue the "
               "table results/part4_glue_table.{log,json,md}.")
    add_settings(p, Settings)
    return p


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


def refuse_data_flags(task, *, data_dir, train_data, dev_data, stride):
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


def check_flags(a, task):
    """Every flag given, before any default: those the task does not read, those that contradict each other, then
    each against its declaration (a range, the dtypes that train)."""
    refuse_data_flags(task, data_dir=a.data_dir, train_data=a.train_data, dev_data=a.dev_data, stride=a.stride)
    refuse_conflicts(a, task)
    check_given(vars(a), Settings)


# --- The command line, checked, as Settings ---

def parse(argv):
    """The command line, checked, as the Settings every function below main takes its settings from: each flag as
    given, else its declared default (the recipe's for the task where the paper sets it, part4/recipe.py); the task,
    the tasks of glue, the learning rate, the grid and the stride are resolved here."""
    a = build_parser().parse_intermixed_args(argv)
    task = task_name(a.task)
    check_flags(a, task)
    recipe = RECIPES.get(task, RECIPES[GLUE_TASKS[0]])       # the glue command: GLUE's recipe
    values = given_or_default(vars(a), Settings, recipe)
    if task in DATA_FLAGS:
        check_windows(values["max_len"], values["stride"])
    resolved = {"task": task, "tasks": task_list(a.tasks) if task == "glue" else (task,),
                "lr": learning_rate(a.lr, recipe.lr),
                "grid": a.grid or ("glue" if task == "glue" and a.lr is None else None),  # glue: the paper's choice
                "stride": values["stride"] if task in DATA_FLAGS else None,
                "argv": tuple(sys.argv[1:] if argv is None else argv)}
    return Settings(**{**values, **resolved})


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
