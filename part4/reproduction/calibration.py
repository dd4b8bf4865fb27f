"""The calibration: each unit of work an experiment does (part4/reproduction/estimates.py's Work) measured on this
device, with the experiment's own model at its own shapes, short enough that a first --plan answers in seconds: a
script's process starting (this process's own start, to the scripts imported: IMPORTED, timed by
bert_part4_reproduce.py), a model loaded (once), a training step and a forward pass (each once, warm, as estimates.py's
TOKENS and ROWS say, under the autocast of its --dtype; a step at the task's mean row length; AdamW's update once per
model; on a CPU with native bf16, each step and pass in bf16 and fp32), a checkpoint written; and the length of a
task's rows, as its batches pad them. What is measured goes into the cache
(part4/reproduction/estimates.py reads it without torch); a model that cannot be loaded is named with why."""

import csv
import importlib
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import replace

import torch
import transformers
from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification, AutoTokenizer

from part4.command_line.declarations import not_a_script
from part4.models.loading import autocast, autocast_dtype, native_bf16, pick_device
from part4.output.results_files import read_json, write_atomic
from part4.paper.recipe import CLIP, GLUE_RECIPE, MAX_LEN
from part4.reproduction.estimates import (
    IMPORTED,
    NATIVE_BF16,
    ROWS,
    TIMED,
    TOKENS,
    Work,
    beside,
    length_key,
    work_key,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLED_BATCHES = 10     # batches drawn (seed 0) to measure a task's padded length
HEADS = {"classifier": AutoModelForSequenceClassification, "span": AutoModelForQuestionAnswering}


def timed(step, device, warm):
    """The seconds of one call of step(), warm: where no call of its kind has run on the model in its dtype yet (not
    warm), two calls, the quicker (the first pays for warm-up). Once: a first --plan answers in seconds (the plan says
    so), and a call that other work on a shared machine disturbed counts."""
    seconds = []
    for _ in range(1 if warm else 2):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return min(seconds)


def checkpoint_seconds(net):
    """A fine-tune's resume checkpoint written, as part4/run/run_files.py writes it (torch.save to a file of its
    own, then renamed): the model's weights and AdamW's two moments, each as large as the weights."""
    state = {"model": net.state_dict(),
             "opt": {k: [torch.zeros_like(p) for p in net.parameters()] for k in ("exp_avg", "exp_avg_sq")}}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "checkpoint.pt")
        start = time.perf_counter()
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
        return time.perf_counter() - start


def load(model, head, device):
    """(the model with its head, its tokenizer, the seconds they took to load, once: the first use of the library in
    this process included, a little more than a script's load, whose start has paid for it)."""
    kw = {"num_labels": 2} if head == "classifier" else {}
    start = time.perf_counter()
    net = HEADS[head].from_pretrained(model, **kw).to(device)
    tokenizer = AutoTokenizer.from_pretrained(model)
    return net, tokenizer, time.perf_counter() - start


