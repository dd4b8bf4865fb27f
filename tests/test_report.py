"""The reproduction report: each status rule on a run made for it, the summary's counts against its rows, an
empty results folder, the committed report against what the script builds from the committed results, and the
commands it prints parsed by their scripts."""

import glob
import json
import os
import re
import shlex
import shutil

import pytest
from conftest import ROOT

import bert_part4_report as report
from part4.command_line import fine_tune_settings, script_settings
from part4.command_line.declarations import Fatal
from part4.paper import article
from part4.reproduction import experiments, our_numbers, statuses
from part4.reproduction import report as report_text

RESULTS = os.path.join(ROOT, "results")


# all-MiniLM-L6-v2's model.safetensors, as a run on it records it (part4/models/loading.py's loaded_record)
MINILM = {"sha256": {"model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"},
          "architecture": {"model_type": "bert", "layers": 6, "hidden": 384, "heads": 12, "vocab": 30522,
                           "parameters": 22713728}}


def weights_of(model):
    """The record of the weights a run on a model leaves: an article's checkpoint's as published (its sha256,
    part4/paper/article.py), a folder of all-MiniLM-L6-v2's as MiniLM's; these rules' tests take the records as given
    (tests/test_report_runs.py: the records the scripts write)."""
    hub_id = next((k for k in article.PUBLISHED if os.path.basename(model) == k.split("/")[-1]), None)
    if hub_id is None:
        return MINILM
    published = article.PUBLISHED[hub_id]
    return {"sha256": {published.file: published.sha256}, "architecture": article.ARCHITECTURE | {"parameters": 1}}


def finetune_run(task="sst2", lr=2e-5, accuracy=0.9255, model="bert-base-uncased", **config):
    n = {"sst2": 872, "mrpc": 408}[task]
    return {"task": task, "lr": lr, "batch_size": 32, "epochs": 3, "seed": 0, "steps": 6315, "warmup_steps": 631,
            "settings": {"init": config.pop("init", "pretrained")}, "before": {"dev": {"accuracy": 0.4908}}, "seconds": 2900.0,
            "curve": [], "weights": weights_of(model),
            "final": {"dev": {"accuracy": accuracy, "f1": 0.9279, "correct": round(accuracy * n), "n": n}},
            "run": {"argv": ["bert_part4_finetune.py", task], "config": {"model": model, **config}, "versions": {}}}


def squad_v1(windows=10753, n=10570, tokenizers="0.23.3", em=80.79, model="csarron/bert-base-uncased-squad-v1"):
    return {"v1_dev": {"n": n, "windows": windows, "em": em, "f1": 88.08, "seconds": 558.0},
            "models": {"v1": weights_of(model)},
            "run": {"argv": ["bert_part4_squad.py", "--only", "v1"],
                    "config": {"v1_model": model, "max_dev_examples": None, "only": ["v1"]},
                    "versions": {"tokenizers": tokenizers}}}


def status(key, data):
    return statuses.judge(article.NUMBERS[key], data, statuses.read_requirements())


def test_same_means_equal_at_the_printed_precision():
    assert status("sst2.lr2e-05.accuracy", finetune_run(accuracy=0.92549)) == ("same", "")
    assert status("sst2.lr2e-05.accuracy_text", finetune_run(accuracy=0.92549)) == ("same", "")       # 92.55
    assert statuses.compare(article.NUMBERS["v1.0.hand_gap"], 1.04e-5)[0] == "1.0e-05"
    assert statuses.compare(article.NUMBERS["heads.total_params"], 109484547) == ("109,484,547", 0.0)
    assert statuses.compare(article.NUMBERS["toy.glue.p"], [0.8670, 0.0320, 0.1010]) == ("0.867, 0.032, 0.101", 0.0)
    assert statuses.compare(article.NUMBERS["null.2.answer+4.00"], False) == ("no", 0.0)
    assert statuses.compare(article.NUMBERS["null.2.answer+4.00"], True)[1] == float("inf")


