"""The reproduction report's rules (bert_part4_report.py): every number the article prints beside ours, with a status
for each. The article's numbers come from part4/paper/article.py; ours from the results JSON the scripts wrote. The
statuses and the rules that decide them:
  same             ours, rounded to the digits the article prints, equals the article's number;
  within spread    a fine-tune's dev score inside the article's own spread (MRPC 2e-5 and its repeat);
  within tolerance inside a stated tolerance, with its reason (TOLERANCE below);
  differs          neither; with what the project knows of why, where it knows (KNOWN);
  another model    our run's model is not shown to be the article's checkpoint: shown, not judged (a count of the
                   data or the recipe, which needs no model, is judged whatever model ran). A model is judged by what
                   its results file records it loaded, never by its folder's name alone: the article's checkpoint when
                   the sha256 of the weight file its loading picks is the published one (part4/paper/article.py's
                   PUBLISHED); where no published sha256 is known, when its name and its architecture (bert, 12
                   layers, H 768, 12 heads, vocab 30,522) are the article's, said "by name and architecture; weights not
                   verified"; else another model: another architecture (its rows of layers it does not have too), other
                   weights of the article's architecture (random ones), --init random, a stand-in (a folder fine-tuned
                   here in the place of a checkpoint: "another model (stand-in)", what it is, for every number of its
                   runs that needs a model), or weights not recorded (a results file written before runs recorded
                   their weights' sha256 and architecture);
  another split    our run scored another dev file than the article's (the offline evaluation part of
                   ../shared/data; a fine-tune's dev set of another size): shown, not judged;
  another setting  our run used a library version requirements.txt excludes (e.g. tokenizers 0.23.2), or a fine-tune
                   left the article's batch 32, 3 epochs and seed 0 (for its learning curve, also the article's 30
                   dev evaluations): shown, not judged;
  cut run          our run saw part of the data (--max-train-examples, --max-dev-examples, --limit): shown, not judged
                   (a cut run or another split on another model says that too);
  shown            timings, numbers of the article's random heads and rounding noise: shown, never judged;
  unusable         the results file holds no number where ours should be (a string, null, NaN, infinity, a count that
                   is not whole; or nothing, where a run in the article's setting holds it): a warning names the file
                   and the field;
  not run yet      no results file gives ours, whatever its kind: the command that does, and what it needs (and
                   why, where a results file says its part could not run: the math script with a model refused).
Every results file the scripts write is read (part4_*.json, in --results-dir and the folders below it): a run of each
script, a fine-tune's summary of restarts or of a grid, the GLUE table. One that cannot be a run (not JSON, another
schema, a block its command writes missing) stops the report with one line naming it, in both modes.
A number with several rows (several runs give it) counts once: "differs" if any judged row differs (a run the
project stands behind that disagrees is not hidden by one that agrees), else "reproduced" if any judged row is
the same or within the spread or a tolerance, else the first of UNJUDGED its rows show. "Reproduced" splits into
the numbers that need no model (toy arithmetic, counts of the data and the recipe, arithmetic on quoted tables),
those of a model reproduced on the article's own checkpoint (its weights' sha256), and those reproduced on a
checkpoint known by name and architecture only (no published sha256).
"""

import fnmatch
import glob
import json
import math
import os
import sys
from dataclasses import dataclass

from packaging.requirements import Requirement

from part4.command_line.declarations import Fatal, not_a_script, say_error
from part4.output.results_files import check_writable_dir, read_results  # no torch here: the report reads JSON
from part4.paper import article
from part4.paper.recipe import GLUE_RECIPE
from part4.reproduction import experiments

REPORT_MD, REPORT_JSON = "REPRODUCTION.md", "REPRODUCTION.json"
RESULTS_NAME = "part4_*.json"          # the name every script gives its results file (its log: the same, .log)
# The plots the scripts draw: (how the file name starts, how it ends, an entry of the section it belongs to).
PLOTS = (("part4_squad_tau_sweep", ".png", "v2.dev.tau"), ("part4_math_attention", ".png", "flow.born"),
         ("part4_math_span_heatmap", ".png", "gold.0.score"), ("part4_sst2_", "_curve.png", "sst2.steps"),
         ("part4_mrpc_", "_curve.png", "mrpc.lr5e-05.accuracy"))

