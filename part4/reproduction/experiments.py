"""The whole article, declared: the experiments that give its numbers, in the article's order (the order they run
in), each one command of a script with the article's numbers it gives (part4/paper/article.py's entries of its
script), the models and data it reads (and the flags that take them), the flags that cut it for a quick pass, and how
its size is measured (size: its model loads, training steps and rows through the model, in the units of
part4/reproduction/estimates.py, which turns a size into seconds on a device). One home for the report's commands and
bert_part4_reproduce.py's plan. No torch here: the report and --help read it at once.

Adding an experiment: its numbers in part4/paper/article.py (each entry names its script), then one Experiment in
EXPERIMENTS, in its place in the article, with its size (docs/reproduce.md, "Adding an experiment")."""

import csv
import json
import math
import os
from dataclasses import dataclass

from part4.output.results_files import portable, read_json
from part4.paper import article
from part4.paper.recipe import (
    EVAL_BATCH_SIZE,
    GLUE_RECIPE,
    GRIDS,
    MAX_LEN,
    RECIPES,
    SPAN_BATCH_SIZE,
    eval_every,
    evaluations_made,
    lr_tag,
)
from part4.reproduction import stand_in
from part4.reproduction.estimates import ByTheClock, Work


@dataclass(frozen=True)
class Experiment:
    name: str              # how the plan names it
    script: str            # article.HEADS, article.MATH, article.SQUAD or article.FINETUNE
    args: tuple = ()       # its own arguments: ("mrpc", "2e-5")
    models: tuple = ()     # (flag, Hub id) of every model it reads
    data: tuple = ()       # (flag, path inside a --data folder laid out as ../shared/data) of every file it reads
    cuts: tuple = ()       # (flag, quick-pass setting) it takes: ("--max-dev-examples", "max_dev_examples")
    needs: str = ""        # what it needs, in words
    after: tuple = ()      # the experiments whose results it reads: it runs after them
    scored_by: tuple = ()  # (data flag, Hub id of the model run on that file): a stand-in's held-out part read instead
    size: object = None    # size(experiment, inputs) -> [(count, Work)]: the work it does, counted on the data it
                           # reads (its files where local, the article's sizes from the Hub), cut as inputs cut it


@dataclass(frozen=True)
class Inputs:
    """Where the experiments read and write, and how far a quick pass cuts them; None: the default (the Hub)."""
    models: str = None                # a folder of one sub-folder per Hub id (--models)
    data: str = None                  # a folder laid out as ../shared/data (--data)
    max_train_examples: int = None    # fine-tunes: only the first N training examples
    max_dev_examples: int = None                 # fine-tunes: the first N dev examples; SQuAD: the first N questions
    device: str = "auto"
    dtype: str = "auto"               # --dtype, passed to every experiment (auto: not passed, the scripts' own default)
    results_dir: str = "results"
    stand_in: str = None              # the --models folder is a stand-in mirror built from this model's folder


# --- How an experiment's size is measured: the work it does, counted on the data it reads ---

# What the scripts do besides their data, counted from their code (a handful of rows each).
HEADS_LOADS, HEADS_ROWS = 3, 12          # bert_part4_heads.py: the encoder under three heads, a few sentences each
DEMO_ROWS = 6                            # bert_part4_squad.py --only demo: the article's questions, one window each
MATH_ROWS = 12                           # bert_part4_math.py: the two SST-2 sentences, the gold-span and s_null rows
FLOW_QUESTIONS = 100                     # bert_part4_math.py --flow-questions (its default)
SHORT = 64                               # the length of those sentences' rows, at most
# The article's sizes, where the data comes from the Hub: (training rows, dev rows) of its GLUE files, SQuAD dev
# questions, and windows per question (10,753 windows over 10,570 questions).
HUB_GLUE = {"sst2": (67349, 872), "mrpc": (3668, 408)}
HUB_SQUAD = {"squad/dev-v1.1.json": int(article.value("v1.dev.n")), "squad/dev-v2.0.json": int(article.value("v2.dev.n"))}
WINDOWS_PER_QUESTION = int(article.value("v1.dev.windows")) / int(article.value("v1.dev.n"))


def tsv_rows(path):
    with open(path, encoding="utf-8", newline="") as f:
        return sum(1 for _ in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)) - 1