def test_the_articles_own_spread_and_the_stated_tolerances():
    """MRPC 2e-5: the article's two runs, 0.8186 and 0.8333; elsewhere a fine-tune's dev score may move by their
    distance, 0.0147; a fixed checkpoint's dev score by 0.1 points; a real model's number by one last digit."""
    assert status("mrpc.lr2e-05.accuracy", finetune_run("mrpc", accuracy=0.8260))[0] == "within spread"
    assert status("mrpc.repeat.accuracy", finetune_run("mrpc", accuracy=0.8260))[0] == "within spread"
    assert status("mrpc.lr2e-05.accuracy", finetune_run("mrpc", accuracy=0.8450))[0] == "within tolerance"   # 0.8333 + 0.0117
    assert status("mrpc.lr2e-05.accuracy", finetune_run("mrpc", accuracy=0.8100))[0] == "differs"   # 0.0233 under 0.8333
    assert status("sst2.lr2e-05.accuracy", finetune_run(accuracy=0.9150)) == ("within tolerance",
                                                                              statuses.TOLERANCE["fine-tune"][1])
    assert status("sst2.lr2e-05.accuracy", finetune_run(accuracy=0.9050)) == ("differs", "no known reason")
    assert status("v1.dev.em", squad_v1(em=80.70))[0] == "within tolerance"
    assert status("v1.dev.em", squad_v1(em=80.60))[0] == "differs"
    demo = {"v1_demo": [{"spans": [["x", 21, 30, 15.17]]}], "models": {"v1": weights_of(article.SQUAD_V1)},
            "run": {"argv": ["bert_part4_squad.py"], "config": {"v1_model": article.SQUAD_V1}}}
    assert status("v1.0.score", demo)[0] == "within tolerance"
    demo["v1_demo"][0]["spans"][0][3] = 15.19
    assert status("v1.0.score", demo)[0] == "differs"
    assert status("sst2.steps", finetune_run() | {"steps": 6316})[0] == "differs"        # counts have no tolerance


def test_a_run_off_the_recipe_is_another_setting():
    """A fine-tune that left the recipe (its input length, warmup, weight decay, clipping, or the checkpoint's own
    output layer kept) is under another setting, whatever it scored; the recipe's own is judged."""
    assert status("sst2.lr2e-05.accuracy", finetune_run() | {"settings": {"max_len": 128, "warmup": 0.1,
                                                                          "weight_decay": 0.01, "clip": 1.0}}) == ("same", "")
    for key, value, said in (("max_len", 8, "max_len 8 (the article's: 128)"), ("warmup", 0.0, "warmup 0.0 (the "
                             "article's: 0.1)"), ("weight_decay", 0.1, "weight_decay 0.1 (the article's: 0.01)"),
                             ("clip", 5.0, "clip 5.0 (the article's: 1.0)"),
                             ("head", "checkpoint", "head checkpoint (the article's: a new output layer)")):
        assert status("sst2.lr2e-05.accuracy", finetune_run() | {"settings": {key: value}}) == ("another setting", said)


def test_a_run_as_far_from_the_article_as_its_own_repeat_is_within_tolerance_in_every_row():
    """The article's two MRPC 2e-5 runs, 340 and 334 of 408 right: a run that scores either is within the other's
    tolerance, by its count as by its accuracy; one more example off is not."""
    for correct, row, state in ((340, "mrpc.repeat", "within tolerance"), (334, "mrpc.lr2e-05", "within tolerance"),
                                (341, "mrpc.repeat", "differs"), (333, "mrpc.lr2e-05", "differs")):
        run = finetune_run("mrpc", accuracy=correct / 408)
        run["final"]["dev"] |= {"correct": correct, "n": 408}
        assert status(f"{row}.correct", run)[0] == state, (correct, row)