# The tolerances, each with its reason. A fine-tune's dev score: the article's own repeat of one job moved it by
# the width of its spread (GPU arithmetic is not bit-for-bit repeatable; seeds and hardware move it).
_LOW, _HIGH = article.SPREAD[("mrpc", 2e-5)]
_ONE_LOGIT = [article.numbers_in(article.value(k))[-1] for k in ("sst2.1.CW", "sst2.1.logits")]
TOLERANCE = {
    "fine-tune": (_HIGH - _LOW, f"a fine-tune's dev score moves with seeds and hardware: the article's own repeat "
                                f"of MRPC 2e-5 moved it by {_HIGH - _LOW:.4f}"),
    "dev set": (0.1, "a fixed checkpoint scored in another precision (bf16 on CUDA, fp16 on MPS, fp32 on the CPU) "
                     "flips a few answers: 0.1 points"),
    "real model": (1.0, f"one unit of the last printed digit: float rounding on another device (the article itself "
                        f"prints one logit as {_ONE_LOGIT[0]} and as {_ONE_LOGIT[1]})"),
}
WINDOWS_DOC = "docs/squad-evaluation.md#the-window-count"
WINDOW_TOKENIZERS = ("0.23.1", "0.23.2")     # the tokenizers that give the article's 10,753 windows
REQUIREMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "requirements.txt")     # the checkout's
OFFLINE = ("Without the Hub: every model flag takes a local folder (`--model DIR`, `--v1-model DIR`, ...), and the "
           "data flags take the files of `../shared/data`, the data folder beside the checkout (docs/offline.md).")


# --- Ours: the results files, checked, and the value an entry's field names ---

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


def read_runs(results_dir):
    """{path relative to results_dir: JSON} of every results file under results_dir (named part4_*.json, or holding a
    run block), and one line for each such file that cannot be read as a run. Other JSON (the official prediction
    files beside the runs) is not a run, and is left out."""
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
    return runs, problems


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


def number_at(data, path):
    """The finite number at a path, or None."""
    value = lookup(data, path)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and finite(value)
    return value if ok else None


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


# --- The model ours ran on, judged by what it is: its weights' sha256, its architecture ---

def loaded_of(entry, data):
    """The record of the model ours was computed on (part4/models/folders.py's loaded_record), or None where the file
    holds none: the heads' and a fine-tune's `weights`, the SQuAD script's `models` by part (v1, v2), the math
    script's by flag (--sst2-model)."""
    if entry.script in (article.HEADS, article.FINETUNE):
        record = data.get("weights")
    else:
        part = entry.flag.split("_")[0] if entry.script == article.SQUAD else flag_of(entry.flag)
        record = (data.get("models") or {}).get(part) if isinstance(data.get("models"), dict) else None
    ok = isinstance(record, dict) and isinstance(record.get("sha256"), dict) and isinstance(record.get("architecture"),
                                                                                           dict)
    return record if ok else None


def flag_of(name):
    """sst2_model -> --sst2-model"""
    return "--" + name.replace("_", "-")


def architecture_words(found):
    """'bert, 12 layers, H 768, 12 heads, vocab 30,522': an architecture as the results record it."""
    def shown(key):
        value = found.get(key)
        return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "?"
    return (f"{found.get('model_type') or '?'}, {shown('layers')} layers, H {shown('hidden')}, {shown('heads')} "
            f"heads, vocab {shown('vocab')}")


UNVERIFIED = "by name and architecture; weights not verified"


