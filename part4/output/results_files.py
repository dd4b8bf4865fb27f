"""Results files and the paths they record, without torch (the report reads them on any machine): a path as the
results record it (relative, or a model folder by its name and a fingerprint), a weight file's sha256, what a stand-in
model folder stands in for, a results JSON read with one line for a file that is not one, a folder checked writable
before any work, and files and model folders written atomically (a temp file or folder, then rename: a crash leaves
nothing that looks complete); the free space a write needs checked before, and a write that fails anyway (no space
left, a read-only folder) said in one line."""

import functools
import hashlib
import json
import os
import shutil
import tempfile

from part4.command_line.declarations import Fatal

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
    print. Hashed once per state of those files (a BERT-base is 440 MB), however often a run records the model."""
    names = sorted({"config.json", *(f for f in weight_files(folder) if not f.endswith(".index.json"))})
    files = tuple((name, os.stat(os.path.join(folder, name)).st_size, os.stat(os.path.join(folder, name)).st_mtime_ns)
                  for name in names if os.path.isfile(os.path.join(folder, name)))
    return _fingerprint(os.path.abspath(folder), files)


@functools.lru_cache(maxsize=64)
def _fingerprint(folder, files):
    h = hashlib.sha256()
    for name, _, _ in files:
        with open(os.path.join(folder, name), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:12]


def file_sha256(path):
    """The sha256 of a file's bytes, in hex: what a published checkpoint is known by (the sha256 its Hub page's LFS
    pointer quotes). Hashed once per state of the file (a BERT-base is 440 MB), however often a run records it."""
    stat = os.stat(path)
    return _file_sha256(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _file_sha256(path, size, mtime):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def write_atomic(path, text):
    """Write text to a temp file in the same folder, then rename: readers never see half a file."""
    def write_text(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
    replace_atomically(path, write_text)


def replace_atomically(path, write, kept=""):
    """write(tmp) into a temp file beside path, then rename it to path; on any failure the temp file goes. A write
    that fails for want of room or rights is one line (not_written; kept: what is kept and how to go on)."""
    folder, tmp = os.path.dirname(os.path.abspath(path)), None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
        os.close(fd)
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)                 # mkstemp makes 0600; results are ordinary files
        os.replace(tmp, path)
    except BaseException as e:
        line = not_written(path, e, kept)             # measured before the temp file goes: a full disk is full now
        if tmp and os.path.exists(tmp):
            os.remove(tmp)
        if line:
            raise Fatal(line) from e
        raise


# --- the room a write needs: checked before any work; a write that fails anyway, one line ---

FULL = 1 << 20           # bytes: a file system with less free is full (torch.save says so only as a RuntimeError)


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


# --- a model's folder: checked before any work, replaced whole ---

def check_model_target(path, flag):
    """A folder a model will be saved to must be writable before any training starts; an existing one must be a
    model folder (it is replaced whole), never another kind of folder."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise Fatal(f"{flag} {path}: exists and is not a directory")
    if os.path.isdir(path) and os.listdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        raise Fatal(f"{flag} {path}: exists and is not a model folder (no config.json); refusing to replace it")
    check_writable_dir(os.path.dirname(path), flag)


def replace_folder_atomically(path, write, kept=""):
    """write(tmp) fills a temporary folder beside path, which then takes path's place: never half a folder. The
    folder and its files get the ordinary permissions of the user's umask (mkdtemp makes 0700). A write that fails for
    want of room or rights is one line (not_written; kept: what is kept and how to go on)."""
    path = os.path.abspath(os.path.expanduser(path))
    parent, tmp = os.path.dirname(path), None
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=parent, prefix=".tmp-model-")
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
    except BaseException as e:
        line = not_written(path, e, kept)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        if line:
            raise Fatal(line) from e
        raise
    return path
