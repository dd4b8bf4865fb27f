"""What a reader comparing with the article, or a newcomer, meets on every route: the article's numbers
beside ours, help that states every default, results that can be written, portable paths, honest plots."""

import json
import os
import re
import sys
import tempfile

import numpy as np
import pytest
from conftest import ROOT, SHARED_DATA, needs_shared_data, save_tiny
from test_finetune import write_sst2

import bert_part4_finetune as ft
import bert_part4_heads as heads
import bert_part4_math as bm
import bert_part4_squad as sq
from part4.command_line import fine_tune_settings, script_settings
from part4.data import readers
from part4.models.loading import run_cli
from part4.output import results_files as output
from part4.output.results_files import Log, command_line, portable
from part4.paper import article, recipe
from part4.tasks import squad_spans

SCRIPTS = {"heads": heads, "finetune": ft, "squad": sq, "math": bm}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_help_states_every_default(name):
    """Every flag defaults to None in its parser (a flag not given is told from one given): its default is its
    declaration's (part4/command_line/declarations.py's setting), the recipe's where the declaration says so."""
    parser = getattr(fine_tune_settings if name == "finetune" else script_settings, f"{name}_parser")()
    for action in parser._actions:
        f = getattr(action, "declaration", None)
        words = {} if f is None or not isinstance(f.metadata["choices"], dict) else f.metadata["choices"]
        default = action.default if f is None else "the recipe's" if f.metadata["recipe"] else \
            next((word for word, v in words.items() if v == f.default), f.default)      # a word for the value it stands for
        if action.dest == "help" or default is None or default is False or default == ():
            continue
        assert "default" in (action.help or "").lower(), f"{name} {action.option_strings}: {action.help}"


