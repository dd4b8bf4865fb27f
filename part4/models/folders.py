"""A model folder read for what it holds before any work, without loading a weight: its config (a key the installed
transformers would ignore is refused), its weight files each read whole and the dtype they hold, its tokenizer
(refused where it is not the model's); and the lines and records that say which weights a run started from and what
they are (each file's sha256, the architecture, what a stand-in stands in for)."""

import functools
import importlib
import inspect
import json
import math
import os
import re
from dataclasses import dataclass

import torch
import transformers
from huggingface_hub import try_to_load_from_cache
from safetensors import safe_open
from transformers import AutoConfig, AutoTokenizer
from transformers.models.auto.configuration_auto import model_type_to_module_name

from part4.command_line.declarations import Fatal, preflight
from part4.models.loading import DTYPE_NAMES, is_local, load_pretrained
from part4.output.results_files import file_sha256, stand_in_record, weight_files

SAFETENSORS_DTYPES = {"F64": "fp64", "F32": "fp32", "BF16": "bf16", "F16": "fp16"}


COMPUTATION_KEYS = {"position_embedding_type": "absolute"}   # config keys that change the computation: the usual value


PROBE = "BERT stands for Bidirectional Encoder Representations from Transformers."     # the article's first answer


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
    otherwise than its vocabulary). Every problem at once, in one line naming the model."""
    config = load_pretrained(AutoConfig, name, flag)
    folder = local_folder(name)
    tok = load_pretrained(AutoTokenizer, name, flag=flag)
    casing, note = casing_problem(tok)
    problems = [config_problem(config), weights and folder and weights_problem(folder, is_local(name)),
                *tokenizer_problems(tok, config), casing]
    if folder:
        try:
            stand_in_record(folder)                 # what it stands in for (results_files.STAND_IN), where it says so
        except Fatal as e:
            problems.append(str(e))
    preflight([f"{flag} {name}: {p}" for p in problems if p])
    return ModelFolder(name=name, flag=flag, config=config, tokenizer=tok, notes=(note,) if note else ())


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