def squad_questions(path):
    with open(path, encoding="utf-8") as f:
        return sum(len(p["qas"]) for a in json.load(f)["data"] for p in a["paragraphs"])


def estimated_evaluations(steps, cut, evals=GLUE_RECIPE.evals):
    """A fine-tune's dev evaluations: the article's 30 (SQuAD's: one per epoch) spread over its steps, as the run makes
    them (its last step's too, where that is not one of its cadence: the SST-2 run's 31); a run cut by
    --max-train-examples no more often than every CUT_EVAL_EVERY steps; and one before training."""
    return evaluations_made(steps, eval_every(evals, steps, cut)) + 1


def fine_tune_size(task, inputs, model):
    """A GLUE fine-tune's work (the experiments' and the SST-2 stand-in's), from the model folder `model` timed: its
    start, its steps (and one more: the cost line's forward and backward of the first batch, timed before the first
    step, part4/run/training_run.py time_and_say_cost), its evaluations and the checkpoints its length lets the clock
    write."""
    folder = os.path.join(inputs.data, "glue_data", GLUE_FOLDERS[task]) if inputs.data else None
    local = folder and all(os.path.isfile(os.path.join(folder, f)) for f in ("train.tsv", "dev.tsv"))
    n_train, n_dev = ((tsv_rows(os.path.join(folder, "train.tsv")), tsv_rows(os.path.join(folder, "dev.tsv")))
                      if local else HUB_GLUE[task])
    n_train = min(n_train, inputs.max_train_examples or n_train)
    n_dev = min(n_dev, inputs.max_dev_examples or n_dev)
    steps = math.ceil(n_train / GLUE_RECIPE.batch_size) * GLUE_RECIPE.epochs
    train_texts = (os.path.join(folder, "train.tsv"), GLUE_COLUMNS[task]) if local else ()
    dev_texts = (os.path.join(folder, "dev.tsv"), GLUE_COLUMNS[task]) if local else ()
    length = None if local else GLUE_RECIPE.max_len          # the Hub's data: the recipe's max_len, the most a row takes
    evals = estimated_evaluations(steps, inputs.max_train_examples is not None)
    return [(1, Work("start", article.FINETUNE)), (1, Work("load", model)),   # steps + 1: the cost line's, timed first
            (steps + 1, Work("train", model, batch=GLUE_RECIPE.batch_size, length=length, texts=train_texts, padded=False)),
            (n_dev * evals, Work("forward", model, batch=EVAL_BATCH_SIZE, length=length, texts=dev_texts)),
            (ByTheClock(max(0, evals - 2)), Work("checkpoint", model))]


def squad_size(experiment, inputs):
    """SQuAD's work: its start, and for each dev set its model loaded and its windows' forward passes (questions x
    the article's windows per question, 384 tokens; the demo's few)."""
    out = [(1, Work("start", article.SQUAD))]
    for (_, hub_id), (flag, relative) in zip(experiment.models, experiment.data):
        path = data_file(experiment, flag, relative, inputs)
        n = squad_questions(path) if path and os.path.isfile(path) else HUB_SQUAD[relative]
        windows = math.ceil(min(n, inputs.max_dev_examples or n) * WINDOWS_PER_QUESTION) + DEMO_ROWS
        model = timed_model(hub_id, inputs)
        out += [(1, Work("load", model, "span")),
                (windows, Work("forward", model, "span", batch=SPAN_BATCH_SIZE, length=MAX_LEN))]
    return out


SQUAD_TEXTS = ("question", "context")   # a SQuAD row's text: the question, then its passage (a window of it)