def model_check(entry, data):
    """(kind, words): what the model ours was computed on is, for an entry that needs one (its results record:
    loaded_of), never by its folder's name alone:
      ("", "")                 the entry needs no model;
      ("article", "")          the article's checkpoint: the sha256 of the weight file its loading picks is the one
                               published (part4/paper/article.py's PUBLISHED);
      ("unverified", words)    no published sha256 is known for that file (or another of its weight files was
                               loaded), and its name and architecture are the article's: UNVERIFIED;
      ("stand-in", words)      a stand-in model folder (part4/output/results_files.py's STAND_IN): what it is;
      ("other", words)         anything else: random weights, another architecture, other weights of the article's
                               architecture, or weights not recorded (a results file written before runs recorded them)."""
    if not entry.model:
        return "", ""
    recorded = (data["run"].get("config") or {}).get(entry.flag)
    name, theirs = model_name(recorded), f"article: {entry.model}"
    if (data.get("settings") or {}).get("init") == "random":
        return "other", "random weights (--init random), not the article's pre-trained ones"
    record = loaded_of(entry, data)
    if record is None:
        return "other", (f"ours: {name}, weights not recorded (its results file is older than the record of the weights' "
                         f"sha256 and architecture): not counted as the article's; {theirs}")
    marker = record.get("stand_in")
    if isinstance(marker, dict) and isinstance(marker.get("what"), str):
        what = marker["what"].removeprefix("stand-in: ")
        return "stand-in", f"{what}, in the place of {marker.get('stand_in_for') or entry.model}"
    found = record["architecture"]
    if any(found.get(k) != v for k, v in article.ARCHITECTURE.items()):
        return "other", (f"ours: {name}, {architecture_words(found)}; {theirs}, "
                         f"{architecture_words(article.ARCHITECTURE)}")
    published = article.PUBLISHED[entry.model]
    sha = record["sha256"].get(published.file)
    if published.sha256 and sha == published.sha256:
        return "article", ""
    if published.sha256 and sha is not None:
        return "other", (f"ours: {name}, the article's architecture but weights not verified: its {published.file} has "
                         f"sha256 {str(sha)[:12]}..., the published checkpoint's {published.sha256[:12]}...; {theirs}")
    if same_name(recorded, entry.model):
        return "unverified", UNVERIFIED
    return "other", f"ours: {name}, the article's architecture, weights not verified; {theirs}"


def same_name(recorded, checkpoint):
    """A run recorded the article's checkpoint by name: its Hub id, or a local folder of that name."""
    name = str(recorded or "").split("@")[0].rstrip("/")
    return name == checkpoint or os.path.basename(name) == checkpoint.split("/")[-1]


def model_name(recorded):
    """A model as the report names it: a Hub id as it is, a local folder by its folder's name (the runs record
    'models/all-MiniLM-L6-v2' inside the checkout, 'all-MiniLM-L6-v2@2e8a342051c5' outside it: both 'all-MiniLM-L6-v2')."""
    name = str(recorded or "").split("@")[0].rstrip("/")
    local = "@" in str(recorded) or name.startswith(("models/", ".", "/", "~")) or name.count("/") > 1
    return os.path.basename(name) if local else name


def cut_by(data):
    """The flags that cut the run, in words, or ''."""
    config = data["run"].get("config") or {}
    return ", ".join(f"--{k.replace('_', '-')} {config[k]}" for k in ("max_train_examples", "max_dev_examples", "limit")
                     if config.get(k) is not None)


def split_of(entry, data):
    """Another dev file than the article's, in words, or '': a dev score on another number of questions (examples) than
    the article's with no flag that cut it (the offline evaluation part of ../shared/data; a fine-tune on other data)."""
    n = lookup(data, entry.n[0]) if entry.n else MISSING
    if n is MISSING or n == entry.n[1]:
        return ""
    squad = entry.script == article.SQUAD
    dev_file = dev_file_of(entry, data)
    part = "the offline evaluation part, " if offline_part(entry, data) else ""
    return (f"{part + str(dev_file) + ': ' if dev_file else ''}{n} of the article's {entry.n[1]} dev "
            f"{'questions' if squad else 'examples'}")


def dev_file_of(entry, data):
    squad = entry.script == article.SQUAD
    return (data["run"].get("config") or {}).get(entry.n[0].split("_dev")[0] + "_data" if squad else "data_dir")


def offline_part(entry, data):
    """Was the number scored on the offline evaluation part of a dev set (../shared/data's held-out part, which a
    stand-in mirror's SQuAD models are scored on), not on the dev set itself?"""
    return bool(entry.n) and "offline-eval" in str(dev_file_of(entry, data))


