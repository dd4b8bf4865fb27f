"""Ours: every results file the scripts write, read once and checked whole (part4_*.json, in --results-dir and the
folders below it: a run of each script, a fine-tune's summary of restarts or of a grid, the GLUE table; one that cannot
be a run, not JSON, another schema, a block its command writes missing, stops the report with one line naming it, in
both modes), and the value an entry of part4/paper/article.py names in one (its field: a dotted path, or an operation
on several), or why the file holds none there (Unusable). The statuses are part4/reproduction/statuses.py's. No torch
here: the report reads JSON."""

import fnmatch
import glob
import json
import math
import os
from dataclasses import dataclass

from part4.command_line.declarations import Fatal
from part4.output.results_files import check_writable_dir, read_results
from part4.paper import article

REPORT_MD, REPORT_JSON = "REPRODUCTION.md", "REPRODUCTION.json"     # the report's own files, not runs
RESULTS_NAME = "part4_*.json"          # the name every script gives its results file (its log: the same, .log)

# --- The results files, each checked whole ---
# What a results file of each script holds, by the part of the command that wrote it: {block: its JSON type}. A file
# without one of these cannot be read as a run (one line names the file and the block).
BLOCKS = {
    article.HEADS: {"the heads": {"glue": dict, "swag": dict, "span": dict}},
    article.MATH: {"toys": {"glue_toy": dict, "span_toy": dict, "f1_examples": list, "swag_toy": dict, "tables": dict},
                   "all": {"glue_toy": dict, "glue_real": list, "new_weights": dict, "attention": dict, "span_toy": dict,
                           "span_real": list, "null": dict, "f1_examples": list, "swag_toy": dict, "tables": dict}},
    article.SQUAD: {"demo": {"v1_head": dict, "v1_demo": list, "v2_demo": list}, "v1": {"v1_dev": dict},
                    "v2": {"v2_dev": dict}},
    article.FINETUNE: {"a run": {"task": str, "lr": (int, float), "batch_size": int, "epochs": int, "before": dict,
                                 "final": dict, "curve": list},
                       "a summary of restarts": {"task": str, "summary": dict, "runs": list},
                       "a summary of a grid": {"task": str, "grid": str, "runs": list},
                       "the GLUE table": {"tasks": dict, "average": dict}},
}
KINDS = {dict: "an object", list: "a list", str: "a string", (int, float): "a number", int: "a whole number"}


def script_of(data):
    return os.path.basename(data["run"]["argv"][0])


def json_text(value):
    """A JSON value as the file holds it, short: "abc", null, NaN, [1, 2]."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parts_run(script, data):
    """The parts of the command that wrote this file, as BLOCKS names them, or the problem with its record."""
    config = data["run"].get("config") or {}
    if script == article.MATH:
        only = config.get("only")
        return [only] if isinstance(only, str) and only in BLOCKS[script] else f"run.config.only is {json_text(only)}"
    if script == article.SQUAD:
        only = config.get("only")
        ok = isinstance(only, list) and only and all(part in BLOCKS[script] for part in only)
        return only if ok else f"run.config.only is {json_text(only)}, not a list of {', '.join(BLOCKS[script])}"
    if script == article.FINETUNE:
        return [next(kind for kind, key in (("the GLUE table", "tasks"), ("a summary of restarts", "summary"),
                                            ("a summary of a grid", "grid"), ("a run", "")) if not key or key in data)]
    return list(BLOCKS[script])


def run_problem(data, path):
    """Why a results file cannot be read as a run of these scripts (one line naming the file, as given, and the field),
    or None. The same check for a folder's files and for one file given alone."""
    run = data.get("run")
    argv = run.get("argv") if isinstance(run, dict) else None
    if not isinstance(argv, list) or not argv or not isinstance(argv[0], str):
        return f"{path}: not a results file of these scripts (no run block with the command line, run.argv)"
    for key in ("config", "versions"):
        if run.get(key) is not None and not isinstance(run[key], dict):
            return f"{path}: run.{key} is {json_text(run[key])}, not an object"
    script = script_of(data)
    if script not in BLOCKS:
        return f"{path}: written by {script}, not by one of the scripts the report reads ({', '.join(BLOCKS)})"
    parts = parts_run(script, data)
    if isinstance(parts, str):
        return f"{path}: {parts}"
    not_run = data.get("not_run", {})
    if not isinstance(not_run, dict) or not all(isinstance(v, str) for v in not_run.values()):
        return f"{path}: not_run is {json_text(not_run)}, not an object naming each part not run and why"
    for part in parts:
        for block, kind in BLOCKS[script][part].items():
            if block not in data and block in not_run:
                continue                   # a part the command could not run, and says why
            if block not in data:
                return f"{path}: no {block} block, which {script} writes for {part}"
            if not isinstance(data[block], kind) or isinstance(data[block], bool):
                return f"{path}: {block} is {json_text(data[block])}, not {KINDS[kind]}"
    return None