def test_the_window_count_differs_for_its_known_reason_and_a_version_requirements_txt_excludes_is_another_setting():
    state, why = status("v1.dev.windows", squad_v1(windows=10784, tokenizers="0.23.3"))
    assert state == "differs" and "tokenizers 0.23.1 and 0.23.2" in why and statuses.WINDOWS_DOC in why
    assert status("v1.dev.windows", squad_v1(windows=10753, tokenizers="0.23.3")) == ("same", "")
    for windows in (10753, 10784):                      # 0.23.2: the article's count, but requirements.txt excludes it
        state, why = status("v1.dev.windows", squad_v1(windows=windows, tokenizers="0.23.2"))
        assert state == "another setting" and "tokenizers 0.23.2" in why and "requirements.txt" in why
    assert os.path.isfile(os.path.join(ROOT, statuses.WINDOWS_DOC.split("#")[0]))


def test_excluded_versions_reads_the_requirements_specifiers():
    requirements = "# a comment\n-r other.txt\ntorch>=2.2,<3\ntokenizers!=0.23.1,!=0.23.2  # why\n"
    assert statuses.excluded_versions({"torch": "2.13.0+cpu", "tokenizers": "0.23.3"}, requirements) == ""
    assert statuses.excluded_versions({"torch": "3.0.0"}, requirements).startswith("torch 3.0.0, which")
    assert "tokenizers 0.23.1" in statuses.excluded_versions({"tokenizers": "0.23.1"}, requirements)
    assert statuses.excluded_versions({"tokenizers": "0.23.1"}, "") == ""
    assert "tokenizers!=0.23.1" in statuses.read_requirements()          # the checkout's own file is the one read


def test_a_number_with_several_rows_counts_once_by_the_stated_rule():
    assert statuses.entry_status(["same", "differs"]) == "differs"          # a disagreeing run is not hidden
    assert statuses.entry_status(["another setting", "within tolerance"]) == "reproduced"
    assert statuses.entry_status(["another split", "another model"]) == "another model"
    assert statuses.entry_status(["shown", "not run yet"]) == "shown"
    assert statuses.entry_status(["not run yet"]) == "not run yet"


def test_another_model_another_split_a_cut_run_and_the_shown_kinds_are_not_judged():
    assert status("sst2.lr2e-05.accuracy", finetune_run(model="models/all-MiniLM-L6-v2"))[0] == "another model"
    assert status("sst2.lr2e-05.accuracy", finetune_run(model="models/bert-base-uncased"))[0] == "same"   # a local copy
    assert status("sst2.lr2e-05.accuracy", finetune_run(init="random"))[0] == "another model"
    assert status("sst2.lr2e-05.accuracy", finetune_run(max_train_examples=300)) == ("cut run", "--max-train-examples 300")
    offline = squad_v1(n=1988, model="models/squad-v1-minilm")
    offline["run"]["config"]["v1_data"] = "../shared/data/squad/offline-eval-v1.1.json"
    split = "the offline evaluation part, ../shared/data/squad/offline-eval-v1.1.json: 1988 of the article's 10570 dev questions"
    minilm = ("; on another model too (ours: squad-v1-minilm, bert, 6 layers, H 384, 12 heads, vocab 30,522; article: "
              "csarron/bert-base-uncased-squad-v1, bert, 12 layers, H 768, 12 heads, vocab 30,522)")
    assert status("v1.dev.windows", offline) == ("another split", split)          # the tokenizer's count: no model
    assert status("v1.dev.em", offline) == ("another split", split + minilm)      # a score: the model is said too
    assert status("v1.dev.em", squad_v1(n=1988))[0] == "another split"
    offline["run"]["config"]["max_dev_examples"] = 5
    also = f"; on another split too ({split})"              # a cut run on the offline evaluation part says both
    assert status("v1.dev.em", offline) == ("cut run", "--max-dev-examples 5" + also + minilm)
    assert status("v1.dev.n", offline) == ("cut run", "--max-dev-examples 5" + also)
    cut = squad_v1(n=5)
    cut["run"]["config"] |= {"max_dev_examples": 5, "v1_data": "../shared/data/squad/dev-v1.1.json"}
    assert status("v1.dev.em", cut) == ("cut run", "--max-dev-examples 5")              # the dev set itself, cut: no split
    assert status("sst2.minutes", finetune_run())[0] == "shown"
    assert "ours on cpu, the article's on a GPU" in status("sst2.minutes", finetune_run() | {"run": {
        "argv": ["bert_part4_finetune.py"], "config": {}, "device": "cpu"}})[1]
    assert status("sst2.before", finetune_run())[0] == "shown"


