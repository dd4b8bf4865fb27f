"""bert_part4_finetune.py's command line, no torch here (nor anything that imports it), so that --help and every
refused flag answer at once: the Settings, each declared once (flag, default, help, range or choices, where a results
file records it; the defaults the recipe's, part4/paper/recipe.py, read from there); the parser and --help made from
those declarations, the checks before any work, and the Settings the command line becomes, once, by keyword, in
parse; how the training steps are computed where the settings leave it to the device; and settings recorded by earlier
versions read as this one records them."""

import math
import sys
from dataclasses import dataclass, fields

from part4.command_line.declarations import (
    PAPER_DEFAULTS,
    POSITIVE,
    RUN,
    TABLE,
    Fatal,
    Range,
    check_windows,
    duration,
    flag_name,
    given_or_default,
    parser_for,
    recorded_defaults,
    setting,
    shared,
)
from part4.paper.article import PAPER_OPTIMISER
from part4.paper.recipe import (
    CLIP,
    CUT_EVAL_EVERY,
    GLUE_GRID_LRS,
    GLUE_RECIPE,
    GLUE_TASKS,
    GRIDS,
    RECIPES,
    WARMUP,
    WEIGHT_DECAY,
    lr_tag,
)

CUDA_PAD_MULTIPLE = 8     # --pad-to-multiple-of on CUDA by default: the widths tensor cores tile by (bf16)

ON_OFF = {"on": True, "off": False}


def learning_rate(text):
    """The learning rate as the command line gives it ('2e-5'), read as a number; a word that is not one is kept as
    given, for its check to refuse once the task is read (bert_part4_finetune.py 2e-5 rte: the task is what is wrong)."""
    try:
        return float(text)
    except ValueError:
        return text