def checked_runs(results_dir):
    """{path relative to results_dir: JSON} of every results file under results_dir (named part4_*.json, or holding a
    run block), each checked whole: a folder that is not one, or a results file there that cannot be read as a run,
    stops the report with one line naming it (every such file at once); nothing is dropped. Other JSON (the official
    prediction files beside the runs) is not a run, and is left out."""
    if not os.path.isdir(results_dir):
        raise Fatal(f"--results-dir {results_dir}: {'not a directory' if os.path.exists(results_dir) else 'no such directory'}")
    check_writable_dir(results_dir, "--results-dir")
    runs, problems = {}, []
    for path in sorted(glob.glob(os.path.join(results_dir, "**", "*.json"), recursive=True)):
        name = os.path.relpath(path, results_dir).replace(os.sep, "/")
        named = fnmatch.fnmatch(os.path.basename(name), RESULTS_NAME)
        if name == REPORT_JSON:
            continue
        try:
            data = read_results(path)
        except Fatal as e:
            problems += [str(e)] if named else []
            continue
        if data is None:                                   # named like one, but a folder or a link to nothing
            what = "a folder" if os.path.isdir(path) else "a link to no file"
            problems += [f"{path}: {what}, not a results file"] if named else []
            continue
        if not named and "run" not in data:
            continue
        problem = run_problem(data, path)
        if problem:
            problems.append(f"{problem}; left as it is: move it away or mend it, then run again")
        else:
            runs[name] = data
    if problems:
        count = f"{len(problems)} results files cannot be read as runs: " if len(problems) > 1 else ""
        raise Fatal(count + "; ".join(problems) + "; no report written")
    return runs


# --- The value an entry's field names in a results file ---

MISSING = object()                     # what lookup finds where the file holds nothing


def lookup(data, path):
    """The value at a dotted path ('final.dev.accuracy', 'curve.-1.step'), or MISSING. A key that holds dots itself
    ('answer.+0.00': the decision at tau = +0.00) is read whole."""
    parts = path.split(".")
    k = 0
    while k < len(parts):
        part = parts[k]
        if isinstance(data, list) and part.lstrip("-").isdigit() and -len(data) <= int(part) < len(data):
            data, k = data[int(part)], k + 1
            continue
        if not isinstance(data, dict):
            return MISSING
        for end in range(len(parts), k, -1):              # the longest key that is there: "+0.00" before "+0"
            key = ".".join(parts[k:end])
            if key in data:
                data, k = data[key], end
                break
        else:
            return MISSING
    return data


def finite(number):
    """A number a float holds: not NaN, not infinity, not a whole number too long for a float (JSON allows 1e400 as
    digits)."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


OPERATIONS = {"exp": lambda a: math.exp(a), "neglog": lambda a: -math.log(a), "sumexp": lambda a: sum(map(math.exp, a)),
              "range": lambda a: max(a) - min(a), "ratio": lambda a, b: a / b, "plus": lambda a, b: a + b,
              "concat": lambda *a: [x for v in a for x in (v if isinstance(v, list) else [v])]}


@dataclass(frozen=True)
class Unusable:
    """Why a results file gives no value of ours for an entry: its field holds no number, or is not there (missing)."""
    why: str
    missing: bool = False


def is_constant(word):
    return word.replace(".", "", 1).isdigit()


def field_paths(field):
    """The dotted paths an entry's field reads: the field itself, or an operation's paths."""
    op, *args = field.split()
    return [p for p in args if not is_constant(p)] if op in OPERATIONS else [field]


def ours(entry, data):
    """The value an entry's field names in a results JSON (part4/paper/article.py's docstring), or Unusable saying why."""
    op, *args = entry.field.split()
    if op not in OPERATIONS:
        op, args = None, [entry.field]
    values = []
    for word in args:
        value = float(word) if is_constant(word) else lookup(data, word)
        problem = value_problem(entry, word, value, count=op is None)
        if problem:
            return problem
        values.append(value)
    if op is None:
        return values[0]
    try:
        return OPERATIONS[op](*values)
    except (ValueError, OverflowError, ZeroDivisionError) as e:
        return Unusable(f"{entry.field}: cannot be computed ({e})")


def value_problem(entry, path, value, count):
    """Why the value at path cannot be ours for the entry, or None: it must be there, and be what the article prints: a
    number or a list of them (finite; whole where the article prints a count and the field is read as it is), or true
    or false for a yes/no."""
    if value is MISSING:
        return Unusable(f"no {path} in this run", missing=True)
    theirs = article.numbers_in(entry.value)
    if not theirs:
        return None if isinstance(value, bool) else Unusable(f"{path} is {json_text(value)}, where true or false should be")
    bad = [x for x in flat(value) if isinstance(x, bool) or not isinstance(x, (int, float)) or not finite(x)]
    if bad:
        return Unusable(f"{path} {'holds' if isinstance(value, list) else 'is'} {json_text(bad[0])}, where a number "
                        f"should be")
    whole = count and entry.kind != "timing" and entry.scale == 1 and not any("." in t or "e" in t for t in theirs)
    if whole and any(x != int(x) for x in flat(value)):
        return Unusable(f"{path} is {json_text(value)}, where a count (a whole number) should be")
    return None


def holds(entry, data):
    """Does this results file hold ours for the entry: its script, its task and learning rate, and the part of the
    command that gives it (the first block of each path it reads)? The value itself may still be unusable."""
    if not entry.script or script_of(data) != entry.script or any(data.get(k) != v for k, v in entry.match):
        return False
    return all(path.split(".")[0] in data for path in field_paths(entry.field))


def flat(value):
    """A value's numbers, lists of lists made one list."""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in flat(v)]
    return [value]


def part_not_run(entry, runs):
    """(results file, why) of a file of the entry's script that says the part giving it could not run (its not_run,
    {block: why}: the math script's with a model refused), or ('', '')."""
    blocks = {path.split(".")[0] for path in field_paths(entry.field)} if entry.script else set()
    for name, data in runs.items():
        said = data.get("not_run", {}) if script_of(data) == entry.script else {}     # checked: {block: why}
        for block in sorted(blocks & set(said)):
            return name, f"not run in {name}: {said[block]}"
    return "", ""