def setting_of(entry, data):
    """The article's fine-tuning setting that this run left, in words, or '': batch 32, 3 epochs, seed 0, and for its
    learning curve its number of dev evaluations."""
    if entry.script != article.FINETUNE:
        return ""
    ran = tuple(data.get(k) for k in ("batch_size", "epochs", "seed"))
    left = [] if ran == article.ARTICLE_RUN else ["batch {}, {} epochs, seed {} (the article's: batch {}, {} epochs, "
                                                  "seed {})".format(*ran, *article.ARTICLE_RUN)]
    evals = (data["run"].get("config") or {}).get("evals")
    if entry.field.startswith("curve.") and evals not in (None, GLUE_RECIPE.evals):
        left.append(f"{evals} dev evaluations (the article's: {GLUE_RECIPE.evals})")
    return "; ".join(left)


def excluded_versions(versions, requirements):
    """The libraries a run used at a version the requirements exclude, in words, or ''."""
    found = []
    for line in requirements.splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):                    # an option line (-r, --index-url) names no version
            need = Requirement(line)
            used = str((versions or {}).get(need.name) or "")
            if used and not need.specifier.contains(used, prereleases=True):
                found.append(f"{need.name} {used}, which requirements.txt excludes ({need.name}{need.specifier})")
    return "; ".join(found)


def printed(number, digits_of):
    """A number rounded as the article printed `digits_of` ('0.9255': 4 decimals; '1.0e-05': 1 decimal, exponent)."""
    if "e" in digits_of:
        return f"{number:.{len(digits_of.split('e')[0].split('.')[-1])}e}"
    decimals = len(digits_of.split(".")[1]) if "." in digits_of else 0
    return f"{number:.{decimals}f}" if "," not in digits_of else f"{round(number):,}"


def flat(value):
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in flat(v)]
    return [value]


def compare(entry, value):
    """(ours as the article prints it, the largest difference in units of the last printed digit) for one entry."""
    theirs = article.numbers_in(entry.value)
    if not theirs:                                               # yes / no
        mine = "yes" if value else "no"
        return mine, 0.0 if mine == entry.value else math.inf
    mine = [float(x) * entry.scale for x in flat(value)]
    if len(mine) != len(theirs):
        return str(value), math.inf
    shown = [printed(m, t) for m, t in zip(mine, theirs)]
    units = [abs(float(s.replace(",", "")) - float(t.replace(",", ""))) / unit(t) for s, t in zip(shown, theirs)]
    return ", ".join(shown), max(units)


def unit(digits):
    """The size of one unit in the last printed digit: '0.9255' -> 0.0001, '1.0e-05' -> 1e-06, '2,307' -> 1."""
    if "e" in digits:
        mantissa, exponent = digits.split("e")
        return 10.0 ** (int(exponent) - (len(mantissa.split(".")[1]) if "." in mantissa else 0))
    return 10.0 ** -len(digits.split(".")[1]) if "." in digits else 1.0


def tolerance(entry, data):
    """(tolerance in units of the last printed digit, its name) of an entry, or (0, '') where it must be the same."""
    if entry.script == article.FINETUNE and entry.field.split(".")[-1] in ("accuracy", "f1"):
        return TOLERANCE["fine-tune"][0] * entry.scale / unit(entry.value), "fine-tune"
    if entry.script == article.FINETUNE and entry.field == "final.dev.correct":          # the same, counted
        return TOLERANCE["fine-tune"][0] * (number_at(data, "final.dev.n") or 0), "fine-tune"
    if entry.n and entry.field.split(".")[-1] in ("em", "f1"):
        return TOLERANCE["dev set"][0] / unit(entry.value), "dev set"
    if entry.model and "." in entry.value and entry.script != article.FINETUNE:
        return TOLERANCE["real model"][0], "real model"
    return 0.0, ""


def known_difference(entry, data):
    """What the project knows of why ours differs, or ''."""
    version = ((data["run"].get("versions") or {}).get("tokenizers")) or data.get("tokenizers")
    if entry.key.startswith("v1.dev.windows") and version and version not in WINDOW_TOKENIZERS:
        return (f"the window count: tokenizers {' and '.join(WINDOW_TOKENIZERS)} (the article's) cut 161 passages' "
                f"windows short; tokenizers {version} covers every passage ({WINDOWS_DOC})")
    return ""


