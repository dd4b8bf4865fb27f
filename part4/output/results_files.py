"""What the scripts print and write, without torch at import (the report reads results on any machine):

- the paths a results file records (relative, or a model folder by its name and a fingerprint), a weight file's sha256,
  what a stand-in model folder stands in for;
- results files: a results JSON read with one line for a file that is not one, a folder checked writable before any
  work, files and model folders written atomically (a temporary file or folder, then rename: a crash leaves nothing that
  looks complete); the free space a write needs checked before, and a write that fails anyway (no space left, a
  read-only folder) said in one line;
- the log (`Log`: each line printed and kept, then written with the numbers it is given as results/<name>.log and
  .json, with the command line, the device, the seconds and the library versions);
- how a line is formatted: a score in points with two decimals (88.50), a list as the article prints it, the article's
  number labelled beside ours (`beside_article`);
- the plots, drawn to files when matplotlib is installed.

The fine-tuning command's own lines are part4/run/'s, a family's part4/tasks/families.py's, each script's the script's."""

import hashlib
import json
import os
import pathlib
import platform
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field

from tqdm import tqdm

from part4.command_line.declarations import Fatal, settings_diff

# --- paths in logs and results: nothing that only exists on the machine that made them ---

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def weight_files(folder):
    """The weight files from_pretrained reads in a folder, in its order of preference: the file config.json names
    (transformers_weights), else model.safetensors, its sharded index, pytorch_model.bin, its sharded index; a sharded
    checkpoint is its index and every shard the index names. () when there is none."""
    named = (read_json(os.path.join(folder, "config.json")) or {}).get("transformers_weights")
    for name in [named] if named else WEIGHT_FILES:
        if os.path.isfile(os.path.join(folder, name)):
            if not name.endswith(".index.json"):
                return (name,)
            weight_map = (read_json(os.path.join(folder, name)) or {}).get("weight_map") or {}
            return (name, *sorted(set(weight_map.values())))
    return ()


def read_json(path):
    """The JSON object in a file, or None when it is not one (a cut or hand-edited file: its reader says why)."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def fingerprint(folder):
    """12 hex digits of sha256 over the folder's config.json and the weight files from_pretrained reads there
    (weight_files: a pytorch_model.bin beside the model.safetensors it reads is not one): the same model, the same
    print."""
    names = sorted({"config.json", *(f for f in weight_files(folder) if not f.endswith(".index.json"))})
    return file_sha256(*(os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))))[:12]


_SHA256 = {}          # {((path, size, mtime), ...): hex digest}: each state of the files hashed once


def file_sha256(*paths):
    """The sha256 of the files' bytes, one file after the other, in hex; of one weight file, what a published
    checkpoint is known by (the sha256 its Hub page's LFS pointer quotes). Hashed once per state of the files (a
    BERT-base is 440 MB), however often a run records them."""
    key = tuple((os.path.abspath(p), stat.st_size, stat.st_mtime_ns) for p in paths for stat in [os.stat(p)])
    if key not in _SHA256:
        h = hashlib.sha256()
        for path, _, _ in key:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        _SHA256[key] = h.hexdigest()
    return _SHA256[key]


# A model folder that stands in for one of the article's checkpoints (a small model fine-tuned here in its place) says
# so in this file: {"stand_in_for": the Hub id, "what": one line, e.g. "stand-in: all-MiniLM-L6-v2 fine-tuned here on
# SQuAD v1.1"}. Its runs record the line, and the report shows them as another model (stand-in).
STAND_IN = "part4_stand_in.json"


def stand_in_record(folder):
    """What a model folder stands in for ({"stand_in_for": Hub id, "what": its line}, as its part4_stand_in.json says),
    or None for a folder without one. A file there that does not say both, in words, stops the command in one line."""
    path = os.path.join(folder, STAND_IN)
    if not os.path.isfile(path):
        return None
    said = read_json(path) or {}
    if not all(isinstance(said.get(k), str) and said[k].strip() for k in ("stand_in_for", "what")):
        raise Fatal(f"{path}: not a stand-in's record (a JSON object with the Hub id it stands in for, \"stand_in_for\", "
                    f"and what it is, \"what\"); mend it or remove it")
    return {"stand_in_for": said["stand_in_for"], "what": said["what"]}


def portable(value):
    """A path as the results record it: a model folder relative to the working directory when it is inside
    it, else by its name plus a fingerprint of its config and weights; any other path relative when it is
    inside or beside the working directory (like ../shared), else by its name. Anything that is not an
    existing local path is returned as it is."""
    if not isinstance(value, str) or not value or not os.path.exists(os.path.expanduser(value)):
        return value
    path = os.path.abspath(os.path.expanduser(value))
    rel = os.path.relpath(path)
    model = os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json"))
    if not rel.startswith("..") or (not model and not rel.startswith(".." + os.sep + "..") and rel != ".."):
        return rel
    return f"{os.path.basename(path)}@{fingerprint(path)}" if model else os.path.basename(path)


# --- the results files: read, and written atomically ---

def read_results(path):
    """The results JSON at path, or None when there is none. A file there that is not one (e.g. left with
    merge-conflict markers) stops the command with one line naming it, as given, and what is wrong, whole; it is
    left as it is."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Fatal(f"{path}: not a results file (not JSON: {e}); left as it is: move it away or delete it, then run "
                    f"again")
    if not isinstance(saved, dict):
        raise Fatal(f"{path}: not a results file (JSON, but not an object); left as it is: move it away or delete it, "
                    f"then run again")
    return saved


