"""The report's rules (bert_part4_report.py): every number the article prints beside ours, with a status for each,
one row per results file that gives it. The article's numbers come from part4/paper/article.py; ours from the results
JSON the scripts wrote (part4/reproduction/our_numbers.py). The statuses and the rules that decide them:
  same             ours, rounded to the digits the article prints, equals the article's number;
  within spread    a fine-tune's dev score inside the article's own spread (MRPC 2e-5 and its repeat);
  within tolerance inside a stated tolerance, with its reason (TOLERANCE below);
  differs          neither; with what the project knows of why, where it knows (known_difference);
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
  cut run          our run saw part of the data (--max-train-examples, --max-dev-examples): shown, not judged
                   (a cut run or another split on another model says that too);
  shown            timings, numbers of the article's random heads and rounding noise: shown, never judged;
  unusable         the results file holds no number where ours should be (a string, null, NaN, infinity, a count that
                   is not whole; or nothing, where a run in the article's setting holds it): a warning names the file
                   and the field;
  not run yet      no results file gives ours, whatever its kind: the command that does, and what it needs (and
                   why, where a results file says its part could not run: the math script with a model refused).
A number with several rows (several runs give it) counts once: "differs" if any judged row differs (a run the
project stands behind that disagrees is not hidden by one that agrees), else "reproduced" if any judged row is
the same or within the spread or a tolerance, else the first of UNJUDGED its rows show. "Reproduced" splits into
the numbers that need no model (toy arithmetic, counts of the data and the recipe, arithmetic on quoted tables),
those of a model reproduced on the article's own checkpoint (its weights' sha256), and those reproduced on a
checkpoint known by name and architecture only (no published sha256).
"""

import math
import os

from packaging.requirements import Requirement

from part4.paper import article
from part4.paper.recipe import CLIP, GLUE_RECIPE, RECIPES, WARMUP, WEIGHT_DECAY
from part4.reproduction import experiments
from part4.reproduction.our_numbers import MISSING, Unusable, finite, flat, holds, lookup, ours, part_not_run

# The tolerances, each with its reason. A fine-tune's dev score: the article's own repeat of one job moved it by
# the width of its spread (GPU arithmetic is not bit-for-bit repeatable; seeds and hardware move it), taken from its
# counts (340 and 334 of 408: 6 / 408), not from the accuracies as printed (0.8333 - 0.8186 = 0.0147, 5.9976 of 408,
# would put the article's own repeat outside it)
_SPREAD = [int(article.value(f"mrpc.{run}.correct")) for run in ("lr2e-05", "repeat")]
_WIDTH = abs(_SPREAD[0] - _SPREAD[1]) / int(article.value("mrpc.lr2e-05.n"))
_ONE_LOGIT = [article.numbers_in(article.value(k))[-1] for k in ("sst2.1.CW", "sst2.1.logits")]
TOLERANCE = {
    "fine-tune": (_WIDTH, f"a fine-tune's dev score moves with seeds and hardware: the article's own repeat of MRPC "
                          f"2e-5 moved it by {_WIDTH:.4f}"),
    "dev set": (0.1, "a fixed checkpoint scored in another precision (bf16 on CUDA, fp16 on MPS, fp32 on the CPU) "
                     "flips a few answers: 0.1 points"),
    "real model": (1.0, f"one unit of the last printed digit: float rounding on another device (the article itself "
                        f"prints one logit as {_ONE_LOGIT[0]} and as {_ONE_LOGIT[1]})"),
}
WINDOWS_DOC = "docs/squad-evaluation.md#the-window-count"
WINDOW_TOKENIZERS = ("0.23.1", "0.23.2")     # the tokenizers that give the article's 10,753 windows
REQUIREMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "requirements.txt")     # the checkout's


def read_requirements(path=REQUIREMENTS):
    """The text of requirements.txt ('' where the checkout has none: then no version is excluded)."""
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()


# --- The model ours ran on, judged by what it is: its weights' sha256, its architecture ---

def loaded_of(entry, data):
    """The record of the model ours was computed on (part4/models/loading.py's loaded_record), or None where the file
    holds none: the heads' and a fine-tune's `weights`, the SQuAD script's `models` by part (v1, v2), the math
    script's by flag (--sst2-model)."""
    if entry.script in (article.HEADS, article.FINETUNE):
        record = data.get("weights")
    else:
        part = entry.flag.split("_")[0] if entry.script == article.SQUAD else "--" + entry.flag.replace("_", "-")
        record = (data.get("models") or {}).get(part) if isinstance(data.get("models"), dict) else None
    ok = isinstance(record, dict) and isinstance(record.get("sha256"), dict) and isinstance(record.get("architecture"),
                                                                                           dict)
    return record if ok else None


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
    by_name = str(recorded or "").split("@")[0].rstrip("/")       # its Hub id, or a local folder of that name
    if by_name == entry.model or os.path.basename(by_name) == entry.model.split("/")[-1]:
        return "unverified", UNVERIFIED
    return "other", f"ours: {name}, the article's architecture, weights not verified; {theirs}"


def model_name(recorded):
    """A model as the report names it: a Hub id as it is, a local folder by its folder's name (the runs record
    'models/all-MiniLM-L6-v2' inside the checkout, 'all-MiniLM-L6-v2@2e8a342051c5' outside it: both 'all-MiniLM-L6-v2')."""
    name = str(recorded or "").split("@")[0].rstrip("/")
    local = "@" in str(recorded) or name.startswith(("models/", ".", "/", "~")) or name.count("/") > 1
    return os.path.basename(name) if local else name