def judge(entry, data, requirements=""):
    """(status, note) of ours against the article's number, by the rules of the module's docstring; `requirements`
    is the text of requirements.txt."""
    value = ours(entry, data)
    if isinstance(value, Unusable) and not value.missing:
        return "unusable", value.why
    status, note = unjudged(entry, data, requirements)
    if status:                         # a row not in the article's setting needs no value of ours to say so
        return status, note + (f"; {value.why}" if isinstance(value, Unusable) else "")
    if isinstance(value, Unusable):
        return "unusable", value.why
    status, note = verdict(entry, data, value)
    kind, words = model_check(entry, data)
    return status, "; ".join(n for n in (note, words if kind == "unverified" else "") if n)


def unjudged(entry, data, requirements):
    """(status, note) of a row that is not judged (shown, cut run, another split, model or setting), or ('', '')."""
    kind, words = model_check(entry, data)
    if kind == "stand-in":             # every number of a stand-in's run that needs a model: shown as its, cut or not
        split = f"on another split too ({split_of(entry, data)})" if offline_part(entry, data) else ""
        also = "; ".join(x for x in (cut_by(data), split) if x) or split_of(entry, data)   # a cut's count: no split
        return "another model", words + (f"; {also}" if also else "")
    model = words if kind == "other" else ""
    if entry.kind in SHOWN:
        return "shown", shown_note(entry, data)
    also = f"; on another model too ({model})" if model else ""      # a cut run or another split says it as well
    if cut_by(data):
        split = f"; on another split too ({split_of(entry, data)})" if offline_part(entry, data) else ""
        return "cut run", cut_by(data) + split + also
    if split_of(entry, data):
        return "another split", split_of(entry, data) + also
    if model:
        return "another model", model
    if excluded_versions(data["run"].get("versions"), requirements):
        return "another setting", excluded_versions(data["run"].get("versions"), requirements)
    if setting_of(entry, data):
        return "another setting", setting_of(entry, data)
    return "", ""


def shown_note(entry, data):
    """Why a number is shown, not judged; a timing says on what ours ran (the article's ran on a GPU)."""
    if entry.kind != "timing":
        return SHOWN[entry.kind]
    device = data["run"].get("device") or "an unrecorded device"
    return f"a timing: ours on {device}, the article's on a GPU; machine and load move it"


def verdict(entry, data, value):
    _, units = compare(entry, value)
    if units == 0:
        return "same", ""
    spread = spread_of(entry)
    if spread and spread[0] <= value <= spread[1]:
        return "within spread", f"the article's own two runs of this job: {spread[0]} and {spread[1]}"
    allowed, name = tolerance(entry, data)
    if name and units <= allowed + 1e-9:
        return "within tolerance", TOLERANCE[name][1]
    return "differs", known_difference(entry, data) or "no known reason"


def spread_of(entry):
    """The article's own spread for an entry's dev accuracy ((low, high)), where it ran that job twice."""
    match = dict(entry.match)
    if entry.field != "final.dev.accuracy":
        return None
    return article.SPREAD.get((match.get("task"), match.get("lr")))


# --- The rows, the summary, the report ---

NOT_THE_ARTICLES = ("another model", "another split", "another setting", "cut run")


def rows(runs, results_dir="results", requirements=""):
    """One row per entry and results file that gives it; an entry no file gives is one row, not run yet. A row not
    in the article's setting carries the command that gives it in that setting."""
    out = []
    for entry in article.ENTRIES:
        if entry.kind == "paper":
            continue
        run, needs = experiments.report_command(entry, results_dir)   # what gives ours, and what it needs
        files = [name for name, data in runs.items() if holds(entry, data)]
        for name in files:
            status, note = judge(entry, runs[name], requirements)
            value = ours(entry, runs[name])
            mine = "" if isinstance(value, Unusable) else compare(entry, value)[0]
            out.append(report_row(entry, mine, status, note, name=name) | {"model": model_check(entry, runs[name])[0]}
                       | ({"command": run, "needs": needs} if status in NOT_THE_ARTICLES else {}))
        if not files:
            why = part_not_run(entry, runs)
            out.append(report_row(entry, "", "not run yet", f"`{run}` (needs {needs})", name=why[0])
                       | {"command": run, "why": why[1]})
    return out