# A script's setting by the name the results of earlier versions record it under: its name now (a fine-tune's are
# part4/command_line/fine_tune_settings.py's EARLIER_NAMES)
EARLIER_FLAGS = {"limit": "max_dev_examples"}


def check_results_kept(path, ours, ignore=("device", "results_dir"), as_run=()):
    """The guard of the one results file of the heads', SQuAD's and the math script (a fine-tune's is
    part4/run/run_files.py's check_not_replaced): a file there written with other settings is never replaced (a quick
    check must not overwrite a full run): refused before any work, in one line naming what differs; one of the same
    settings, the same command run again, is replaced. ours: the settings as the file records them (command_line's
    config); a setting the saved file records under an earlier name (EARLIER_FLAGS) is compared under its name now,
    and one it does not record (added since) is not compared. as_run: the settings ours holds as they ran, not as
    given (("dtype",): --dtype auto and fp32 on the CPU are one computation, auto on CUDA and on the CPU two), compared
    with what the file's own "config" records of them. Returns the saved results, None when there are none."""
    saved = read_results(path)
    if saved is None:
        return None
    theirs = (saved.get("run") or {}).get("config")
    if not isinstance(theirs, dict):
        raise Fatal(f"{path}: a result that records no settings; refusing to overwrite it: pass --results-dir, or move "
                    f"it away")
    ours = json.loads(json.dumps(ours, default=str))             # as the file holds them: lists, not tuples
    theirs = {EARLIER_FLAGS.get(k, k): v for k, v in theirs.items()}
    ran = saved.get("config") if isinstance(saved.get("config"), dict) else {}
    for key in set(as_run) & ran.keys():
        theirs[key] = ran[key]
    diff = settings_diff(theirs, {k: v for k, v in ours.items() if k in theirs}, ignore)
    if diff:
        raise Fatal(f"{path}: results of other settings ({diff[:400]}); refusing to overwrite them: pass --results-dir, "
                    f"or delete it")
    return saved


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


def write_atomic(path, content, kept="", folder=False):
    """path written whole or not at all: content (a text, or write(tmp), filling the temporary file or folder it is
    given) goes to a temporary one beside path, which then takes its place with the umask's ordinary permissions; on any
    failure the temporary one goes, an old folder stays, and want of room or rights is one line (not_written; kept: what
    is kept and how to go on). Returns path (a folder's made absolute)."""
    path = os.path.abspath(os.path.expanduser(path)) if folder else path
    parent, old = os.path.dirname(os.path.abspath(path)), None
    tmp = os.path.join(parent, f".tmp-{secrets.token_hex(8)}-{os.path.basename(path)}")   # ends as path does: x.png
    try:
        if folder:
            os.makedirs(tmp)                            # and the folders above it
        else:                                           # made as any file is (no folder there: an OSError, one line)
            pathlib.Path(tmp).write_text(content if isinstance(content, str) else "", encoding="utf-8")
        if not isinstance(content, str):
            content(tmp)
        umask = os.umask(0)
        os.umask(umask)
        for where, _, files in os.walk(tmp):          # a folder's files as the umask makes them (a library's: 0600)
            os.chmod(where, 0o777 & ~umask)
            for name in files:
                os.chmod(os.path.join(where, name), 0o666 & ~umask)
        if folder and os.path.isdir(path):              # the old folder moved aside: a folder cannot replace one
            old = tempfile.mkdtemp(dir=parent, prefix=".old-model-")
            os.rename(path, os.path.join(old, "model"))
        os.replace(tmp, path)
    except BaseException as e:
        line = not_written(path, e, kept)             # measured before the temporary one goes: a full disk is full now
        if folder:
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.remove(tmp)
        if old and not os.path.exists(path):            # the old folder back in its place
            os.rename(os.path.join(old, "model"), path)
        if line:
            raise Fatal(line) from e
        raise
    finally:
        if old and os.path.exists(path):                # gone once the new folder, or the old one again, is in place
            shutil.rmtree(old, ignore_errors=True)
    return path


# --- the room a write needs: checked before any work; a write that fails anyway, one line ---

FULL = 1 << 20           # bytes: a file system with less free is full (torch.save says so only as a RuntimeError)

# A fine-tune's resume checkpoint holds the model's weights and AdamW's two moments of them, each as large as the
# weights: CHECKPOINT_SIZE times the weights' bytes on disk (and the moments, beside the weights, in memory).
ADAMW_MOMENTS = 2
CHECKPOINT_SIZE = 1 + ADAMW_MOMENTS

