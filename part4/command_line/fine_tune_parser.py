"""The command line of bert_part4_finetune.py, made from the declarations of its Settings
(part4/command_line/fine_tune_settings.py): the parser and --help (the article's commands, every default named with
where it comes from), the checks before any work, and the Settings the command line becomes, once, by keyword, in
parse. No torch here (nor anything that imports it): --help and every refused flag answer at once.
"""

import sys

from part4.command_line.declarations import check_given, check_windows, given_or_default, parser_for
from part4.command_line.errors import Fatal
from part4.command_line.fine_tune_settings import Settings
from part4.paper.recipe import GLUE_RECIPE, GLUE_TASKS, RECIPES, lr_tag

ALIASES = {"squadv2": "squad_v2", "squad2": "squad_v2", "squadv1": "squad"}
SPAN_FLAGS = ("train_data", "dev_data", "stride")       # what SQuAD reads; GLUE and SWAG read --data-dir
DATA_FLAGS = {"squad": SPAN_FLAGS, "squad_v2": SPAN_FLAGS}


def build_parser():
    """The article's command line, made from the declarations of Settings: every default named with where it comes
    from (part4/paper/recipe.py)."""
    return parser_for(
        Settings,
        "Part 4: BERT fine-tuned with the paper's recipe on a GLUE task (§4.1, A.3), SQuAD v1.1 (§4.2), SQuAD v2.0 "
        "(§4.3) or SWAG (§4.4), on CUDA, Apple MPS or the CPU; or every GLUE task with the paper's choice of learning "
        "rate, in a table beside its Table 1. Defaults are the paper's.",
        epilog="Each run writes results/part4_<task>_lr<lr>.{log,json}; --seeds and --grid add a summary, glue the "
               "table results/part4_glue_table.{log,json,md}.")


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


# --- The command line, checked, as Settings ---

def parse(argv):
    """The command line, checked, as the Settings every function below main takes its settings from: each flag as
    given, else its declared default (the recipe's for the task where the paper sets it, part4/paper/recipe.py); the task,
    the tasks of glue, the learning rate, the grid and the stride are resolved here."""
    a = build_parser().parse_intermixed_args(argv)
    task = task_name(a.task)
    # every flag given, before any default: those the task does not read, those that contradict each other, then each
    # against its declaration (its range)
    refuse_data_flags(task, data_dir=a.data_dir, train_data=a.train_data, dev_data=a.dev_data, stride=a.stride)
    refuse_conflicts(a, task)
    check_given(vars(a), Settings)
    recipe = RECIPES.get(task, GLUE_RECIPE)                  # the glue command: GLUE's recipe
    values = given_or_default(vars(a), Settings, recipe)
    if task in DATA_FLAGS:
        check_windows(values["max_len"], values["stride"])
    resolved = {"task": task, "tasks": task_list(a.tasks) if task == "glue" else (task,),
                "grid": a.grid or ("glue" if task == "glue" and a.lr is None else None),  # glue: the paper's choice
                "stride": values["stride"] if task in DATA_FLAGS else None,
                "argv": tuple(sys.argv[1:] if argv is None else argv)}
    return Settings(**{**values, **resolved})