def build_size(build, inputs):
    """[(count, Work)]: the work of making one model of a stand-in mirror (part4/reproduction/stand_in.py's Build) from
    inputs.stand_in: nothing for the base, copied; a fine-tune's steps and dev evaluations, as an experiment's (SQuAD:
    its windows, questions x the article's windows per question; a training row as long as the training file's rows
    are, cut to 384 tokens; the evaluation's windows padded to 384)."""
    if build.task is None:
        return []
    model = inputs.stand_in
    if build.task == "sst2":
        return fine_tune_size(build.task, inputs, model)
    recipe = RECIPES[build.task]
    train, dev = data_path(build.trained_on, inputs), data_path(build.held_out, inputs)
    n_train = squad_questions(train)
    n_dev = squad_questions(dev)
    n_train, n_dev = min(n_train, inputs.max_train_examples or n_train), min(n_dev, inputs.max_dev_examples or n_dev)
    steps = math.ceil(math.ceil(n_train * WINDOWS_PER_QUESTION) / recipe.batch_size) * recipe.epochs
    evals = estimated_evaluations(steps, inputs.max_train_examples is not None, recipe.epochs)
    return [(1, Work("start", article.FINETUNE)), (1, Work("load", model, "span")),   # steps + 1: as fine_tune_size
            (steps + 1, Work("train", model, "span", batch=recipe.batch_size, texts=(train, SQUAD_TEXTS), padded=False)),
            (math.ceil(n_dev * WINDOWS_PER_QUESTION) * evals,
             Work("forward", model, "span", batch=SPAN_BATCH_SIZE, length=MAX_LEN)),
            (ByTheClock(max(0, evals - 2)), Work("checkpoint", model, "span"))]


def fine_tune_experiment_size(experiment, inputs):
    """A fine-tune experiment's work: its GLUE task's (fine_tune_size), on bert-base-uncased's model as timed."""
    return fine_tune_size(experiment.args[0], inputs, timed_model(article.BERT, inputs))


def heads_size(experiment, inputs):
    """The heads' work: its start, the encoder loaded under three heads, a few short rows through each."""
    model = timed_model(article.BERT, inputs)
    return [(1, Work("start", article.HEADS)), (HEADS_LOADS, Work("load", model)),
            (HEADS_ROWS, Work("forward", model, batch=4, length=SHORT))]


def math_size(experiment, inputs):
    """The math's work: its start, its three models loaded, the SST-2 sentences and the span rows (the attention
    flow's questions, the gold-span and s_null rows) through them."""
    sst2, squad, squad2 = (timed_model(hub_id, inputs) for _, hub_id in experiment.models)
    return [(1, Work("start", article.MATH)), (1, Work("load", sst2)), (1, Work("load", squad, "span")),
            (1, Work("load", squad2, "span")), (MATH_ROWS, Work("forward", sst2, batch=2, length=SHORT)),
            (FLOW_QUESTIONS + MATH_ROWS, Work("forward", squad, "span", batch=1, length=MAX_LEN))]


# --- The experiments, in the article's order, the order they run in ---
# The heads ("Checking the formula in code"), the fine-tunes ("Our own fine-tune": SST-2, then MRPC's four rates), the
# span search ("SQuAD v1.1: running it" to "Choosing tau"), then the math, whose numbers stand all through the article
# and whose tau is the SQuAD run's best (after). One command per results file: bert_part4_squad.py writes one
# part4_squad.json whichever parts it runs, and bert_part4_math.py one part4_math.json, so that a part run alone
# would replace the others' numbers.

def fine_tune_experiment(task, lr, needs):
    return Experiment(name=f"{task} {lr_tag(lr)}", script=article.FINETUNE, args=(task, lr_tag(lr)),
                      models=(("--model", article.BERT),), data=(("--data-dir", "glue_data"),),
                      cuts=(("--max-train-examples", "max_train_examples"), ("--max-dev-examples", "max_dev_examples")),
                      needs=f"the Hub ({article.BERT}, GLUE); {needs}", size=fine_tune_experiment_size)


EXPERIMENTS = (
    Experiment(name="heads", script=article.HEADS, models=(("--model", article.BERT),),
               needs=f"the Hub ({article.BERT}); a CPU, seconds", size=heads_size),
    fine_tune_experiment("sst2", RECIPES["sst2"].lr, "a GPU, about an hour"),
    *(fine_tune_experiment("mrpc", lr, "a GPU, minutes (a CPU: hours)") for lr in GRIDS["glue"]["lr"]),
    Experiment(name="squad", script=article.SQUAD,
               models=(("--v1-model", article.SQUAD_V1), ("--v2-model", article.SQUAD_V2)),
               data=(("--v1-data", "squad/dev-v1.1.json"), ("--v2-data", "squad/dev-v2.0.json")),
               cuts=(("--max-dev-examples", "max_dev_examples"),),
               scored_by=(("--v1-data", article.SQUAD_V1), ("--v2-data", article.SQUAD_V2)),
               needs="the Hub (both SQuAD checkpoints and dev sets); a GPU, about 20 minutes (a CPU: hours)",
               size=squad_size),
    Experiment(name="math", script=article.MATH,
               models=(("--sst2-model", article.SST2), ("--squad-model", article.SQUAD_V1),
                       ("--squad2-model", article.SQUAD_V2)),
               data=(("--flow-data", "squad/dev-v1.1.json"),), after=("squad",),     # its tau: the squad run's best
               scored_by=(("--flow-data", article.SQUAD_V1),),
               needs="the Hub (the three public checkpoints; the toy sections alone, --only toys: nothing); a CPU, "
                     "minutes", size=math_size),
)
BY_NAME = {e.name: e for e in EXPERIMENTS}