def report_row(entry, mine, status, note, name):
    return {"key": entry.key, "section": entry.where, "what": entry.what, "article": entry.value, "ours": mine,
            "difference": difference(entry, mine), "status": status, "note": note, "file": name}


def recorded_not_run(data):
    """{block: why} of the parts a command could not run (the math script's run.not_run: a model refused), {} else."""
    not_run = data.get("not_run")
    return not_run if isinstance(not_run, dict) else {}


def part_not_run(entry, runs):
    """(results file, why) of a file of the entry's script that says the part giving it could not run, or ('', '')."""
    blocks = {path.split(".")[0] for path in field_paths(entry.field)} if entry.script else set()
    for name, data in runs.items():
        said = recorded_not_run(data) if script_of(data) == entry.script else {}
        for block in sorted(blocks & set(said)):
            return name, f"not run in {name}: {said[block]}"
    return "", ""


def difference(entry, mine):
    """ours - article for a single number ('+0.0012'), '' where either is not one number."""
    theirs, shown = article.numbers_in(entry.value), article.numbers_in(mine)
    if len(theirs) != 1 or len(shown) != 1:
        return ""
    d = float(shown[0].replace(",", "")) - float(theirs[0].replace(",", ""))
    return printed(d, theirs[0]) if d < 0 else "+" + printed(d, theirs[0])


REPRODUCED = ("same", "within spread", "within tolerance")
UNJUDGED = ("unusable", "another model", "another split", "another setting", "cut run", "shown", "not run yet")
ORDER = ("reproduced", "differs") + UNJUDGED
RULE = ("A number with several rows (several runs give it) counts once: differs if any judged row differs, else "
        "reproduced if any judged row is the same or within the spread or a tolerance, else the first of: "
        f"{', '.join(UNJUDGED)}. Unusable: the results file holds no number where ours should be (a warning names the file "
        "and the field). Another model: the model a run loaded is not shown to be the article's checkpoint, judged by "
        "what its results file records (never by a folder's name alone): the article's when the sha256 of its weight "
        "file is the published one; where none is published, when its name and architecture are the article's (said: "
        f"{UNVERIFIED}); else another model (another architecture, other or random weights, a stand-in, or a results "
        "file that does not record its weights). Another setting: a library version requirements.txt excludes, or a "
        "fine-tune's batch size, epochs, seed or dev evaluations not the article's. A count of the data or the recipe "
        "needs no model and is judged whatever model ran.")


def entry_status(statuses):
    """One status for an entry from all its rows (the module's docstring): differs if any judged row differs, else
    reproduced if any is, else the first of UNJUDGED its rows show."""
    if "differs" in statuses:
        return "differs"
    if any(s in REPRODUCED for s in statuses):
        return "reproduced"
    return next(s for s in UNJUDGED if s in statuses)


SHOWN = {"timing": "a timing: machine and load move it", "noise": "float rounding noise of a check",
         "random-head": "from the article's own random head, not expected to match"}


def counted(table):
    """{entry key: its one status}, from all its rows."""
    by_entry = {}
    for r in table:
        by_entry.setdefault(r["key"], []).append(r["status"])
    return {key: entry_status(statuses) for key, statuses in by_entry.items()}


UNVERIFIED_COUNT = "on its checkpoints by name and architecture, weights not verified"


