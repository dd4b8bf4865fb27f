"""The estimator: an experiment's size (part4/reproduction/experiments.py: [(count, Work)]) in seconds on a device,
from the units of work part4/reproduction/calibration.py measured there and cached (CACHE, in the results folder): the
sum of each unit's seconds times its count, by part (start, steps, evals, checkpoints). No torch here: a second
--plan reads the cache at once."""

import os
import platform
from dataclasses import dataclass, replace

from part4.command_line.fine_tune_settings import Settings
from part4.output.results_files import fingerprint

# --- The units of work, measured once on the device ---

@dataclass(frozen=True)
class Work:
    """A unit of work measured on the device (part4/reproduction/calibration.py): kind "start" (a script's process
    starting: python and the script's imports; model: the script), "load" (a model and its tokenizer read), "train"
    (one optimiser step on `batch` rows of `length` tokens, warm),
    "forward" (one row's share of a forward pass of `batch` rows of `length` tokens, timed alike) or "checkpoint"
    (a fine-tune's resume checkpoint written: the model and AdamW's two moments); or "room", not a time: how many
    fine-tunes of the model fit on the device side by side (bert_part4_reproduce.py --side-by-side auto). head: the model's head
    ("classifier" or "span"); length None: measured on `texts` (file, columns), rows batched by `batch`: padded, a
    batch's longest row (an evaluation); else a row's own (a padding-free training step, the default). dtype: the
    --dtype a training step or a forward pass runs under (auto: the scripts' default on the device)."""
    kind: str
    model: str = ""
    head: str = "classifier"
    batch: int = 1
    length: int = None
    texts: tuple = ()
    padded: bool = True
    dtype: str = "auto"


# How a training step or a forward pass is timed (part4/reproduction/calibration.py; the plan says it): once, warm (the
# first of its kind on a model in a dtype after an untimed call, which pays for warm-up), so that a first --plan answers
# in seconds; on the CPU on TOKENS tokens (ROWS rows at least), scaled to the experiment's batch: a row's share of a
# bigger batch is about the same there, once a step's fixed cost is spread over enough tokens; on a GPU it is not, and
# the whole batch is timed.
TOKENS, ROWS = 1024, 4
TIMED = ("train", "forward")          # the units whose time depends on the dtype they run under

# The parts of a run its estimate is the sum of, as the plan prints them: each kind of work in one part.
PARTS = {"start": "start", "load": "start", "train": "steps", "forward": "evals", "checkpoint": "checkpoints"}
CHECKPOINT_EVERY = Settings().checkpoint_every   # bert_part4_finetune.py --checkpoint-every's default, in seconds


class ByTheClock(int):
    """The count of a fine-tune's checkpoints: at most one at each evaluation between its first (before training) and
    its last (this many), and only once --checkpoint-every's default has passed since the run started or its last
    checkpoint (part4/run/training_run.py TrainingRun.after_step): its steps' and evaluations' seconds decide how many."""


# --- An estimate: the measured seconds of each unit, from the calibration cache, times its count ---

CACHE = "reproduce_calibration.json"     # in the results folder: {device: {unit: seconds, or a length in tokens}}
IMPORTED = "(the scripts imported)"      # the calibration's first line: its process has imported what the scripts import
CALIBRATED = "calibrated"                # ... and under this key, when the units were measured, how long, at what load


def device_key(device):
    """The device as the cache names it: the --device asked for, on this machine (its name and processor)."""
    cpu = platform.processor() or platform.machine()
    if os.path.isfile("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    return f"--device {device} on {platform.node()} ({cpu}, {os.cpu_count()} cores)"


def length_key(work):
    """The measured length of a work's rows: its texts (a file, by name and size) batched as it batches them."""
    path, columns = work.texts
    return (f"length {model_key(work.model)} {os.path.basename(path)}:{os.path.getsize(path)} {'+'.join(columns)} "
            f"batch {work.batch} {'padded' if work.padded else 'real tokens'}")


def work_key(work, cache):
    """The name of a unit in the cache, or None while the length of its rows is not measured yet."""
    if work.kind == "start":
        return f"start {work.model}"
    if work.kind in ("load", "checkpoint", "room"):
        return f"{work.kind} {model_key(work.model)} {work.head}"
    length = cache.get(length_key(work)) if work.texts else work.length
    if length is None:
        return None
    shape = f"{work.batch}x{length}" if work.kind == "train" else f"{work.batch}x{length}, a row"
    key = f"{work.kind} {model_key(work.model)} {work.head} {shape}"
    return key if work.dtype == "auto" else f"{key}, {work.dtype}"


# --- bf16 beside fp32: on a CPU that computes bf16 in hardware, each training step and forward pass timed in both ---

NATIVE_BF16 = "native bf16"   # in a device's cache: True on a CPU with native bf16 (AMX, AVX-512-BF16), whose plan
                              # shows the estimates in the other dtype beside --dtype's, measured (beside); else False


def under(size, dtype):
    """A size ([(count, Work)]) with its training steps and forward passes run under --dtype dtype."""
    return [(count, replace(work, dtype=dtype) if work.kind in TIMED else work) for count, work in size]


def beside(dtype):
    """The --dtype whose estimates a plan on a CPU with native bf16 shows beside dtype's: bf16 beside fp32 (auto, fp32
    on a CPU), fp32 (auto) beside bf16."""
    return "auto" if dtype == "bf16" else "bf16"


def parts(works, cache):
    """{part: seconds} of [(count, Work)] on the device (PARTS: start, steps, evals, checkpoints), from the cache; None
    where a unit is not measured. A checkpoint's count is ByTheClock: one for every CHECKPOINT_EVERY seconds of the
    run's steps and evaluations, at most ByTheClock's count."""
    out = {}
    for count, work in works:
        key = work_key(work, cache)
        if key not in cache:
            return None
        if isinstance(count, ByTheClock):
            count = min(count, int((out.get("steps", 0) + out.get("evals", 0)) // CHECKPOINT_EVERY))
        out[PARTS[work.kind]] = out.get(PARTS[work.kind], 0.0) + count * cache[key]
    return out


def model_key(model):
    """A model as the calibration cache names it: a Hub id as it is, a folder by its name and fingerprint (the same
    weights, the same measurements, wherever the folder is)."""
    if os.path.isdir(model) and os.path.isfile(os.path.join(model, "config.json")):
        return f"{os.path.basename(os.path.normpath(model))}@{fingerprint(model)}"
    return model