def test_a_stand_ins_numbers_on_the_offline_part_are_counted_on_another_split_too():
    """A stand-in's SQuAD run scored on the offline evaluation part of the dev set: its numbers that need a model are
    another model (stand-in), and the summary counts them on another split too, from where the run says it scored; the
    dev set itself with fewer questions is not that part."""
    data = squad_v1(n=1988, model="models/stand-in/csarron/bert-base-uncased-squad-v1")
    data["models"]["v1"] = MINILM | {"stand_in": {"stand_in_for": article.SQUAD_V1,
                                                  "what": "stand-in: all-MiniLM-L6-v2 fine-tuned here on SQuAD v1.1"}}
    data["run"]["config"]["v1_data"] = "../shared/data/squad/offline-eval-v1.1.json"
    runs = {"part4_squad.json": data}
    table = statuses.rows(runs)
    scored = {r["key"] for r in table if r["status"] == "another model"}
    assert scored and all(r["model"] == "stand-in" and "on another split too" in r["note"]
                          for r in table if r["key"] in scored)
    line = report_text.status_summary(table, runs)[2]
    assert f"; {len(scored)} on another model ({len(scored)} of them on another split too); " in line
    data["run"]["config"]["v1_data"] = "../shared/data/squad/dev-v1.1.json"
    line = report_text.status_summary(statuses.rows(runs), runs)[2]
    assert f"; {len(scored)} on another model; " in line


def test_a_stand_ins_report_gives_the_articles_commands_and_the_command_that_writes_it_again(tmp_path, monkeypatch):
    """The report the report writes for a stand-in's folder (models/stand-in/results, as the README's stand-in command
    leaves it): its numbers on another model listed with the article's commands, as the code builds them (results/,
    never the stand-in's folder, whose runs are not the article's); its header names the command that writes it again,
    with its folder."""
    monkeypatch.chdir(tmp_path)
    folder = os.path.join("models", "stand-in", "results")
    data = squad_v1(n=1988, model="models/stand-in/csarron/bert-base-uncased-squad-v1")
    data["models"]["v1"] = MINILM | {"stand_in": {"stand_in_for": article.SQUAD_V1,
                                                  "what": "stand-in: all-MiniLM-L6-v2 fine-tuned here on SQuAD v1.1"}}
    write_runs(folder, {"part4_squad.json": data})
    assert report.main(["--results-dir", folder]) == 0
    md = (tmp_path / folder / report.REPORT_MD).read_text()
    assert f"Generated by `python bert_part4_report.py --results-dir {folder}` from the results files" in md
    listed = md.split("in the article's setting")[1].split("\n\n")[1].splitlines()
    squad = experiments.BY_NAME["squad"]
    assert listed == [f"- `python {' '.join(experiments.command(squad))}` (needs {squad.needs})"]
    assert "--results-dir" not in listed[0] and "stand-in" not in listed[0]


def test_a_count_that_needs_no_model_is_judged_whatever_model_ran():
    other = finetune_run(model="models/all-MiniLM-L6-v2")
    for key in ("sst2.steps", "sst2.steps_text", "sst2.warmup", "sst2.lr2e-05.n", "sst2.curve.6315.step"):
        assert not article.NUMBERS[key].model and status(key, other | {"curve": [{"step": 6315}]})[0] == "same", key
    assert status("sst2.steps", other | {"steps": 6316})[0] == "differs"
    assert status("mrpc.lr2e-05.n", finetune_run("mrpc", init="random"))[0] == "same"
    assert status("sst2.lr2e-05.accuracy", other)[0] == "another model"       # a model's number is not