def status_summary(table, subject=None):
    """The counts of the entries' statuses (reproduced also split by whether the number needs a model), and the
    summary line; `subject` opens it (default: 'Of the article's N numbers')."""
    status = counted(table)
    counts = {s: sum(v == s for v in status.values()) for s in ORDER}
    no_model = sum(v == "reproduced" and not article.NUMBERS[k].model for k, v in status.items())
    verified = {r["key"] for r in table if r["status"] in REPRODUCED and r.get("model") == "article"}
    on_article = sum(v == "reproduced" and k in verified for k, v in status.items())
    unverified = counts["reproduced"] - no_model - on_article
    split = {"need no model": no_model, "on the article's models": on_article, UNVERIFIED_COUNT: unverified}
    subject = subject or f"Of the article's {len(status)} numbers"
    split_too = {r["key"] for r in table if r["status"] == "another model" and "on another split too" in r["note"]}
    split_too = sum(v == "another model" and k in split_too for k, v in status.items())   # a stand-in's SQuAD rows
    line = (f"{subject}: reproduced {counts['reproduced']} ({no_model} need no model, {on_article} on the article's "
            f"models, {unverified} {UNVERIFIED_COUNT}); "
            f"{counts['differs']} {'differs' if counts['differs'] == 1 else 'differ'}; {counts['another model']} on another "
            f"model{f' ({split_too} of them on another split too)' if split_too else ''}; {counts['another split']} on "
            f"another split; {counts['another setting']} under another setting; {counts['cut run']} only from cut "
            f"runs; {counts['unusable']} unusable (no number in their results file); {counts['shown']} shown, not "
            f"judged (timings, random-head numbers, rounding noise); {counts['not run yet']} not run yet")
    return counts, split, line


def cell(text):
    """A Markdown table cell: its `|` escaped, so that it stays one cell."""
    return str(text).replace("|", "\\|")


def table_row(cells):
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def report_markdown(table, line, plots, notes=()):
    out = ["# The article's numbers, reproduced", "",
           "Generated by `python bert_part4_report.py` from the results files in this folder; do not edit by hand. "
           "The article's numbers are in `part4/paper/article.py`; the statuses' rules are in `bert_part4_report.py`.", "",
           f"**{line}**", "", RULE, ""] + [f"{n}\n" for n in notes] + by_section(table) + to_run(table)
    for section in dict.fromkeys(r["section"] for r in table):
        out += [f"## {section}", ""] + [f"Plot: [{p}]({p})" for p in plots.get(section, [])]
        out += [table_row(("What", "Article", "Ours", "Difference", "Status", "Results file")), "|---" * 6 + "|"]
        for r in (r for r in table if r["section"] == section):
            note = "; ".join(n for n in (r.get("why"), f"`{r['command']}`") if n) if r["status"] == "not run yet" \
                else r["note"]                                                           # its needs: listed on top
            status = shown_status(r) + (f": {note}" if note else "")
            out.append(table_row((r["what"], r["article"], r["ours"], r["difference"], status, r["file"])))
        out.append("")
    return "\n".join(out + quoted())


def shown_status(r):
    """A row's status as the report prints it: a stand-in's run says so ('another model (stand-in)')."""
    return r["status"] + (" (stand-in)" if r["status"] == "another model" and r.get("model") == "stand-in" else "")


def by_section(table):
    """The summary, one line a section: how many of its numbers reached each status."""
    status, out = counted(table), [table_row(("Section",) + ORDER), "|---" * (len(ORDER) + 1) + "|"]
    for section in dict.fromkeys(r["section"] for r in table):
        keys = dict.fromkeys(r["key"] for r in table if r["section"] == section)
        out.append(table_row((section,) + tuple(sum(status[k] == s for k in keys) for s in ORDER)))
    return out + [""]


def to_run(table):
    """The commands that give the numbers not run yet, then those that give in the article's setting the numbers
    shown on another model, split or setting, each once, with what it needs."""
    missing = dict.fromkeys(r["note"] for r in table if r["status"] == "not run yet")
    other = dict.fromkeys(f"`{r['command']}` (needs {r['needs']})" for r in table if r["status"] in NOT_THE_ARTICLES)
    out = []
    if missing:
        out += ["Not run yet here; the commands that give those numbers:", ""] + [f"- {c}" for c in missing] + [""]
    if other:
        out += ["Shown here on another model, split or setting; the commands that give them in the article's setting "
                "(its checkpoints and data):", ""] + [f"- {c}" for c in other] + [""]
    return out + ([OFFLINE, ""] if out else [])


def quoted():
    """The paper's and the model pages' numbers the article quotes: the reference, nothing to re-run."""
    out = ["## Quoted from the paper and the checkpoints' model pages (the reference: nothing to re-run)", "",
           "| What | Article | Where |", "|---|---|---|"]
    return out + [table_row((e.what, e.value, e.where)) for e in article.ENTRIES if e.kind == "paper"] + [""]


