"""The command line of bert_part4_finetune.py: its flags (the article's commands, every default named with where it
comes from), their checks before any work, and the Command they become, once, in parse. Nothing here trains: the
recipe (bert_part4_finetune.py) reads its settings from the Command, and hands in its own defaults (RECIPES,
GRIDS), so that they stay in the recipe where a reader looks for them.
"""

import math
import sys
from dataclasses import dataclass, replace

from part4 import glue
from part4.common import (
    ArgumentParser,
    Fatal,
    add_common_flags,
    check_positive,
    command_line,
    not_a_script,
    portable,
)
from part4.runs import Config, lr_tag
from part4.tasks import FAMILIES, Sources

FAMILY_NAMES = {"cola": "GLUE", "squad": "SQuAD v1.1", "squad_v2": "SQuAD v2.0", "swag": "SWAG"}


@dataclass(frozen=True)
class Command:
    """What one command line asks, its flags checked and turned into settings once (parse): every function
    below main takes what it reads from here, never the flags."""
    tasks: list             # the task; the glue command's tasks
    config: Config          # what every run shares; its task's part (task, evaluations, grouping) is for_task's
    sources: object         # where the data comes from (Sources; the task set by for_task)
    grid: str
    seeds: int
    evals_flag: int         # --evals as given; None: the recipe's
    group_by_length: str
    shape: tuple            # (max_len, stride, eval_batch_size) of the head family
    lr: float               # the learning rate, batch size, epochs and seed given (or the paper's)
    batch_size: int
    epochs: int
    seed: int
    recipes: dict           # the paper's settings of each task (bert_part4_finetune.RECIPES)
    table: object = None    # the glue command: its GlueTable (part4/glue.py)
    device_flags: tuple = ("auto", "auto", "auto")   # --device, --backend, --dtype

    @property
    def max_len(self):
        return self.shape[0]

    @property
    def evals(self):
        """Dev evaluations of a run of the first task: --evals, else the recipe's (0 in the recipe: once per epoch)."""
        return self.for_task(self.tasks[0])[0].evals or self.epochs

    def for_task(self, task):
        """One task's share of the command: what its runs share (the recipe's evaluations and grouping for the task;
        the glue command evaluates MNLI and QQP once per epoch), its head family, and where its data comes from."""
        family, recipe = FAMILIES[task](task, *self.shape), self.recipes[task]
        evals = self.evals_flag if self.evals_flag is not None else (
            0 if self.table and task in glue.ONCE_PER_EPOCH else recipe.evals)
        grouped = {"on": True, "off": False}.get(self.group_by_length, family.grouped)
        cli = {**self.config.cli, "config": {**self.config.cli["config"], "task": task, "evals": evals}}  # as it ran
        config = replace(self.config, task=task, evals=evals, grouped=grouped, cli=cli,
                         defaults=(recipe.batch_size, recipe.epochs))
        return config, family, replace(self.sources, task=task)


def paper_defaults(recipes, field, text=str):
    """'GLUE 32, SQuAD v1.1 32, SQuAD v2.0 48, SWAG 16': a setting of RECIPES for each head family, for --help."""
    return ", ".join(f"{label} {text(getattr(recipes[task], field))}" for task, label in FAMILY_NAMES.items())