@pytest.mark.parametrize("name, argv", [
    ("heads", ["--model", "/nonexistent/model"]),
    ("finetune", ["sst2", "--model", "/nonexistent/model"]),
    ("squad", ["--v1-model", "/nonexistent/model"]),
    ("math", ["--sst2-model", "/nonexistent/model"]),
])
def test_a_results_dir_below_a_file_fails_first_in_one_line(name, argv, tmp_path, capsys):
    (tmp_path / "plain_file").write_text("x")
    target = tmp_path / "plain_file" / "results"
    assert run_cli(SCRIPTS[name].main, argv + ["--results-dir", str(target), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: --results-dir {target}: cannot be a folder, because {tmp_path / 'plain_file'} is a file"


def test_an_unwritable_results_dir_is_caught_before_any_work(tmp_path, monkeypatch, capsys):
    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    assert run_cli(heads.main, ["--model", "/nonexistent", "--results-dir", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.strip().endswith("cannot write there (Permission denied)")
    assert not (tmp_path / "r").exists()


def test_missing_matplotlib_is_said_once(monkeypatch, capsys):
    import builtins
    real = builtins.__import__

    def no_matplotlib(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    monkeypatch.setattr(output, "_PLOT_NOTICE", [])
    assert output.pyplot() is None and output.pyplot() is None
    err = capsys.readouterr().err.splitlines()
    assert err == ["plots skipped: matplotlib is not installed (pip install matplotlib to get them)"]


# --- results carry no path that only exists on the machine that made them ---

def test_paths_are_recorded_relative_or_by_name_and_fingerprint(tmp_path, monkeypatch):
    model = save_tiny(str(tmp_path / "outside" / "my-model"))
    inside = tmp_path / "work"
    (inside / "data").mkdir(parents=True)
    (inside / "data" / "x.json").write_text("{}")
    monkeypatch.chdir(inside)
    assert portable(str(inside / "data" / "x.json")) == os.path.join("data", "x.json")
    printed = portable(model)
    assert re.fullmatch(r"my-model@[0-9a-f]{12}", printed)
    with open(os.path.join(model, "config.json"), "a") as f:
        f.write("\n")
    assert portable(model) != printed                        # another config, another fingerprint
    assert portable("bert-base-uncased") == "bert-base-uncased"
    assert portable(str(tmp_path / "outside")) == os.path.join("..", "outside")     # beside: a plain folder
    report = Log("x", str(inside / "results"))
    args = type("A", (), {})()
    args.model, args.n = model, 3
    report.save({}, cli=command_line(["--model", model], vars(args)))
    saved = (inside / "results" / "x.json").read_text()
    assert str(tmp_path) not in saved and json.loads(saved)["run"]["config"]["model"].startswith("my-model@")


def strings(obj):
    """Every string inside a JSON value."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def results_files():
    """The JSON and log files under results/, as a commit would take them: not the temporary files and folders
    (.tmp-*) that a run writing there right now fills and then renames into place, and not a file that such a run
    replaces or removes between the listing and the reading."""
    for folder, dirs, files in os.walk(os.path.join(ROOT, "results")):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.startswith(".") or not name.endswith((".json", ".log")):
                continue
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    yield os.path.relpath(os.path.join(folder, name), ROOT), f.read()
            except FileNotFoundError:
                continue


def test_committed_results_hold_no_absolute_paths():
    """No JSON string is an absolute path, and no log names this machine's Python, temp or home folders."""
    machine = [sys.prefix, tempfile.gettempdir(), os.path.expanduser("~"), os.path.dirname(ROOT)]
    checked = 0
    for name, text in results_files():
        if name.endswith(".json"):
            assert not [s for s in strings(json.loads(text)) if os.path.isabs(s)], name
        assert not [m for m in machine if m + os.sep in text], name
        checked += 1
    assert checked                           # results/ holds the committed runs' JSON and logs


# --- fine-tuning: the article's column, its spread, the baseline, the grid's size ---

def test_the_article_final_line_and_its_repeat():
    assert article.article_final("mrpc", 2e-5) == (
        "   [article (bert-base-uncased, batch 32, 3 epochs, seed 0): 0.8333 (340/408), "
        "F1 0.8847; the same job run before the grid: 0.8186 (334/408), F1 0.8741]")
    assert "0.8701 (355/408)" in article.article_final("mrpc", 5e-5) and article.article_final("rte", 2e-5) == ""
    assert recipe.grid_description("a3", 32, 3) == ("grid a3 (paper A.3): batch {16, 32} x lr {5e-5, 3e-5, 2e-5} x epochs "
                                                    "{2, 3, 4} = 2 x 3 x 3 = 18 runs")
    assert recipe.grid_description("glue", 32, 3) == "grid glue (paper §4.1): lr {5e-5, 4e-5, 3e-5, 2e-5} = 4 runs"


def test_before_line_has_the_majority_baseline_and_grid_the_articles_column(tiny_bert_dir, tmp_path):
    glue = write_sst2(str(tmp_path / "glue"), n_train=40, n_dev=30)
    out = tmp_path / "r"
    assert ft.main(["sst2", "--model", tiny_bert_dir, "--data-dir", glue, "--results-dir", str(out), "--device", "cpu",
                    "--grid", "glue", "--evals", "1"]) == 0
    train_labels = [y for _, y in readers.read_split(glue, "sst2", "train")]
    dev_labels = np.array([y for _, y in readers.read_split(glue, "sst2", "dev")])
    majority = int(np.bincount(train_labels).argmax())
    log = (out / "part4_sst2_lr2e-5.log").read_text().splitlines()
    before = next(x for x in log if x.startswith("before fine-tuning"))
    name = ("negative", "positive")[majority]                                # SST-2's labels 0 and 1 by name
    assert (f"(always the training set's majority class, {name} ({majority}): dev accuracy {np.mean(dev_labels == majority):.4f})"
            in before)
    assert before.endswith("[article: dev accuracy 0.4908; the article's own random head, not expected to match]")
    assert "[article (bert-base-uncased, batch 32, 3 epochs, seed 0): 0.9255 (807/872), F1 0.9279]" in log[-2]
    summary = (out / "part4_sst2_grid_glue.log").read_text().splitlines()
    assert summary[0] == "grid glue (paper §4.1): lr {5e-5, 4e-5, 3e-5, 2e-5} = 4 runs"
    rows = [x for x in summary if x.startswith("  batch")]
    assert len(rows) == 4 and all(re.search(r"dev accuracy \d\.\d{4} \(\d+/30\)", x) for x in rows)
    assert sum("[article (" in x for x in rows) == 1                        # the article ran lr 2e-5 on SST-2


# --- SQuAD: the sweep as a table, the window breakdown, no tau for "answer nothing" ---

def test_exact_best_line_when_the_best_is_to_answer_nothing():
    line = sq.exact_best_line({"f1": 50.0, "answered": 0.0, "threshold": 0.0, "tau": 0.0})
    assert "answering no question at all" in line and "tau = +0.000" not in line
    assert "at tau = -1.250 (best_f1_thresh = +1.250), answers 40.0%" in sq.exact_best_line(
        {"f1": 60.0, "answered": 40.0, "threshold": 1.25, "tau": -1.25})


def test_squad_log_has_the_sweep_table_and_the_window_breakdown(tiny_qa_dir, tmp_path):
    from test_squad import squad_file
    v1, v2 = squad_file(tmp_path / "v1.json", False), squad_file(tmp_path / "v2.json", True)
    out = tmp_path / "r"
    assert sq.main(["--v1-model", tiny_qa_dir, "--v2-model", tiny_qa_dir, "--v1-data", v1, "--v2-data", v2, "--only", "v1",
                    "--only", "v2", "--max-len", "48", "--stride", "16", "--results-dir", str(out), "--device", "cpu"]) == 0
    r = json.loads((out / "part4_squad.json").read_text())
    log = (out / "part4_squad.log").read_text().splitlines()
    rows = [x for x in log if re.match(r"   [* ] tau +[+-]\d", x)]
    assert len(rows) == len(r["v2_dev"]["sweep"]) == 49
    starred = [x for x in rows if x.startswith("   * ")]
    assert len(starred) == 1 and f"tau {r['v2_dev']['best']['tau']:+6.2f}" in starred[0]
    breakdown = next(x for x in log if x.startswith("   windows per question: "))
    counts = {int(k): int(v) for k, v in re.findall(r"(\d+) -> (\d+) questions", breakdown)}
    assert sum(counts.values()) == r["v1_dev"]["n"] and sum(k * v for k, v in counts.items()) == r["v1_dev"]["windows"]
    n = r["v1_dev"]["n"]                                    # a file of n questions: another split, said beside
    assert f"[article, on the dev set's 10,570 questions (this file: {n}, another split): EM 80.79, F1 88.08, 10753 " \
           f"windows, 9.3 min]" in "\n".join(log)                                               # on a local model too
    assert log[0].startswith("SQuAD v1.1 model: ") and "(article: csarron/bert-base-uncased-squad-v1)" in log[0]


def readme_and_docs():
    """The README and the pages of docs/ it links, as one text."""
    import glob
    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    return "\n\n".join(open(p, encoding="utf-8").read() for p in pages)


def test_readme_gives_cpu_users_a_cpu_build_and_names_every_test_package():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    cpu = next(line for line in readme.splitlines() if "whl/cpu" in line)
    assert 'pip install "torch>=' in cpu and "--index-url https://download.pytorch.org/whl/cpu" in cpu
    assert cpu.index("pip install") < cpu.index("requirements.txt")
    floor = next(line for line in open(os.path.join(ROOT, "requirements.txt")) if line.startswith("torch"))
    assert floor.strip() in cpu                       # the CPU build taken in the range requirements.txt allows
    docs = readme_and_docs()
    packages = docs[docs.index("## Packages"):]
    for line in open(os.path.join(ROOT, "requirements-dev.txt")):
        name = re.split(r"[<>=\s#]", line.strip())[0]
        if name:
            assert name in packages, name


def test_every_log_the_readme_names_is_committed():
    """Each `results/...` path of a "Logs:" paragraph of the README and docs/ matches a committed file or folder."""
    import glob
    paragraphs = [p for p in readme_and_docs().split("\n\n") if p.startswith("Logs:")]
    paths = [x for p in paragraphs for x in re.findall(r"`(results/[^`]+)`", p)]
    assert paragraphs and len(paths) >= 4
    for path in paths:
        assert glob.glob(os.path.join(ROOT, path)), path


@pytest.mark.slow
@needs_shared_data
def test_the_v1_dev_windows_with_the_real_vocabulary(tmp_path):
    """10,784 windows from the 10,570 v1.1 dev questions: 183 need more than one window, 31 of them three
    (the article printed 10,753 windows; these are the numbers our windowing gives)."""
    from transformers import AutoTokenizer, BertTokenizer
    BertTokenizer(vocab=os.path.join(SHARED_DATA, "bert-base-uncased", "vocab.txt")).save_pretrained(str(tmp_path))
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    examples = readers.read_squad_json(os.path.join(SHARED_DATA, "squad", "dev-v1.1.json"), "1.1", "x")
    windows = squad_spans.make_windows(tok, examples, 384, 128)
    per_question = np.bincount([w["example"] for w in windows], minlength=len(examples)).tolist()
    assert len(windows) == 10784 and sum(n > 1 for n in per_question) == 183 and per_question.count(3) == 31
    assert squad_spans.uncovered_questions(tok, examples, windows) == []       # every passage token is in some window
    assert sq.window_breakdown(per_question) == "windows per question: 1 -> 10387 questions, 2 -> 152 questions, " \
                                                "3 -> 31 questions"


def test_the_squad_progress_bar_counts_windows(tiny_qa_dir, tmp_path, capsys):
    from test_squad import squad_file
    v1 = squad_file(tmp_path / "v1.json", False)
    assert sq.main(["--v1-model", tiny_qa_dir, "--v1-data", v1, "--only", "v1", "--max-len", "40", "--stride", "12",
                    "--batch-size", "4", "--results-dir", str(tmp_path / "r"), "--device", "cpu"]) == 0
    windows = json.loads((tmp_path / "r" / "part4_squad.json").read_text())["v1_dev"]["windows"]
    err = capsys.readouterr().err
    assert windows > 4 and f"0/{windows} [" in err and "window/s" in err and "batch/s" not in err
