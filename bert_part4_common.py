"""Shared plumbing for the bert_part4_*.py scripts, and nothing else.

Picking the device, seeding, loading a model or tokenizer from a Hub id or a local folder,
printing the log while keeping a copy of it, and writing results/<name>.log and .json atomically.
The science lives in the scripts themselves, so that each one reads top to bottom like the article.
"""

import argparse
import hashlib
import json
import os
import platform
import random
import socket
import sys
import tempfile
import time
from urllib.parse import urlparse

import numpy as np
import torch


class Fatal(Exception):
    """A bad input or an unreachable resource: the script prints one line and exits with `code`."""

    def __init__(self, message, code=2):
        super().__init__(message)
        self.code = code


def run_cli(main, argv=None):
    """Run `main(argv)`; turn Fatal and Ctrl-C into one line on stderr and a non-zero exit code."""
    try:
        return main(argv) or 0
    except Fatal as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        print("interrupted: no results were written", file=sys.stderr)
        return 130


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit code 2) like every other bad input."""

    def error(self, message):
        raise Fatal(f"{message} (see --help)")


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


def seed_everything(seed):
    """Python, numpy and torch (all devices) from one seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# --- models and tokenizers: a Hub id or a local folder ---

def _is_local(name):
    return os.path.isdir(name) or name.startswith((".", "/", "~"))


def hub_reachable(timeout=3.0):
    """A quick TCP probe of the Hub, so that an offline machine fails in seconds, not after retries."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_pretrained(loader, name, flag="--model", **kwargs):
    """loader.from_pretrained(name), where name is a local folder or a Hub id.

    A local folder must exist; a Hub id is tried from the local cache first, then from the Hub.
    Any failure is one line that names the model and says how to run from a local folder.
    The library's loading bars and reports are silenced: the scripts say what matters themselves.
    """
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if _is_local(name):
        if not os.path.isdir(os.path.expanduser(name)):
            raise Fatal(f"{flag} {name}: no such directory")
        try:
            return loader.from_pretrained(os.path.expanduser(name), **kwargs)
        except (OSError, ValueError) as e:
            raise Fatal(f"{flag} {name}: not a usable model folder ({str(e).splitlines()[0]})")
    try:
        return loader.from_pretrained(name, local_files_only=True, **kwargs)
    except OSError:
        pass
    if not hub_reachable():
        raise Fatal(f"{flag} {name}: the Hugging Face Hub cannot be reached and '{name}' is not in "
                    f"the local cache; pass a local directory instead ({flag} path/to/{name.split('/')[-1]})")
    try:
        return loader.from_pretrained(name, **kwargs)
    except OSError as e:
        raise Fatal(f"{flag} {name}: could not load it from the Hugging Face Hub "
                    f"({str(e).splitlines()[0]}); pass a local directory instead")


def load_hub_dataset(name, config, split, flag):
    """datasets.load_dataset(name, config, split=split), with one clear line when the Hub is out of reach.

    With HF_HUB_OFFLINE=1 the local datasets cache is used; otherwise an unreachable Hub fails at once.
    """
    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
    if not offline and not hub_reachable():
        raise Fatal(f"the Hugging Face Hub cannot be reached to download the dataset '{name}'; "
                    f"pass local files with {flag} (or set HF_HUB_OFFLINE=1 to use a local datasets cache)")
    import datasets

    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as e:  # datasets raises many kinds (ConnectionError, OSError, DatasetNotFoundError)
        raise Fatal(f"could not load the dataset '{name}' ({type(e).__name__}: {str(e).splitlines()[0]}); "
                    f"pass local files with {flag}")


# --- paths in logs and results: nothing that only exists on the machine that made them ---

def fingerprint(folder):
    """12 hex digits of sha256 over the folder's config.json and weight files: the same model, the same print."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        if name == "config.json" or name.endswith((".safetensors", ".bin")):
            with open(os.path.join(folder, name), "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:12]


def portable(value):
    """A path as the results record it: relative to the working directory when it is inside it (or beside
    it, like ../shared), else a model folder by its name plus a fingerprint of its config and weights, and
    any other file by its name. Anything that is not an existing local path is returned as it is."""
    if not isinstance(value, str) or not value or not os.path.exists(os.path.expanduser(value)):
        return value
    path = os.path.abspath(os.path.expanduser(value))
    rel = os.path.relpath(path)
    if not rel.startswith(".." + os.sep + "..") and rel != "..":
        return rel
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")):
        return f"{os.path.basename(path)}@{fingerprint(path)}"
    return os.path.basename(path)


# --- the log and the results files (STYLE 8 and 9) ---

class Report:
    """Prints each log line to stdout and keeps a copy; `save` writes the .log and the .json."""

    def __init__(self, name, results_dir):
        self.name, self.results_dir = name, results_dir
        self.lines = []
        self.started = time.time()

    def say(self, line=""):
        print(line, flush=True)
        self.lines.append(line)

    def save(self, payload, args=None, argv=None, device=None):
        """Write results/<name>.log and results/<name>.json, each atomically."""
        payload = dict(payload)
        payload["run"] = {
            "argv": [portable(a) for a in list(sys.argv[:1]) + list(argv if argv is not None else sys.argv[1:])],
            "config": {k: portable(v) for k, v in vars(args).items()} if args is not None else None,
            "device": str(device) if device is not None else None,
            "seconds": round(time.time() - self.started, 3),
            "versions": library_versions(),
        }
        os.makedirs(self.results_dir, exist_ok=True)
        base = os.path.join(self.results_dir, self.name)
        write_atomic(base + ".log", "\n".join(self.lines) + "\n")
        write_atomic(base + ".json", json.dumps(payload, indent=2, default=_jsonable) + "\n")
        return base + ".json"


def check_writable_dir(path, flag):
    """A folder the script will write into must be writable before any work starts: the folder itself, or
    the nearest one above it that exists (so that it can be made). Probed by making and removing a
    temporary folder there; nothing is left behind, and the folder itself is not created yet."""
    path = os.path.abspath(os.path.expanduser(path))
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise Fatal(f"{flag} {path}: cannot be a folder, because {probe} is a file")
    try:
        os.rmdir(tempfile.mkdtemp(dir=probe, prefix=".write-test-"))
    except OSError as e:
        raise Fatal(f"{flag} {path}: cannot write there ({e.strerror or e})")
    return path


def _jsonable(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, torch.Tensor):
        return x.tolist()
    return str(x)


def write_atomic(path, text):
    """Write to a temp file in the same folder, then rename: readers never see half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)                 # mkstemp makes 0600; results are ordinary files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def library_versions():
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": np.__version__}


def rounded(values, digits):
    """A list printed as the article prints it: [-0.1763, -0.9611, 0.0659]."""
    return str([round(float(v), digits) for v in values])


def add_common_flags(parser):
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cuda, mps or cpu")
    parser.add_argument("--results-dir", default="results", help="where the logs, JSON and plots go (default: results/)")


def pyplot():
    """matplotlib.pyplot drawing to files (no screen needed), or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
