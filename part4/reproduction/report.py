"""The report (bert_part4_report.py) as it is written: the summary line (each number counted once, by the rule of
part4/reproduction/statuses.py), REPRODUCTION.md (the rule, the notes, a line a section, the commands that give what
is not run yet or not in the article's setting, each section's rows with its plots, the quoted numbers), the warnings
for the unusable rows, and one run's lines beside the article's. No torch here: the report reads JSON."""

import glob
import os

from part4.command_line.declarations import Fatal, say_error
from part4.output.results_files import portable, read_results
from part4.paper import article
from part4.reproduction.our_numbers import RESULTS_NAME, run_problem, script_of
from part4.reproduction.statuses import NOT_THE_ARTICLES, ORDER, REPRODUCED, UNJUDGED, UNVERIFIED, counted, offline_part, rows

# The plots the scripts draw: (how the file name starts, how it ends, an entry of the section it belongs to).
PLOTS = (("part4_squad_tau_sweep", ".png", "v2.dev.tau"), ("part4_math_attention", ".png", "flow.born"),
         ("part4_math_span_heatmap", ".png", "gold.0.score"), ("part4_sst2_", "_curve.png", "sst2.steps"),
         ("part4_mrpc_", "_curve.png", "mrpc.lr5e-05.accuracy"))
OFFLINE = ("Without the Hub: every model flag takes a local folder (`--model DIR`, `--v1-model DIR`, ...), and the "
           "data flags take the files of `../shared/data`, the data folder beside the checkout (docs/offline.md).")
NO_RESULTS = f"no results files found (the scripts write {RESULTS_NAME} into their --results-dir): every number is not run yet"
# The rules of part4/reproduction/statuses.py's docstring, as the report prints them under its summary.
RULE = ("A number with several rows (several runs give it) counts once: differs if any judged row differs, else "
        "reproduced if any judged row is the same or within the spread or a tolerance, else the first of: "
        f"{', '.join(UNJUDGED)}. Unusable: the results file holds no number where ours should be (a warning names the file "
        "and the field). Another model: the model a run loaded is not shown to be the article's checkpoint, judged by "
        "what its results file records (never by a folder's name alone): the article's when the sha256 of its weight "
        "file is the published one; where none is published, when its name and architecture are the article's (said: "
        f"{UNVERIFIED}); else another model (another architecture, other or random weights, a stand-in, or a results "
        "file that does not record its weights). Another setting: a library version requirements.txt excludes, or a "
        "fine-tune's batch size, epochs, seed, input length, warmup, weight decay, clipping, output layer (a new one) "
        "or dev evaluations not the article's. A count of the data or the recipe "
        "needs no model and is judged whatever model ran.")
UNVERIFIED_COUNT = "on its checkpoints by name and architecture, weights not verified"


def status_summary(table, runs, subject=None):
    """The counts of the entries' statuses (reproduced also split by whether the number needs a model), and the
    summary line; runs: the results files the rows name; `subject` opens the line (default: 'Of the article's N
    numbers')."""
    status = counted(table)
    counts = {s: sum(v == s for v in status.values()) for s in ORDER}
    no_model = sum(v == "reproduced" and not article.NUMBERS[k].model for k, v in status.items())
    verified = {r["key"] for r in table if r["status"] in REPRODUCED and r.get("model") == "article"}
    on_article = sum(v == "reproduced" and k in verified for k, v in status.items())
    unverified = counts["reproduced"] - no_model - on_article
    split = {"need no model": no_model, "on the article's models": on_article, UNVERIFIED_COUNT: unverified}
    subject = subject or f"Of the article's {len(status)} numbers"
    # a stand-in's numbers scored on the offline evaluation part of a dev set (its SQuAD rows): another split too
    split_too = {r["key"] for r in table if r["status"] == "another model" and r.get("model") == "stand-in"
                 and offline_part(article.NUMBERS[r["key"]], runs[r["file"]])}
    split_too = sum(v == "another model" and k in split_too for k, v in status.items())
    line = (f"{subject}: reproduced {counts['reproduced']} ({no_model} need no model, {on_article} on the article's "
            f"models, {unverified} {UNVERIFIED_COUNT}); "
            f"{counts['differs']} {'differs' if counts['differs'] == 1 else 'differ'}; {counts['another model']} on another "
            f"model{f' ({split_too} of them on another split too)' if split_too else ''}; {counts['another split']} on "
            f"another split; {counts['another setting']} under another setting; {counts['cut run']} only from cut "
            f"runs; {counts['unusable']} unusable (no number in their results file); {counts['shown']} shown, not "
            f"judged (timings, random-head numbers, rounding noise); {counts['not run yet']} not run yet")
    return counts, split, line