def grids(order):
    """{task: its fine-tunes} of every task the experiments fine-tune at more than one learning rate (MRPC's four):
    the runs bert_part4_reproduce.py --side-by-side may run at once."""
    out = {}
    for e in order:
        if e.script == article.FINETUNE:
            out.setdefault(e.args[0], []).append(e)
    return {task: runs for task, runs in out.items() if len(runs) > 1}


# --- Which experiment gives an article number, and the command that runs it ---

def experiment_of(entry):
    """The experiment whose results file holds ours for an entry of part4/paper/article.py."""
    if entry.script == article.FINETUNE:
        match = dict(entry.match)
        return BY_NAME[f"{match['task']} {lr_tag(match['lr'])}"]
    return next(e for e in EXPERIMENTS if e.script == entry.script)


def numbers_of(experiment):
    """The article's numbers (not the paper's it quotes) the experiment gives."""
    return [e for e in article.ENTRIES if e.kind != "paper" and e.script and experiment_of(e) == experiment]


def sections_of(experiment):
    """{article section: how many of its numbers the experiment gives}, in the article's order."""
    out = {}
    for entry in numbers_of(experiment):
        out[entry.where] = out.get(entry.where, 0) + 1
    return out


def model_path(hub_id, inputs):
    """A model as an experiment reads it: its folder in the --models mirror, else its Hub id."""
    return os.path.join(inputs.models, hub_id) if inputs.models else hub_id


def data_path(relative, inputs):
    return os.path.join(inputs.data, relative) if inputs.data else None


def data_file(experiment, flag, relative, inputs):
    """A data file as an experiment reads it from the --data folder: the article's (relative), or, where the model run
    on it is a stand-in trained on part of that dev set, the part held out (part4/reproduction/stand_in.py: as its record says,
    or as it will be built with --stand-in). None: the Hub's dataset."""
    hub_id = dict(experiment.scored_by).get(flag)
    if inputs.data and inputs.models and hub_id:
        build = stand_in.BY_ID[hub_id]
        planned = build.held_out if inputs.stand_in and build.instead_of == relative else None
        relative = planned or stand_in.held_out(model_path(hub_id, inputs), relative) or relative
    return data_path(relative, inputs)


def timed_model(hub_id, inputs):
    """The model whose speed an experiment's estimate is measured on: its own, or, for a mirror built with --stand-in,
    the stand-ins' base (the same architecture, whatever head)."""
    return inputs.stand_in or model_path(hub_id, inputs)


def command(experiment, inputs=Inputs()):
    """The experiment's command line, the script first: its models and data from inputs' folders, its cuts, the
    device, the dtype and the results folder where they are not the defaults."""
    words = [experiment.script, *experiment.args]
    if inputs.models:
        for flag, hub_id in experiment.models:
            words += [flag, model_path(hub_id, inputs)]
    if inputs.data:
        for flag, relative in experiment.data:
            words += [flag, data_file(experiment, flag, relative, inputs)]
    for flag, setting in experiment.cuts:
        if getattr(inputs, setting) is not None:
            words += [flag, str(getattr(inputs, setting))]
    if inputs.device != "auto":
        words += ["--device", inputs.device]
    if inputs.dtype != "auto":
        words += ["--dtype", inputs.dtype]
    if os.path.normpath(inputs.results_dir) != "results":
        words += ["--results-dir", inputs.results_dir]
    return words


def report_command(entry, results_dir="results"):
    """(the command that gives ours for an entry in the article's setting, what it needs): the report's; its results
    in results_dir (the article's: results/)."""
    experiment = experiment_of(entry)
    return "python " + " ".join(command(experiment, Inputs(results_dir=results_dir))), experiment.needs