def learning_rate_range(lr):
    """The learning rate: None when it is a number, positive and below 1, else what it must be (the paper's grid is
    5e-5..2e-5; 2e5, a typo for 2e-5, would train to a NaN loss)."""
    if isinstance(lr, float) and math.isfinite(lr) and 0 < lr < 1:
        return None
    return (f"{'not a number: ' if isinstance(lr, str) else ''}a learning rate must be positive and below 1, e.g. 2e-5 "
            f"(the paper's grid: {GLUE_GRID_LRS})")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What one command line asks, each setting declared once here: its flag, default (the recipe's,
    part4/paper/recipe.py, where the paper sets it), help, range or choices and where it is recorded
    (part4/command_line/declarations.py's setting; those several scripts take, part4/command_line/declarations.py's).
    The parser, the checks, --help and the recorded settings are made from these declarations; parse makes the
    Settings once, by keyword. The command's plan reads what it needs from here (or from a task's TaskConfig, which
    holds these), never the flags, and makes each run's settings from it (part4/run/run_files.py RunSettings): all
    that bert_part4_finetune.py's fine_tune reads. Adding a setting: one declaration here, and the line reading it."""

    # --- the article's command: the task and the learning rate ---
    task: str = setting(flag="positional", record=(RUN,),
                        help="one of " + ", ".join(RECIPES) + "; or glue: every GLUE task, the best learning rate of the "
                             "paper's grid on each dev set, and Table 1 beside it (§4.1)")
    lr: float = setting(flag="optional positional", type=learning_rate, check=learning_rate_range, recipe=True,
                        record=(RUN, TABLE),
                        help=f"peak learning rate (default: {PAPER_DEFAULTS['lr']}: GLUE's the article's, where the "
                             f"paper takes the best of its grid on dev; glue: each of the paper's grid {GLUE_GRID_LRS}, "
                             f"the best on dev; given, that one only)")

    # --- the model and the data ---
    model: str = shared("model", record=(RUN, TABLE), path=True)
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
    glue_submission: str = setting(metavar="DIR",
                                   help="glue: every run predicts the test set, and the chosen run of each task is "
                                        "written to DIR as the GLUE server takes it (CoLA.tsv ... AX.tsv, submission.zip)")

    # --- the recipe (paper §4.1-4.4, A.3) ---
    batch_size: int = setting(recipe=True, check=POSITIVE, record=(RUN, TABLE), means="the training batch",
                              help=f"default: the paper's ({PAPER_DEFAULTS['batch_size']})")
    epochs: int = setting(recipe=True, check=POSITIVE, record=(RUN, TABLE),
                          help=f"default: the paper's ({PAPER_DEFAULTS['epochs']})")
    max_len: int = shared("max_len", record=(RUN, TABLE))
    stride: int = shared("stride", record=(RUN,))
    warmup: float = setting(WARMUP, check=Range(0, 1), record=(RUN, TABLE),
                            help=f"share of steps with a rising lr (default {WARMUP}, run_classifier.py)")
    weight_decay: float = setting(WEIGHT_DECAY, check=Range(0), record=(RUN, TABLE),
                                  help=f"AdamW weight decay, not on biases and LayerNorm (default {WEIGHT_DECAY}, paper "
                                       f"A.2); AdamW is torch's, eps 1e-8 with bias correction (paper: {PAPER_OPTIMISER})")
    clip: float = setting(CLIP, check=POSITIVE, record=(RUN, TABLE),
                          help=f"gradient-norm clipping (default {CLIP}, Google's optimization.py)")
    seed: int = shared("seed", record=(RUN, TABLE))
    seeds: int = setting(check=POSITIVE, record=(TABLE,),
                         help="N restarts with seeds 0..N-1, then mean and std (paper §5.2: 5 restarts); with --grid or "
                              "glue, each setting is chosen by its mean over the seeds (paper, BERT-large: the best "
                              "restart on dev)")
    grid: str = setting(choices=sorted(GRIDS), record=(TABLE,),
                        help=f"glue: lr {GLUE_GRID_LRS} (§4.1); a3: batch x lr x epochs (A.3); with --seeds, every "
                             "setting with every seed")
    evals: int = setting(check=POSITIVE,     # --evals as given; each run's count: Job.dev_evaluations
                         help=f"dev evaluations during training (default: GLUE {GLUE_RECIPE.evals}, as the article: with "
                              "the one at the last step, its 31 on SST-2; "
                              "once per epoch for MNLI and QQP under glue; SQuAD, SWAG once per epoch; a run cut by "
                              f"--max-train-examples evaluates no more often than every {CUT_EVAL_EVERY} steps: its "
                              "preamble says how often)")
    group_by_length: bool = setting(choices={"auto": None, "on": True, "off": False}, record=(TABLE,),
                                    help="batches cut from length-sorted groups of 50 batches, in random order (default "
                                         "auto: on for SQuAD, whose windows run from 100 to 384 tokens; off for GLUE and "
                                         "SWAG; paper: random batches)")
    max_train_examples: int = shared("max_train_examples", record=(RUN, TABLE))
    max_dev_examples: int = shared("max_dev_examples", record=(RUN, TABLE))

    # --- how the runs are computed and where they go ---
    padding_free: bool = setting(True, choices=ON_OFF,        # how a run is computed: recorded apart (TrainingRun.computation)
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
    pad_to_multiple_of: int = setting(check=POSITIVE, metavar="N",    # None: the device's (computation_on); recorded apart
                                      help="each training batch padded to a width that is a multiple of N tokens (as "
                                           "Hugging Face's DataCollatorWithPadding(pad_to_multiple_of=N)): far fewer "
                                           "distinct shapes for a GPU's kernels. Attention is masked, so each row's "
                                           "loss is unchanged up to float rounding; the dropout masks drawn at the "
                                           f"padded shape fall otherwise. Default: {CUDA_PAD_MULTIPLE} on CUDA (not "
                                           "measured on a GPU yet), 1 elsewhere (each batch padded to its own longest "
                                           "input, as the recipe: the CPU's numbers unchanged)")
    cudnn_attention: bool = setting(choices={"auto": None, "on": True, "off": False},    # recorded apart
                                    help="on: the training steps' attention may run on cuDNN's kernels where "
                                         "scaled_dot_product_attention picks them (cuDNN builds a graph for every new "
                                         "batch shape); off: on its flash or memory-efficient kernels (math where "
                                         "neither fits). Default auto: off on CUDA (not measured on a GPU yet); no "
                                         "effect elsewhere (no cuDNN attention on the CPU or MPS). Evaluation keeps "
                                         "SDPA's own choice")
    checkpoint_every: float = setting(600.0, type=duration, check=POSITIVE, metavar="DURATION",
                                      help="how often a run keeps its resume checkpoint, at most, in wall time: a "
                                           "duration such as 90s, 10m, 1h or 1h30m, a bare number in seconds (default "
                                           "10m), decided at each dev evaluation; always when it is stopped (Ctrl-C, "
                                           "SIGTERM). A run killed otherwise repeats the steps since its last checkpoint")
    eval_batch_size: int = setting(check=POSITIVE,        # None: the head family's
                                   help="dev batch size (default: the head family's, part4/tasks/families.py; SQuAD's windows as "
                                        "bert_part4_squad.py)")
    dtype: str = shared("dtype", record=(RUN, TABLE))     # fp16 refused: it does not train (refused below)
    save_model: str = setting(help="keep the fine-tuned model in this folder (config, safetensors weights, tokenizer; "
                                   "several runs: one subfolder each); a model folder already there is replaced only by "
                                   "a run of the settings that saved it")
    device: str = shared("device")
    results_dir: str = shared("results_dir")
    run_tag: str = setting(record=(TABLE,), help="appended to the results file names, e.g. the model's name")
    parallel: str = setting(choices=("data", "runs"),      # None: the default for the command
                            help="under torchrun: data = every batch split over the processes (default for one run); "
                                 "runs = whole runs of --grid/--seeds spread over them (default for those)")
    backend: str = setting("auto", help="under torchrun: auto (nccl on CUDA, gloo on CPU; the default), nccl, gloo")
    argv: tuple = setting((), flag=None, help="the command line as given (recorded with the results)")
    # resolved from the flags once, in parse (not flags themselves, nor recorded: they follow from what is)
    many: bool = setting(False, flag=None, help="--seeds or --grid: a summary, and whole runs spread over processes")
    reuse: bool = setting(False, flag=None, help="several runs (grids, seeds, glue): those done are skipped, each keeps "
                                                "a model folder of its own")
    cuts: dict = setting(None, flag=None, help='the flags that cut the runs ({"--max-train-examples": 200, ...}, None '
                                               'where not given)')


# --- The command line: the parser and --help, the checks, the Settings made once ---

ALIASES = {"squadv2": "squad_v2", "squad2": "squad_v2", "squadv1": "squad"}
SPAN_FLAGS = ("train_data", "dev_data", "stride")       # what SQuAD reads; GLUE and SWAG read --data-dir
DATA_FLAGS = {"squad": SPAN_FLAGS, "squad_v2": SPAN_FLAGS}


def finetune_parser():
    """The article's command line, made from the declarations of Settings: every default named with where it comes
    from (part4/paper/recipe.py)."""
    return parser_for(
        Settings,
        "Part 4: BERT fine-tuned with the paper's recipe on a GLUE task (§4.1, A.3), SQuAD v1.1 (§4.2), SQuAD v2.0 "
        "(§4.3) or SWAG (§4.4), on CUDA, Apple MPS or the CPU; or every GLUE task with the paper's choice of learning "
        "rate, in a table beside its Table 1. Defaults are the paper's.",
        epilog="Each run writes results/part4_<task>_lr<lr>.{log,json}; --seeds and --grid add a summary, glue the "
               "table results/part4_glue_table.{log,json,md}.")


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


def refuse_flags(a, task):
    """Every flag given that this command would not use, or that cannot be, refused in one line, never ignored (a:
    the parsed flags, before any default): a data flag the task's family does not read (GLUE and SWAG read
    --data-dir; SQuAD --train-data, --dev-data, --stride), and flags that contradict each other or the command."""
    takes = DATA_FLAGS.get(task, ("data_dir",))
    for name in ("data_dir", "train_data", "dev_data", "stride"):
        if getattr(a, name) is not None and name not in takes:
            raise Fatal(f"{flag_name(name)}: {task} does not take it "
                        f"({', '.join(flag_name(t) for t in takes)} {'does' if len(takes) == 1 else 'do'})")
    if a.grid and a.lr is not None:
        raise Fatal(f"--grid {a.grid} tries its own learning rates: drop the learning rate "
                    f"{lr_tag(a.lr) if isinstance(a.lr, float) else a.lr}, or drop --grid")
    if a.grid == "a3" and (a.batch_size or a.epochs):
        raise Fatal("--grid a3 tries its own batch sizes and epochs (paper A.3): drop --batch-size and --epochs")
    if a.head == "checkpoint" and a.init == "random":
        raise Fatal("--head checkpoint keeps the checkpoint's output layer, but --init random starts from random weights: "
                    "drop one of them")
    if a.dtype == "fp16":
        raise Fatal("--dtype fp16: training in fp16 needs loss scaling, which this script does not do; use bf16 or fp32")
    if a.seeds and a.seed is not None:
        raise Fatal(f"--seeds {a.seeds} runs the seeds 0..{a.seeds - 1}: drop --seed {a.seed}")
    for flag, value in (("--tasks", a.tasks), ("--glue-submission", a.glue_submission)):
        if value is not None and task != "glue":
            raise Fatal(f"{flag}: only with the glue command (bert_part4_finetune.py glue ...)")


def parse(argv):
    """The command line, checked, as the Settings the command's plan takes its settings from: each flag as
    given, else its declared default (the recipe's for the task where the paper sets it, part4/paper/recipe.py); the
    task, the tasks of glue, the learning rate, the grid and the stride are resolved here."""
    a = finetune_parser().parse_intermixed_args(argv)
    task = a.task.lower().replace("-", "")           # 'SQuAD-v2' -> 'squad_v2': the task as the recipe names it
    task = ALIASES.get(task, task)
    if task not in RECIPES and task != "glue":
        raise Fatal(f"unknown task '{a.task}': choose one of {', '.join(RECIPES)}, or glue")
    # every flag given, before any default: those the task does not read, those that contradict each other, then each
    # against its declaration (its range), as the defaults are filled in
    refuse_flags(a, task)
    values = given_or_default(vars(a), Settings, RECIPES.get(task, GLUE_RECIPE))   # the glue command: GLUE's recipe
    if task in DATA_FLAGS:
        check_windows(values["max_len"], values["stride"])
    grid = a.grid or ("glue" if task == "glue" and a.lr is None else None)   # glue: the paper's choice
    many = bool(values["seeds"] or grid)
    resolved = {"task": task, "tasks": task_list(a.tasks) if task == "glue" else (task,), "grid": grid,
                "stride": values["stride"] if task in DATA_FLAGS else None,
                "argv": tuple(sys.argv[1:] if argv is None else argv), "many": many, "reuse": many or task == "glue",
                "cuts": {flag_name(f.name): values[f.name] for f in fields(Settings) if f.metadata["cuts"]}}
    return Settings(**{**values, **resolved})


# --- how the training steps are computed on a device, where the settings leave it to the device ---

def computation_on(settings, device_type):
    """{pad_to_multiple_of, cudnn_attention}: how a run's training steps are computed on a device ("cuda", "cpu",
    "mps"), each as given, else the device's: on CUDA batches padded to multiples of CUDA_PAD_MULTIPLE and attention
    without cuDNN's kernels; elsewhere each batch its own width, as the recipe, and no cuDNN attention to use."""
    cuda = device_type == "cuda"
    multiple = settings.pad_to_multiple_of or (CUDA_PAD_MULTIPLE if cuda else 1)
    return {"pad_to_multiple_of": multiple, "cudnn_attention": cuda and bool(settings.cudnn_attention)}


# --- settings recorded by earlier versions, read as this one records them, and what differs ---

EARLIER_DTYPES = {"None": "fp32", "torch.bfloat16": "bf16"}  # as results of earlier versions recorded it


EARLIER_NAMES = {"evals": "dev_evaluations"}               # a recorded setting's name in results of earlier versions


# What a run records that no flag declares and earlier versions did not record: the data's fingerprint. A result or
# checkpoint without it is compared without it (its data cannot be told), as earlier versions compared it.
RECORDED_SINCE = ("data",)


def as_recorded_now(settings, place=RUN, beside=None):
    """Settings recorded in place (a run's, RUN, or a table's, part4/command_line/declarations.py's TABLE) in this version's
    terms, to be compared: an earlier name of a setting (evals: the count of dev evaluations, now dev_evaluations), an
    earlier spelling of its value (dtype "None" is "fp32"), and a setting not recorded (declared after the file was
    written, or at its default where it is recorded unless default: init "pretrained") at its declared default.
    beside: the settings they are compared with: one of RECORDED_SINCE that either lacks is left out of both (each
    side made with the other beside it).
    Results and checkpoints of earlier versions so stay valid. None stays None."""
    if settings is None:
        return None
    now = {EARLIER_NAMES.get(k, k): v for k, v in settings.items() if beside is None or k not in RECORDED_SINCE or k in beside}
    if now.get("dtype") in EARLIER_DTYPES:
        now["dtype"] = EARLIER_DTYPES[now["dtype"]]
    return {**recorded_defaults(Settings, place), **now}