def table_row(cells):
    """A row of a Markdown table, each cell's `|` escaped, so that it stays one cell."""
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def report_markdown(table, line, plots, notes=(), results_dir="results"):
    """REPRODUCTION.md of the results folder results_dir, whose header names the command that writes it again (with
    --results-dir where it is not results/: a stand-in's report is regenerated from its own folder)."""
    again = "python bert_part4_report.py" + ("" if os.path.normpath(results_dir) == "results" else
                                             f" --results-dir {portable(results_dir)}")
    out = ["# The article's numbers, reproduced", "",
           f"Generated by `{again}` from the results files in this folder; do not edit by hand. "
           "The article's numbers are in `part4/paper/article.py`; the statuses' rules are in "
           "`part4/reproduction/statuses.py`.", "",
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
    out += ["## Quoted from the paper and the checkpoints' model pages (the reference: nothing to re-run)", "",
            "| What | Article | Where |", "|---|---|---|"]
    out += [table_row((e.what, e.value, e.where)) for e in article.ENTRIES if e.kind == "paper"] + [""]
    return "\n".join(out)


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


def report_notes(runs):
    """The report's notes: the article's checkpoints as it knows them (the sha256 of each one's weight file), the
    fingerprints of the local models the runs recorded from outside the checkout, and no results found."""
    known = [f"{name}'s {p.file} {p.sha256[:12]}..." if p.sha256 else f"{name}'s {p.file}: no published sha256 found "
             f"(judged by name and architecture)" for name, p in article.PUBLISHED.items()]
    out = [f"The article's checkpoints are known by the sha256 of the weight file their loading picks "
           f"(part4/paper/article.py, with where each is published): {'; '.join(known)}."]
    flags = {e.flag for e in article.ENTRIES if e.flag}
    marked = sorted({str(v) for data in runs.values() for k, v in (data["run"].get("config") or {}).items()
                     if k in flags and "@" in str(v)})
    if marked:
        out.append(f"A local model is named by its folder's name; a folder outside the checkout is recorded with a "
                   f"fingerprint of its config and weights: {', '.join(marked)}.")
    if not runs:
        out.append(NO_RESULTS[0].upper() + NO_RESULTS[1:] + ".")
    return out


def plots_by_section(results_dir):
    """{article section: the plots the scripts drew for it in results_dir}."""
    found = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "**", "*.png"), recursive=True)):
        name = os.path.relpath(path, results_dir).replace(os.sep, "/")
        keys = [key for start, end, key in PLOTS if os.path.basename(name).startswith(start) and name.endswith(end)]
        if keys:
            found.setdefault(article.NUMBERS[keys[0]].where, []).append(name)
    return found


def warn_unusable(table, folder):
    """One warning line for each results file and field that holds no number where ours should be (its rows are
    marked unusable); folder: the folder the rows' file names are in, as given ('' for a file given alone)."""
    for name, why in dict.fromkeys((r["file"], r["note"]) for r in table if r["status"] == "unusable"):
        say_error(f"warning: {os.path.join(folder, name)}: {why}; its rows are marked unusable")


def one_run(path, requirements):
    """The article's lines beside one results file's, in the report's order (article, then ours): printed, nothing
    written. The file is checked as a folder's files are."""
    from part4.data.readers import GLUE  # GLUE's task names, for one line: imported here, not with the report
    if os.path.isdir(path):
        raise Fatal(f"{path}: a folder, not a results file (for every run in a folder: --results-dir {path})")
    if path.endswith(".log") and os.path.isfile(path[:-4] + ".json"):      # its log given for its results
        raise Fatal(f"{path}: a run's log, not its results file: give {path[:-4]}.json")
    data = read_results(path)
    if data is None:
        raise Fatal(f"{path}: no such file")
    problem = run_problem(data, path)
    if problem:
        raise Fatal(problem)
    table = [r for r in rows({path: data}, os.path.dirname(path) or ".", requirements) if r["file"]]
    warn_unusable(table, "")
    if not table:
        print(f"{path}: the article prints no number for this run ({script_of(data)}); it fine-tuned "
              f"{article.article_runs({t: GLUE[t].folder for t in GLUE})}")
    for r in table:
        print(f"{r['what']}: article {r['article']}   ours {r['ours']}   {shown_status(r)}"
              + (f" ({r['note']})" if r["note"] else ""))
    if table:
        print(status_summary(table, {path: data}, f"This run, {len(counted(table))} of the article's numbers")[2])
    return 0