# --- Done before: a results file of the script that records the same command ---

def recorded_words(words):
    """A command's words as a results file records them (run.argv: paths made portable), its --results-dir left out
    (the file is found in that folder)."""
    out = []
    for k, word in enumerate(words):
        if word == "--results-dir" or (k > 0 and words[k - 1] == "--results-dir"):
            continue
        out.append(portable(word))
    return out


def done_before(order, inputs):
    """{experiment name: the name of the results file in the results folder that its command wrote, with the same
    arguments (models by their fingerprint, data, cuts, device, dtype: a run of another --dtype is not this one), every
    part of it run (a file that marks parts not run, not_run, is not done), or None: it is to be run}, for the
    experiments of order; each results file read once."""
    folder, commands = inputs.results_dir, {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not (name.startswith("part4_") and name.endswith(".json")):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                saved = json.load(f)
            argv, not_run = (saved.get("run") or {}).get("argv"), saved.get("not_run")
        except (OSError, ValueError, AttributeError):
            continue                       # the report names a file that is not a results file
        if isinstance(argv, list) and argv and not not_run:
            commands[name] = argv
    done = {}
    for e in order:
        ours = recorded_words(command(e, inputs)[1:])
        done[e.name] = next((name for name, argv in commands.items() if os.path.basename(str(argv[0])) == e.script
                             and recorded_words(argv[1:]) == ours), None)
    return done


# --- What each experiment reads: the mirror's folders and files, found or missing ---

GLUE_FOLDERS = {"sst2": "SST-2", "mrpc": "MRPC"}
GLUE_COLUMNS = {"sst2": ("sentence",), "mrpc": ("#1 String", "#2 String")}     # the text of a row, in GLUE's TSV


def expected_paths(experiment, inputs):
    """[(what, path)] of every local folder and file the experiment reads from the --models and --data folders (the
    models of a mirror that --stand-in builds are not expected: they are built first)."""
    built_here = inputs.models and inputs.stand_in
    out = [(hub_id, model_path(hub_id, inputs)) for _, hub_id in experiment.models] if inputs.models and not built_here \
        else []
    if inputs.data and experiment.script == article.FINETUNE:
        folder = os.path.join(inputs.data, "glue_data", GLUE_FOLDERS[experiment.args[0]])
        out += [(f"GLUE {experiment.args[0]}", os.path.join(folder, name)) for name in ("train.tsv", "dev.tsv")]
    elif inputs.data:
        out += [(flag, data_file(experiment, flag, relative, inputs)) for flag, relative in experiment.data]
    return out


def missing(experiment, inputs):
    """The files an experiment reads that are not here."""
    return [path for _, path in expected_paths(experiment, inputs) if not os.path.exists(path)]


# What an experiment reads from each Hub id's folder, besides the encoder: (in words, the suffix of the config.json
# architecture that has it). bert-base-uncased's experiments put a new head on the encoder: any BERT serves.
HEADS_READ = {article.SST2: ("a two-label classifier (SST-2's)", "ForSequenceClassification"),
              article.SQUAD_V1: ("a span head (SQuAD's start and end vectors)", "ForQuestionAnswering"),
              article.SQUAD_V2: ("a span head (SQuAD's start and end vectors)", "ForQuestionAnswering")}


def model_kind_problem(hub_id, inputs):
    """Why the --models folder of a Hub id holds another kind of model than its experiments read (a span head for the
    SQuAD ids, a two-label classifier for SST-2), read from its config.json's architectures (no weight loaded), or None
    (also for a folder that is missing: missing says so)."""
    needed = HEADS_READ.get(hub_id)
    config = read_json(os.path.join(model_path(hub_id, inputs), "config.json")) if inputs.models and needed else None
    if config is None:
        return None
    names = [str(n) for n in config.get("architectures") or []]
    labels = len(config.get("id2label") or {}) or config.get("num_labels") or 2
    if any(n.endswith(needed[1]) for n in names) and (needed[1] != "ForSequenceClassification" or labels == 2):
        return None
    held = f"{', '.join(names)} with {labels} labels" if any(n.endswith(needed[1]) for n in names) else \
        ", ".join(names) or "no architectures in its config.json"
    return f"{model_path(hub_id, inputs)} holds {held}, not {needed[0]}: not a model of the kind {hub_id} is"