def build_parser(recipes, grids, article_model, paper_optimiser):
    """The article's command line, every default named with where it comes from (recipes: the paper's settings)."""
    p = ArgumentParser(
        description="Part 4: BERT fine-tuned with the paper's recipe on a GLUE task (§4.1, A.3), SQuAD v1.1 "
                    "(§4.2), SQuAD v2.0 (§4.3) or SWAG (§4.4), on CUDA, Apple MPS or the CPU; or every GLUE task with "
                    "the paper's choice of learning rate, in a table beside its Table 1. Defaults are the paper's.",
        epilog="Each run writes results/part4_<task>_lr<lr>.{log,json}; --seeds and --grid add a summary, glue the "
               "table results/part4_glue_table.{log,json,md}.")
    p.add_argument("task", help="one of " + ", ".join(recipes) + "; or glue: every GLUE task, the best learning rate "
                                "of the paper's grid on each dev set, and Table 1 beside it (§4.1)")
    p.add_argument("lr", nargs="?", help=f"peak learning rate (default: {paper_defaults(recipes, 'lr', lr_tag)}; glue: each of "
                                         "the paper's grid 5e-5..2e-5, the best on dev; given, that one only)")
    p.add_argument("--model", default=article_model, help="pre-trained BERT: Hub id or local folder (default and "
                                                          "article: bert-base-uncased)")
    p.add_argument("--init", choices=["pretrained", "random"], default="pretrained",
                   help="pretrained (the paper; default) or random: the same architecture from random weights, "
                        "fine-tuned with the same recipe, to measure what pre-training buys")
    p.add_argument("--data-dir", help="GLUE folder (DIR/SST-2/train.tsv, dev.tsv, ...) or SWAG folder (DIR/train.csv, "
                                      "val.csv); default: the Hub datasets nyu-mll/glue, allenai/swag (regular)")
    p.add_argument("--train-data", help="SQuAD: official training JSON (default: the Hub dataset rajpurkar/squad or "
                                        "rajpurkar/squad_v2, split train)")
    p.add_argument("--dev-data", help="SQuAD: official dev JSON (default: the same Hub dataset, split validation)")
    p.add_argument("--tasks", help="glue: a comma-separated subset, e.g. cola,mrpc,rte (default: all nine)")
    p.add_argument("--glue-submission", metavar="DIR", help="glue: every run predicts the test set, and the chosen run "
                                                            "of each task is written to DIR as the GLUE server takes it "
                                                            "(CoLA.tsv ... AX.tsv, submission.zip)")
    p.add_argument("--batch-size", type=int, help=f"default: the paper's ({paper_defaults(recipes, 'batch_size')})")
    p.add_argument("--epochs", type=int, help=f"default: the paper's ({paper_defaults(recipes, 'epochs')})")
    p.add_argument("--max-len", type=int, help=f"longest input in tokens (default: {paper_defaults(recipes, 'max_len')}: "
                                               "run_classifier.py's inputs, run_squad.py's windows)")
    p.add_argument("--stride", type=int, help="SQuAD: tokens two windows share (default 128, as bert_part4_squad.py)")
    p.add_argument("--warmup", type=float, default=0.1, help="share of steps with a rising lr (default 0.1, run_classifier.py)")
    p.add_argument("--weight-decay", type=float, default=0.01,
                   help="AdamW weight decay, not on biases and LayerNorm (default 0.01, paper A.2); AdamW is torch's, eps "
                        "1e-8 with bias correction (paper: " + paper_optimiser + ")")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping (default 1.0, run_classifier.py)")
    p.add_argument("--seed", type=int, help="the one fixed seed (default 0; restarts: --seeds)")
    p.add_argument("--seeds", type=int, help="N restarts with seeds 0..N-1, then mean and std (paper §5.2: 5 restarts); "
                                             "with --grid or glue, each setting is chosen by its mean over the seeds "
                                             "(paper, BERT-large: the best restart on dev)")
    p.add_argument("--grid", choices=sorted(grids), help="glue: lr 5e-5..2e-5 (§4.1); a3: batch x lr x epochs (A.3); "
                                                         "with --seeds, every setting with every seed")
    p.add_argument("--evals", type=int, help=f"dev evaluations during training (default: GLUE {recipes['cola'].evals}, as the "
                                             "article, once per epoch for MNLI and QQP under glue; SQuAD, SWAG once per epoch)")
    p.add_argument("--group-by-length", choices=["auto", "on", "off"], default="auto",
                   help="batches cut from length-sorted groups of 50 batches, in random order (default auto: on for "
                        "SQuAD, whose windows run from 100 to 384 tokens; off for GLUE and SWAG; paper: random batches)")
    p.add_argument("--padding-free", choices=["on", "off"], default="on",
                   help="on (the default): every layer but attention runs on the real tokens of each training batch "
                        "only, the dropout masks drawn as the padded model draws them: on the CPU the same run up to "
                        "float rounding (CUDA and MPS: the same distribution of masks, not the same masks); off: every "
                        "batch padded to its own longest input, today's computation. Not a setting of the results")
    p.add_argument("--fused-adamw", choices=["on", "off"], default="on",
                   help="on (the default): AdamW's fused kernel where torch has one (CUDA; the CPU and MPS from torch "
                        "2.4), as Hugging Face's Trainer; off: its loop of tensor operations. The same numbers up to float "
                        "rounding: not a setting of the results")
    p.add_argument("--max-train-examples", type=int, help="only the first N training examples (SQuAD: questions)")
    p.add_argument("--max-dev-examples", type=int, help="only the first N examples of each dev set (SQuAD: questions)")
    p.add_argument("--eval-batch-size", type=int, help=f"dev batch size (default: {FAMILIES['cola'].eval_batch_size}; SQuAD "
                                                       f"{FAMILIES['squad'].eval_batch_size} windows, as bert_part4_squad.py)")
    p.add_argument("--dtype", default="auto", help="auto (bf16 autocast on CUDA, fp32 elsewhere; the default), fp32 or bf16")
    p.add_argument("--save-model", help="keep the fine-tuned model in this folder (config, safetensors weights, "
                                        "tokenizer; several runs: one subfolder each)")
    add_common_flags(p)
    p.add_argument("--run-tag", help="appended to the results file names, e.g. the model's name")
    p.add_argument("--parallel", choices=["data", "runs"],
                   help="under torchrun: data = every batch split over the processes (default for one run); runs = "
                        "whole runs of --grid/--seeds spread over them (default for those)")
    p.add_argument("--backend", default="auto", help="under torchrun: auto (nccl on CUDA, gloo on CPU; the default), nccl, gloo")
    return p