# A process's peak memory as resource.getrusage and os.wait4 give it (ru_maxrss) is in kilobytes on Linux, in bytes on
# macOS: bytes = ru_maxrss * RU_MAXRSS_UNIT.
RU_MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024


def size_text(n):
    """Bytes as a reader wants them: '12 kB', '349 MB', '1.3 GB'."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{max(n, 0) / 1e3:.0f} kB"


def free_space(path):
    """(the nearest existing folder at or above path, the bytes free on its file system)."""
    probe = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    return probe, shutil.disk_usage(probe).free


def check_room(needs):
    """needs: [(path, bytes, what)], each a file or folder a run will write: refused in one line, before any work,
    when their file system has less free space than they need together."""
    by_disk = {}
    for path, needed, what in needs:
        probe, free = free_space(path)
        disk = by_disk.setdefault(os.stat(probe).st_dev, [probe, free, 0, []])
        disk[2] += needed
        disk[3].append(f"{what} {path} about {size_text(needed)}")
    for probe, free, needed, said in by_disk.values():
        if free < needed:
            raise Fatal(f"not enough free space: {'; '.join(said)}, and {probe} has {size_text(free)} free "
                        f"on its disk: free some space or write elsewhere")


def not_written(path, error, kept=""):
    """The one line of a write that failed for want of room or rights (an OSError: no space left, a read-only or
    vanished folder; or, where the disk is full now, torch.save's RuntimeError): the file, why, that nothing half-written
    is left, and kept (what is kept and how to go on); None for any other failure."""
    probe, free = free_space(os.path.dirname(os.path.abspath(path)))
    if isinstance(error, OSError):
        why = error.strerror or str(error)
    elif isinstance(error, RuntimeError) and free < FULL:
        why = f"no space left: {size_text(free)} free on the disk of {probe}"
    else:
        return None
    return f"{path}: not written ({why}); nothing half-written is left{kept}"


# --- a model's folder: checked before any work (write_atomic replaces it whole) ---

def check_model_target(path, flag):
    """A folder a model will be saved to must be writable before any training starts; an existing one must be a
    model folder (it is replaced whole), never another kind of folder."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise Fatal(f"{flag} {path}: exists and is not a directory")
    if os.path.isdir(path) and os.listdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        raise Fatal(f"{flag} {path}: exists and is not a model folder (no config.json); refusing to replace it")
    check_writable_dir(os.path.dirname(path), flag)


# --- the log: each line printed and kept, then the .log and the .json written ---

@dataclass
class Log:
    """A script's log: say prints each line to stdout (unless quiet) and keeps it; save writes the lines as
    results_dir/<name>.log and the numbers as <name>.json."""
    name: str
    results_dir: str
    quiet: bool = False
    lines: list = field(default_factory=list)
    started: float = field(default_factory=time.time)          # the seconds the .json records count from here

    def say(self, line=""):
        """Print the line (unless quiet) and keep it. A progress bar on the terminal (tqdm's, on stderr) is cleared
        before the line and drawn again after it, so that the line never runs on from the bar."""
        if not self.quiet:
            with tqdm.external_write_mode(file=sys.stdout):
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
        import numpy as np  # imported here: the rest of this room serves the report, without torch
        import tokenizers
        import torch
        import transformers

        payload = dict(payload)
        versions = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
                    "tokenizers": tokenizers.__version__, "numpy": np.__version__}
        payload["run"] = {**(cli or command_line(None, None)), "device": str(device) if device is not None else None,
                          "seconds": round(time.time() - self.started, 3), "versions": versions}
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


def _jsonable(x):
    import numpy as np
    import torch

    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, torch.Tensor):
        return x.tolist()
    return str(x)


# --- how lines are formatted: scores as printed, a list as the article prints it, the article's number beside ours ---

def fmt(scores, missing="n/a"):
    """Scores as the logs and tables print them, with two decimals: 88.5 -> '88.50'; several (MNLI's matched and
    mismatched) joined by '/': [84.1, 83.4] -> '84.10/83.40'; None or none at all -> missing."""
    if scores is None:
        return missing
    values = scores if isinstance(scores, (list, tuple)) else [scores]
    return "/".join(f"{v:.2f}" for v in values) if values else missing


def rounded(values, digits):
    """A list printed as the article prints it: [-0.1763, -0.9611, 0.0659]."""
    return str([round(float(v), digits) for v in values])


RANDOM_HEAD = "the article's own random head, not expected to match"
UNTRAINED_HEAD = "from a trained head; ours is untrained, not expected to match"


def beside_article(value, note=None):
    """The article's number, labelled, printed after ours on every route ('   [article: 0.8333]'). Where ours comes
    from a randomly initialised head, the note says that the two are not expected to match."""
    return f"   [article: {value}" + (f"; {note}]" if note else "]")


# --- plots, drawn to files when matplotlib is installed (an optional package: without it one line says they were skipped) ---

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