def text_rows(path, columns):
    """The texts of a task's rows: GLUE's TSV columns, or a SQuAD JSON's (question, passage) pairs."""
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            return [[q["question"], p["context"]] for a in json.load(f)["data"] for p in a["paragraphs"] for q in p["qas"]]
    with open(path, encoding="utf-8", newline="") as f:
        return [[r.get(c) or "" for c in columns] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def text_length(tokenizer, path, columns, batch, padded):
    """Over SAMPLED_BATCHES batches of `batch` rows drawn from the file (seed 0), each row cut as the fine-tune cuts
    it (GLUE: the recipe's max_len; SQuAD: a window of MAX_LEN, the passage cut): padded, the mean length of a batch padded to its
    longest row (an evaluation's batches); else the mean length of a row (a padding-free training step computes all
    but attention on the real tokens)."""
    rows = text_rows(path, columns)
    squad = path.endswith(".json")
    max_len = MAX_LEN if squad else GLUE_RECIPE.max_len
    rng, lengths = random.Random(0), []
    for _ in range(SAMPLED_BATCHES):
        texts = rng.sample(rows, min(batch, len(rows)))
        encoded = tokenizer(*zip(*texts), truncation="only_second" if squad else True, max_length=max_len)["input_ids"]
        lengths += [max(len(ids) for ids in encoded)] if padded else [len(ids) for ids in encoded]
    return round(sum(lengths) / len(lengths))


def random_batch(net, rows, length, device):
    torch.manual_seed(0)
    ids = torch.randint(0, net.config.vocab_size, (rows, length), device=device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def rows_timed(batch, length, device):
    """The rows a step or a forward pass is timed on: the whole batch on a GPU; on the CPU as many as hold TOKENS (at
    least ROWS), at most the batch."""
    return batch if device.type == "cuda" else min(batch, max(ROWS, TOKENS // max(1, length)))


def train_step_seconds(net, batch, length, device, *, dtype, warm):
    """One optimiser step of the fine-tune on `batch` rows of `length` tokens: the head's loss (a classifier's, or a
    span head's start and end) forward and back under the autocast --dtype gives there (part4/models/loading.py, as the
    scripts), timed at the length (the mean of a row: padding-free steps compute all but attention on the real tokens),
    on rows_timed rows scaled to the batch, then the update (the gradients clipped, AdamW's step), whose cost does not
    depend on the batch nor the autocast (fused where torch has it, as the scripts' default --fused-adamw on)."""
    net.train()
    rows = rows_timed(batch, length, device)
    labels = torch.zeros(rows, dtype=torch.long, device=device)
    try:
        optimiser = torch.optim.AdamW(net.parameters(), lr=GLUE_RECIPE.lr, fused=True)
    except RuntimeError:
        optimiser = torch.optim.AdamW(net.parameters(), lr=GLUE_RECIPE.lr)

    def forward_backward(inputs):
        with autocast(device, autocast_dtype(device, dtype)):
            out = net(**inputs)
        heads = [out.logits] if "logits" in out else [out.start_logits, out.end_logits]
        sum(torch.nn.functional.cross_entropy(logits.float(), labels) for logits in heads).backward()

    def update():                            # the recipe's: the gradients clipped, AdamW's step, cleared
        torch.nn.utils.clip_grad_norm_(net.parameters(), CLIP)
        optimiser.step()
        optimiser.zero_grad(set_to_none=False)

    if net not in UPDATES:                   # AdamW's update costs the same whatever the batch: timed once a model
        forward_backward(random_batch(net, rows, 2, device))       # gradients for the update to read
        UPDATES[net] = timed(update, device, warm=False)

    inputs = random_batch(net, rows, min(net.config.max_position_embeddings, max(2, length)), device)
    return timed(lambda: forward_backward(inputs), device, warm) * batch / rows + UPDATES[net]


UPDATES = {}             # {model: its AdamW update's seconds}


def forward_seconds(net, batch, length, device, *, dtype, warm):
    """One row's share of a forward pass of rows_timed rows of `length` tokens, under the autocast --dtype gives for
    evaluation there (part4/models/loading.py), as the scripts evaluate: in one autocast context for a whole dev set,
    so that each weight is cast once, not once a pass (the first pass here pays for that, untimed)."""
    net.eval()
    rows = rows_timed(batch, length, device)
    inputs = random_batch(net, rows, length, device)
    with torch.no_grad(), autocast(device, autocast_dtype(device, dtype, inference=True)):
        net(**inputs)
        return timed(lambda: net(**inputs), device, warm) / rows


CUDA_CONTEXT = 1 << 30   # bytes a process's CUDA context and libraries take on the GPU besides its tensors, at most


def room(net, device):
    """How many fine-tunes of this model fit side by side on the device: on CUDA its memory free (with what this
    process holds, given back when it ends), 90% of it, over one run's peak (a training step of GLUE's batch at its
    longest input, the recipe's: the weights, AdamW's moments, the activations) and a process's CUDA context; 1 elsewhere (on the
    CPU one run already uses every core: docs/benchmarks.md measures what two at a time cost there)."""
    if device.type != "cuda":
        return 1
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    train_step_seconds(net, GLUE_RECIPE.batch_size, GLUE_RECIPE.max_len, device, dtype="auto", warm=False)
    peak = torch.cuda.max_memory_allocated(device)
    free = torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device)
    return max(1, int(0.9 * free // (peak + CUDA_CONTEXT)))


def one_line(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def calibrate(works, device, cache, say, names=None):
    """Measure every unit of works not in the cache, into the cache; {model: why} for the models that could not be
    loaded (their units stay unmeasured). On a CPU with native bf16 (NATIVE_BF16, recorded in the cache), each training
    step and forward pass also in the dtype the plan shows beside (estimates.py beside). say(line): one line per model
    measured, naming it as names does (a model's path as the log may show it; its path else)."""
    device, problems, names = pick_device(device), {}, names or {}   # --device auto as every script resolves it
    cache[NATIVE_BF16] = device.type == "cpu" and native_bf16(device)
    if cache[NATIVE_BF16]:
        works = list(dict.fromkeys([*works, *(replace(w, dtype=beside(w.dtype)) for w in works if w.kind in TIMED)]))
    transformers.logging.set_verbosity_error()           # a new head on an encoder is expected here
    transformers.logging.disable_progress_bar()
    for model, head in dict.fromkeys((w.model, w.head) for w in works if w.kind != "start"):
        todo = [w for w in works if (w.model, w.head) == (model, head) and work_key(w, cache) not in cache]
        if not todo:
            continue
        say(f"calibrating {names.get(model, model)} ({head} head) on {device}")
        try:
            net, tokenizer, seconds = load(model, head, device)
        except (OSError, ValueError, RuntimeError, KeyError) as e:
            problems[model] = one_line(e)
            continue
        cache[work_key(Work("load", model, head), cache)] = seconds
        warmed = set()                       # (kind, dtype) of the steps and passes run on this model so far
        for work in todo:
            if work.texts and length_key(work) not in cache:
                cache[length_key(work)] = text_length(tokenizer, *work.texts, work.batch, work.padded)
            length = cache[length_key(work)] if work.texts else work.length
            warm = (work.kind, work.dtype) in warmed
            warmed.add((work.kind, work.dtype))
            if work.kind == "train":
                cache[work_key(work, cache)] = train_step_seconds(net, work.batch, length, device, dtype=work.dtype,
                                                                    warm=warm)
            elif work.kind == "forward":
                cache[work_key(work, cache)] = forward_seconds(net, work.batch, length, device, dtype=work.dtype, warm=warm)
            elif work.kind == "checkpoint":
                cache[work_key(work, cache)] = checkpoint_seconds(net)
            elif work.kind == "room":
                cache[work_key(work, cache)] = room(net, device)
    return problems


def main(request_path):
    """python -m part4.reproduction.calibration REQUEST.json, as bert_part4_reproduce.py starts it: the request's works measured
    into its cache on its device; the cache and the problems written back to the same file."""
    request = read_json(request_path)
    works = [Work(**{**w, "texts": tuple(tuple(t) if isinstance(t, list) else t for t in w["texts"])})    # (file, columns)
             for w in request["works"]]
    for script in dict.fromkeys(w.model for w in works if w.kind == "start"):
        importlib.import_module(os.path.splitext(script)[0])            # what its process imports (nothing runs)
    print(IMPORTED, flush=True)
    cache = request["cache"]
    problems = calibrate(works, request["device"], cache, lambda line: print(line, flush=True), names=request.get("names"))
    write_atomic(request_path, json.dumps({"cache": cache, "problems": problems}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:              # started by bert_part4_reproduce.py with its request file, not by hand
        sys.exit(not_a_script("part4/reproduction/calibration.py", "python bert_part4_reproduce.py --plan (--help)"))
    sys.exit(main(sys.argv[1]))