def refuse_ignored(task, takes, given):
    """A flag this command would not use is refused in one line, never ignored. takes: the data flags of the task's
    family (GLUE and SWAG --data-dir; SQuAD --train-data, --dev-data, --stride); given: the flags' values."""
    for name in ("data_dir", "train_data", "dev_data", "stride"):
        if given[name] is not None and name not in takes:
            flag = "--" + name.replace("_", "-")
            raise Fatal(f"{flag}: {task} does not take it ({', '.join('--' + t.replace('_', '-') for t in takes)} "
                        f"{'does' if len(takes) == 1 else 'do'})")
    if given["grid"] and given["lr"] is not None:
        raise Fatal(f"--grid {given['grid']} tries its own learning rates: drop the learning rate {given['lr']}, or drop "
                    f"--grid")
    if given["grid"] == "a3" and (given["batch_size"] or given["epochs"]):
        raise Fatal("--grid a3 tries its own batch sizes and epochs (paper A.3): drop --batch-size and --epochs")
    if given["seeds"] and given["seed"] is not None:
        raise Fatal(f"--seeds {given['seeds']} runs the seeds 0..{given['seeds'] - 1}: drop --seed {given['seed']}")
    for flag, value in (("--tasks", given["tasks"]), ("--glue-submission", given["glue_submission"])):
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
    if not 0 <= warmup < 1 or weight_decay < 0 or clip <= 0:
        raise Fatal("--warmup must be in [0, 1), --weight-decay >= 0 and --clip > 0")


def parse(argv, recipes, grids, article_model, paper_optimiser):
    """The command line, checked, as the Command every function below main takes its settings from (recipes,
    grids: the paper's settings of each task and its grids, the defaults)."""
    a = build_parser(recipes, grids, article_model, paper_optimiser).parse_intermixed_args(argv)
    task = a.task.lower().replace("-", "")
    task = {"squadv2": "squad_v2", "squad2": "squad_v2", "squadv1": "squad"}.get(task, task)
    if task not in recipes and task != "glue":
        raise Fatal(f"unknown task '{task}': choose one of {', '.join(recipes)}, or glue")
    recipe, family = recipes.get(task, recipes["cola"]), FAMILIES.get(task, FAMILIES["cola"])
    refuse_ignored(task, family.takes, vars(a))
    check_positive({f"--{name.replace('_', '-')}": getattr(a, name) for name in (
        "batch_size", "epochs", "max_len", "evals", "eval_batch_size", "seeds", "max_train_examples", "max_dev_examples")})
    check_positive({"--stride": a.stride or None})
    check_training(a.dtype, a.warmup, a.weight_decay, a.clip)
    tasks = glue.task_list(a.tasks) if task == "glue" else [task]
    resolved = {"task": task, "lr": learning_rate(a.lr, recipe.lr), "seed": a.seed or 0,     # the paper's where not given
                "grid": a.grid or ("glue" if task == "glue" and a.lr is None else None),   # glue: the paper's choice
                "batch_size": a.batch_size or recipe.batch_size, "epochs": a.epochs or recipe.epochs,
                "max_len": a.max_len or recipe.max_len, "stride": 128 if a.stride is None else a.stride,
                "eval_batch_size": a.eval_batch_size or family.eval_batch_size}
    family.check(resolved["max_len"], resolved["stride"])
    v = {**vars(a), **resolved}
    many = bool(v["seeds"] or v["grid"])
    config = Config(task, v["model"], v["warmup"], v["weight_decay"], v["clip"], recipe.evals, family.grouped,
                    v["results_dir"], v["run_tag"], v["save_model"], many, bool(v["seeds"]), v["max_train_examples"],
                    v["max_dev_examples"], command_line(argv, v), (recipe.batch_size, recipe.epochs), v["init"],
                    many or task == "glue", glue.runs_folder(v["glue_submission"]), v["grid"], v["seeds"], v["parallel"],
                    v["padding_free"] == "on", v["fused_adamw"] == "on")
    return Command(tasks, config, Sources(task, v["data_dir"], v["train_data"], v["dev_data"]), v["grid"], v["seeds"],
                   a.evals, v["group_by_length"], (v["max_len"], v["stride"], v["eval_batch_size"]),
                   v["lr"], v["batch_size"], v["epochs"], v["seed"], recipes,
                   glue_table(tasks, v, a.evals) if task == "glue" else None, (v["device"], v["backend"], v["dtype"]))


def glue_table(tasks, flags, evals):
    """The glue command's settings from the checked flags of parse: what its table is of and depends on."""
    recorded = {"model": portable(flags["model"]), "data_dir": portable(flags["data_dir"]),
                **{k: flags[k] for k in glue.TABLE_KEYS}}
    if flags["grid"]:                                  # no rate was given: each task's is chosen from the grid
        recorded["lr"] = f"chosen per task on dev from grid {flags['grid']}"
    cuts = {"--max-train-examples": flags["max_train_examples"], "--max-dev-examples": flags["max_dev_examples"],
            "--evals": evals}
    return glue.GlueTable(tasks, flags["lr"], flags["grid"], flags["batch_size"], flags["epochs"], flags["seeds"],
                          flags["init"], flags["model"], flags["data_dir"], flags["results_dir"], flags["run_tag"],
                          flags["glue_submission"], cuts, recorded)


if __name__ == "__main__":
    sys.exit(not_a_script("part4/cli.py", "python bert_part4_finetune.py (--help lists its flags)"))