def models_note(runs):
    """One line naming the fingerprints of the local models the runs recorded from outside the checkout, or none."""
    flags = {e.flag for e in article.ENTRIES if e.flag}
    marked = sorted({str(v) for data in runs.values() for k, v in (data["run"].get("config") or {}).items()
                     if k in flags and "@" in str(v)})
    if not marked:
        return []
    return [f"A local model is named by its folder's name; a folder outside the checkout is recorded with a fingerprint "
            f"of its config and weights: {', '.join(marked)}."]


def checkpoints_note():
    """One line naming the article's checkpoints as the report knows them: the sha256 of each one's weight file."""
    known = [f"{name}'s {p.file} {p.sha256[:12]}..." if p.sha256 else f"{name}'s {p.file}: no published sha256 found "
             f"(judged by name and architecture)" for name, p in article.PUBLISHED.items()]
    return [f"The article's checkpoints are known by the sha256 of the weight file their loading picks "
            f"(part4/paper/article.py, with where each is published): {'; '.join(known)}."]


def plots_by_section(results_dir):
    """{article section: the plots the scripts drew for it in results_dir}."""
    found = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "**", "*.png"), recursive=True)):
        name = os.path.relpath(path, results_dir).replace(os.sep, "/")
        keys = [key for start, end, key in PLOTS if os.path.basename(name).startswith(start) and name.endswith(end)]
        if keys:
            found.setdefault(article.NUMBERS[keys[0]].where, []).append(name)
    return found


def read_requirements(path=REQUIREMENTS):
    """The text of requirements.txt ('' where the checkout has none: then no version is excluded)."""
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()


def warn_unusable(table, folder):
    """One warning line for each results file and field that holds no number where ours should be (its rows are
    marked unusable); folder: the folder the rows' file names are in, as given ('' for a file given alone)."""
    for name, why in dict.fromkeys((r["file"], r["note"]) for r in table if r["status"] == "unusable"):
        say_error(f"warning: {os.path.join(folder, name)}: {why}; its rows are marked unusable")


def one_run(path, requirements):
    """The article's lines beside one results file's, in the report's order (article, then ours): printed, nothing
    written. The file is checked as a folder's files are."""
    if os.path.isdir(path):
        raise Fatal(f"{path}: a folder, not a results file (for every run in a folder: --results-dir {path})")
    data = read_results(path)
    if data is None:
        raise Fatal(f"{path}: no such file")
    if run_problem(data, path):
        raise Fatal(run_problem(data, path))
    table = [r for r in rows({path: data}, os.path.dirname(path) or ".", requirements) if r["file"]]
    warn_unusable(table, "")
    if not table:
        print(f"{path}: the article prints no number for this run ({script_of(data)}); it fine-tuned SST-2 at "
              f"lr 2e-5 and MRPC at 5e-5, 4e-5, 3e-5 and 2e-5")
    for r in table:
        print(f"{r['what']}: article {r['article']}   ours {r['ours']}   {shown_status(r)}"
              + (f" ({r['note']})" if r["note"] else ""))
    if table:
        print(status_summary(table, f"This run, {len(counted(table))} of the article's numbers")[2])
    return 0


NO_RESULTS = f"no results files found (the scripts write {RESULTS_NAME} into their --results-dir): every number is not run yet"
NO_RESULTS_NOTE = NO_RESULTS[0].upper() + NO_RESULTS[1:] + "."      # the same, as a note of the report


def checked_runs(results_dir):
    """The runs in a results folder, each checked whole: a folder that is not one, or a results file there that cannot
    be read as a run, stops the report with one line naming it (every such file at once); nothing is dropped."""
    if not os.path.isdir(results_dir):
        raise Fatal(f"--results-dir {results_dir}: {'not a directory' if os.path.exists(results_dir) else 'no such directory'}")
    check_writable_dir(results_dir, "--results-dir")
    runs, problems = read_runs(results_dir)
    if problems:
        count = f"{len(problems)} results files cannot be read as runs: " if len(problems) > 1 else ""
        raise Fatal(count + "; ".join(problems) + "; no report written")
    return runs


if __name__ == "__main__":
    sys.exit(not_a_script("part4/reproduction/report.py", "python bert_part4_report.py (--help)"))