def test_a_model_is_named_one_way():
    assert statuses.model_name("models/all-MiniLM-L6-v2") == statuses.model_name("all-MiniLM-L6-v2@2e8a342051c5") \
        == "all-MiniLM-L6-v2"
    assert statuses.model_name("csarron/bert-base-uncased-squad-v1") == "csarron/bert-base-uncased-squad-v1"
    assert report_text.report_notes({"a.json": {"run": {"config": {"model": "all-MiniLM-L6-v2@2e8a342051c5"}}}})[1:] == [
        "A local model is named by its folder's name; a folder outside the checkout is recorded with a fingerprint of "
        "its config and weights: all-MiniLM-L6-v2@2e8a342051c5."]


SUMMARY = (r"Of the article's (?P<total>\d+) numbers: reproduced (?P<reproduced>\d+) \((?P<no_model>\d+) need no model, "
           r"(?P<model>\d+) on the article's models, (?P<unverified>\d+) on its checkpoints by name and architecture, "
           r"weights not verified\); (?P<differs>\d+) differs?; (?P<another_model>\d+) on another model; "
           r"(?P<another_split>\d+) on another split; (?P<another_setting>\d+) under another setting; (?P<cut_run>\d+) "
           r"only from cut runs; (?P<unusable>\d+) unusable \(no number in their results file\); (?P<shown>\d+) shown, not "
           r"judged \(timings, "
           r"random-head numbers, rounding noise\); (?P<not_run_yet>\d+) not run yet")


def summary_counts(line):
    found = re.fullmatch(SUMMARY, line)
    assert found, line
    return {k.replace("_", " "): int(v) for k, v in found.groupdict().items()}


def write_runs(folder, runs):
    os.makedirs(folder, exist_ok=True)
    for name, data in runs.items():
        with open(os.path.join(folder, name), "w") as f:
            json.dump(data, f)


def by_entry(rows):
    seen = {}
    for r in rows:
        seen.setdefault(r["key"], []).append(r["status"])
    return seen


def test_the_summary_and_the_section_table_count_the_rows(tmp_path):
    """Counted from the rows by hand: each number once (the rule of test_a_number_with_several_rows...), every kind
    with no value of ours not run yet, and reproduced split by whether the number needs a model."""
    write_runs(tmp_path, {"part4_sst2.json": finetune_run(accuracy=0.92), "part4_mrpc.json": finetune_run(
        "mrpc", 5e-5, 0.70, model="other"), "part4_squad.json": squad_v1(windows=10784),
        "old_squad.json": squad_v1(windows=10753, tokenizers="0.23.2"), "notes.json": {"x": 1}})
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / report.REPORT_JSON).read_text())
    md = (tmp_path / report.REPORT_MD).read_text()
    counts, seen = summary_counts(saved["summary"]), by_entry(saved["rows"])
    assert f"**{saved['summary']}**" in md
    assert counts["total"] == len(seen) == len([e for e in article.ENTRIES if e.kind != "paper"])
    assert counts["differs"] == sum("differs" in s for s in seen.values()) == 1       # the window count
    reproduced = [k for k, s in seen.items() if "differs" not in s and set(s) & set(statuses.REPRODUCED)]
    assert counts["reproduced"] == len(reproduced) == counts["no model"] + counts["model"] + counts["unverified"]
    assert counts["model"] == sum(bool(article.NUMBERS[k].model) for k in reproduced) > 0     # sst2 at 0.92: bert-base
    assert counts["no model"] == sum(not article.NUMBERS[k].model for k in reproduced) > 0    # its steps, the v1 count
    assert counts["not run yet"] == sum(set(s) == {"not run yet"} for s in seen.values())
    assert counts["another model"] == sum(set(s) == {"another model"} for s in seen.values()) > 0
    assert counts["shown"] == sum(set(s) == {"shown"} for s in seen.values())
    assert sum(v for k, v in counts.items() if k not in ("total", "no model", "model", "unverified")) == counts["total"]
    assert saved["counts"]["differs"] == 1 and saved["reproduced"]["on the article's models"] == counts["model"]
    assert "| sst2 dev accuracy at the end, lr 2e-05 | 0.9255 | 0.9200 | -0.0055 | within tolerance" in md
    article_setting = md.split("in the article's setting")[1].split("\n\n")[1].splitlines()   # another model: mrpc 5e-5
    assert article_setting[0].startswith("- `python bert_part4_finetune.py mrpc 5e-5` (needs")   # the article's, results/
    header = md.splitlines().index("| Section | " + " | ".join(statuses.ORDER) + " |")
    for line in md.splitlines()[header + 2:]:
        if not line.startswith("|"):
            break
        section, *cells = [c.strip() for c in line.strip("|").split("|")]
        keys = {r["key"] for r in saved["rows"] if r["section"] == section}
        assert sum(map(int, cells)) == len(keys), section
        assert int(cells[statuses.ORDER.index("differs")]) == sum("differs" in seen[k] for k in keys), section