# --- Not the article's setting: a cut run, another split, another setting ---

def cut_by(data):
    """The flags that cut the run, in words, or '' (limit: what the results of earlier versions call max_dev_examples,
    shown as the flag that run was given, --limit)."""
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
    """The article's fine-tuning setting that this run left, in words, or '': batch 32, 3 epochs, seed 0; the recipe's
    input length, warmup, weight decay and clipping, and a new output layer; for its learning curve its number of dev
    evaluations."""
    if entry.script != article.FINETUNE:
        return ""
    ran = tuple(data.get(k) for k in ("batch_size", "epochs", "seed"))
    left = [] if ran == article.ARTICLE_RUN else ["batch {}, {} epochs, seed {} (the article's: batch {}, {} epochs, "
                                                  "seed {})".format(*ran, *article.ARTICLE_RUN)]
    recorded, recipe = data.get("settings") or {}, RECIPES.get(data.get("task"), GLUE_RECIPE)
    paper = {"max_len": recipe.max_len, "warmup": WARMUP, "weight_decay": WEIGHT_DECAY, "clip": CLIP}
    left += [f"{k} {recorded[k]} (the article's: {v})" for k, v in paper.items() if k in recorded and recorded[k] != v]
    if recorded.get("head", "new") != "new":
        left.append(f"head {recorded['head']} (the article's: a new output layer)")
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


# --- Judged: ours against the article's number at the digits it prints ---

def printed(number, digits_of):
    """A number rounded as the article printed `digits_of` ('0.9255': 4 decimals; '1.0e-05': 1 decimal, exponent)."""
    if "e" in digits_of:
        return f"{number:.{len(digits_of.split('e')[0].split('.')[-1])}e}"
    decimals = len(digits_of.split(".")[1]) if "." in digits_of else 0
    return f"{number:.{decimals}f}" if "," not in digits_of else f"{round(number):,}"


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
        n = lookup(data, "final.dev.n")
        n = n if isinstance(n, (int, float)) and not isinstance(n, bool) and finite(n) else 0
        return TOLERANCE["fine-tune"][0] * n, "fine-tune"
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


def precision_of(data):
    """'bf16' or 'fp16' where a results file records that its numbers were computed so (a fine-tune's settings, the
    SQuAD script's config, the heads' and math's dtype), '' for fp32 or a file that records none. Such a number is
    judged as any other (a fine-tune's within the article's own spread, a fixed checkpoint's within the dev-set
    tolerance); its row says its precision."""
    recorded = [(data.get("settings") or {}).get("dtype"), (data.get("config") or {}).get("dtype"), data.get("dtype")]
    return next((d for d in recorded if d in ("bf16", "fp16")), "")


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


SHOWN = {"timing": "a timing: machine and load move it", "noise": "float rounding noise of a check",
         "random-head": "from the article's own random head, not expected to match"}


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


# --- The rows: each number beside ours in every file that gives it, and its one status ---

NOT_THE_ARTICLES = ("another model", "another split", "another setting", "cut run")


def rows(runs, results_dir="results", requirements=""):
    """One row per entry and results file that gives it; an entry no file gives is one row, not run yet, with the
    command that gives it into results_dir. A row not in the article's setting carries the command that gives it in
    that setting: the article's, its results in results/ (never the folder reported on: a stand-in's runs are not the
    article's)."""
    out = []
    for entry in article.ENTRIES:
        if entry.kind == "paper":
            continue
        run, needs = experiments.report_command(entry, results_dir)   # what gives ours here, and what it needs
        articles, _ = experiments.report_command(entry)                # ... and in the article's setting
        files = [name for name, data in runs.items() if holds(entry, data)]
        for name in files:
            status, note = judge(entry, runs[name], requirements)
            precision = precision_of(runs[name]) if entry.model else ""        # a number computed in bf16 says so
            note = "; ".join(n for n in (note, precision and f"computed in {precision} (--dtype {precision})") if n)
            value = ours(entry, runs[name])
            mine = "" if isinstance(value, Unusable) else compare(entry, value)[0]
            out.append(report_row(entry, mine, status, note, name=name) | {"model": model_check(entry, runs[name])[0]}
                       | ({"command": articles, "needs": needs} if status in NOT_THE_ARTICLES else {}))
        if not files:
            why = part_not_run(entry, runs)
            out.append(report_row(entry, "", "not run yet", f"`{run}` (needs {needs})", name=why[0])
                       | {"command": run, "why": why[1]})
    return out


def report_row(entry, mine, status, note, name):
    return {"key": entry.key, "section": entry.where, "what": entry.what, "article": entry.value, "ours": mine,
            "difference": difference(entry, mine), "status": status, "note": note, "file": name}


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


def entry_status(statuses):
    """One status for an entry from all its rows (the module's docstring): differs if any judged row differs, else
    reproduced if any is, else the first of UNJUDGED its rows show."""
    if "differs" in statuses:
        return "differs"
    if any(s in REPRODUCED for s in statuses):
        return "reproduced"
    return next(s for s in UNJUDGED if s in statuses)


def counted(table):
    """{entry key: its one status}, from all its rows."""
    by_entry = {}
    for r in table:
        by_entry.setdefault(r["key"], []).append(r["status"])
    return {key: entry_status(statuses) for key, statuses in by_entry.items()}