def test_every_table_cell_escapes_its_pipes(tmp_path):
    """A `|` inside a cell ('|S.T_i by hand - model start logit|') is escaped, so every row of a table has its
    header's number of cells."""
    assert report_text.table_row(["|a| b", 1]) == "| \\|a\\| b | 1 |"
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    md = (tmp_path / report.REPORT_MD).read_text()
    assert "\\|S.T_i by hand - model start logit\\|" in md
    width = None
    for line in md.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        cells = len(re.split(r"(?<!\\)\|", line)) - 2
        width = width or cells
        assert cells == width, line


def parses(command):
    """Run the parser of the script a command names on its flags, in-process (nothing is trained or loaded)."""
    words = shlex.split(command)
    at = next(k for k, w in enumerate(words) if re.fullmatch(r"(.*/)?bert_part4_\w+\.py", w))
    script = os.path.basename(words[at])[len("bert_part4_"):-3]
    parse = fine_tune_settings.parse if script == "finetune" else getattr(script_settings, f"parse_{script}")
    return parse(words[at + 1:])


def test_on_an_empty_folder_every_number_is_not_run_yet_with_a_command_its_script_accepts(tmp_path):
    """Whatever its kind (a timing too); each command writes into the report's own folder."""
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / report.REPORT_JSON).read_text())
    assert {r["status"] for r in saved["rows"]} == {"not run yet"}
    assert len(saved["rows"]) == len([e for e in article.ENTRIES if e.kind != "paper"])
    assert summary_counts(saved["summary"])["not run yet"] == len(saved["rows"])
    assert summary_counts(saved["summary"])["shown"] == 0
    commands = sorted({r["command"] for r in saved["rows"]})
    assert f"python bert_part4_finetune.py mrpc 5e-5 --results-dir {tmp_path}" in commands
    assert len(commands) == len(experiments.EXPERIMENTS)            # one per experiment: bert_part4_reproduce.py's plan
    for command in commands:
        assert command.endswith(f" --results-dir {tmp_path}")
        parses(command)
    assert report_text.OFFLINE in (tmp_path / report.REPORT_MD).read_text()
    with pytest.raises(Fatal):
        parses("python bert_part4_squad.py --only v3")


def test_the_committed_report_is_what_the_script_builds_from_the_committed_results(tmp_path, monkeypatch):
    copy = tmp_path / "results"
    for path in glob.glob(os.path.join(RESULTS, "**", "*.json"), recursive=True):
        if os.path.basename(path) != report.REPORT_JSON:
            target = copy / os.path.relpath(path, RESULTS)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    monkeypatch.chdir(tmp_path)                              # the default folder: its commands carry no --results-dir
    assert report.main(["--results-dir", "results"]) == 0
    for name in (report.REPORT_MD, report.REPORT_JSON):
        with open(os.path.join(RESULTS, name), encoding="utf-8") as f:
            assert (copy / name).read_text() == f.read(), f"results/{name} is stale: run python bert_part4_report.py"


def test_the_help_and_the_docstring_name_a_committed_results_file():
    run_help = next(a.help for a in script_settings.report_parser()._actions if a.dest == "run")
    for text in (run_help, report.__doc__):
        examples = re.findall(r"results/[\w./-]+\.json", text)
        assert examples and all(os.path.isfile(os.path.join(ROOT, e)) for e in examples), examples


def test_one_run_against_the_articles_lines(tmp_path, capsys):
    write_runs(tmp_path, {"part4_mrpc_lr2e-5.json": finetune_run("mrpc", accuracy=0.8260), "bad.json": {"x": 1}})
    assert report.main([str(tmp_path / "part4_mrpc_lr2e-5.json")]) == 0
    out = capsys.readouterr().out
    assert "mrpc dev accuracy at the end, lr 2e-05: article 0.8333   ours 0.8260   within spread" in out
    assert "MRPC 2e-5 dev accuracy, the same job run before the grid: article 0.8186   ours 0.8260   within spread" in out
    assert out.splitlines()[-1].startswith("This run, ")
    assert not (tmp_path / report.REPORT_MD).exists()
    with pytest.raises(Fatal, match="no run block"):
        report.main([str(tmp_path / "bad.json")])
    with pytest.raises(Fatal, match="no such file"):
        report.main([str(tmp_path / "none.json")])


def test_the_toy_sections_run_here_reproduce_every_number_the_article_prints_for_them(tmp_path, monkeypatch):
    """bert_part4_math.py --only toys recomputes the toys from their inputs; the report finds each of the article's
    toy numbers among them, equal at the printed precision."""
    import bert_part4_math
    monkeypatch.setattr("sys.argv", ["bert_part4_math.py"])          # what a results file records as its script
    assert bert_part4_math.main(["--only", "toys", "--results-dir", str(tmp_path)]) in (0, None)
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / report.REPORT_JSON).read_text())["rows"]
    toys = [r for r in rows if article.NUMBERS[r["key"]].script == article.MATH and not article.NUMBERS[r["key"]].model]
    assert len(toys) == 45
    assert {r["status"] for r in toys} == {"same"}
    assert next(r for r in toys if r["key"] == "toy.span.max_any")["ours"] == "5.8"      # the largest cell, i > j
    counts = summary_counts(json.loads((tmp_path / report.REPORT_JSON).read_text())["summary"])
    assert counts["reproduced"] == counts["no model"] == 45 and counts["model"] == 0


def test_the_plots_the_scripts_drew_are_linked_from_their_sections(tmp_path):
    write_runs(tmp_path, {"part4_squad.json": squad_v1()})
    for name in ("part4_squad_tau_sweep.png", "part4_sst2_lr2e-5_curve.png", "holiday.png"):
        (tmp_path / name).write_bytes(b"")
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    md = (tmp_path / report.REPORT_MD).read_text()
    tau = md.index(f"## {article.NUMBERS['v2.dev.tau'].where}")
    assert md.index("Plot: [part4_squad_tau_sweep.png](part4_squad_tau_sweep.png)") == tau + len(md[tau:].split("\n")[0]) + 2
    assert md.index("Plot: [part4_sst2_lr2e-5_curve.png]") > md.index(f"## {article.NUMBERS['sst2.steps'].where}")
    assert "holiday" not in md


def test_a_key_that_holds_dots_is_read_whole():
    """The math script keys its no-answer decisions by tau ('+0.00'): the report reads them, not 'unusable'."""
    data = {"null": {"questions": [{"answer": {"+0.00": True, "+4.00": False}, "s_hat": 1.5}]}}
    assert our_numbers.lookup(data, "null.questions.0.answer.+0.00") is True
    assert our_numbers.lookup(data, "null.questions.0.answer.+4.00") is False
    assert our_numbers.lookup(data, "null.questions.-1.s_hat") == 1.5
    assert our_numbers.lookup(data, "null.questions.0.answer.+1.00") is our_numbers.MISSING
    assert our_numbers.lookup(data, "null.questions.1.s_hat") is our_numbers.MISSING
