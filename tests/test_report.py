"""The reproduction report: each status rule on a run made for it, the summary's counts against its rows, an
empty results folder, the committed report against what the script builds from the committed results, and the
commands it prints parsed by their scripts."""

import glob
import importlib
import json
import os
import re
import shlex
import shutil

import pytest
from conftest import ROOT

import bert_part4_report as report
from part4 import article
from part4.common import Fatal

RESULTS = os.path.join(ROOT, "results")


def finetune_run(task="sst2", lr=2e-5, accuracy=0.9255, model="bert-base-uncased", **config):
    n = {"sst2": 872, "mrpc": 408}[task]
    return {"task": task, "lr": lr, "steps": 6315, "warmup_steps": 631, "settings": {"init": config.pop("init", "pretrained")},
            "before": {"dev": {"accuracy": 0.4908}}, "seconds": 2900.0,
            "final": {"dev": {"accuracy": accuracy, "f1": 0.9279, "correct": round(accuracy * n), "n": n}},
            "run": {"argv": ["bert_part4_finetune.py", task], "config": {"model": model, **config}, "versions": {}}}


def squad_v1(windows=10753, n=10570, tokenizers="0.23.3", em=80.79, model="csarron/bert-base-uncased-squad-v1"):
    return {"v1_dev": {"n": n, "windows": windows, "em": em, "f1": 88.08, "seconds": 558.0},
            "run": {"argv": ["bert_part4_squad.py", "--only", "v1"], "config": {"v1_model": model, "limit": None},
                    "versions": {"tokenizers": tokenizers}}}


def status(key, data):
    return report.judge(article.NUMBERS[key], data)


def test_same_means_equal_at_the_printed_precision():
    assert status("sst2.lr2e-05.accuracy", finetune_run(accuracy=0.92549)) == ("same", "")
    assert status("sst2.lr2e-05.accuracy_text", finetune_run(accuracy=0.92549)) == ("same", "")       # 92.55
    assert report.compare(article.NUMBERS["v1.0.hand_gap"], 1.04e-5)[0] == "1.0e-05"
    assert report.compare(article.NUMBERS["heads.total_params"], 109484547) == ("109,484,547", 0.0)
    assert report.compare(article.NUMBERS["toy.glue.p"], [0.8670, 0.0320, 0.1010]) == ("0.867, 0.032, 0.101", 0.0)
    assert report.compare(article.NUMBERS["null.2.answer+4.00"], False) == ("no", 0.0)
    assert report.compare(article.NUMBERS["null.2.answer+4.00"], True)[1] == float("inf")


def test_the_articles_own_spread_and_the_stated_tolerances():
    """MRPC 2e-5: the article's two runs, 0.8186 and 0.8333; elsewhere a fine-tune's dev score may move by their
    distance, 0.0147; a fixed checkpoint's dev score by 0.1 points; a real model's number by one last digit."""
    assert status("mrpc.lr2e-05.accuracy", finetune_run("mrpc", accuracy=0.8260))[0] == "within spread"
    assert status("mrpc.repeat.accuracy", finetune_run("mrpc", accuracy=0.8260))[0] == "within spread"
    assert status("mrpc.lr2e-05.accuracy", finetune_run("mrpc", accuracy=0.8450))[0] == "within tolerance"   # 0.8333 + 0.0117
    assert status("mrpc.lr2e-05.accuracy", finetune_run("mrpc", accuracy=0.8100))[0] == "differs"   # 0.0233 under 0.8333
    assert status("sst2.lr2e-05.accuracy", finetune_run(accuracy=0.9150)) == ("within tolerance",
                                                                              report.TOLERANCE["fine-tune"][1])
    assert status("sst2.lr2e-05.accuracy", finetune_run(accuracy=0.9050)) == ("differs", "no known reason")
    assert status("v1.dev.em", squad_v1(em=80.70))[0] == "within tolerance"
    assert status("v1.dev.em", squad_v1(em=80.60))[0] == "differs"
    demo = {"v1_demo": [{"spans": [["x", 21, 30, 15.17]]}], "run": {"argv": ["bert_part4_squad.py"],
                                                                  "config": {"v1_model": article.SQUAD_V1}}}
    assert status("v1.0.score", demo)[0] == "within tolerance"
    demo["v1_demo"][0]["spans"][0][3] = 15.19
    assert status("v1.0.score", demo)[0] == "differs"
    assert status("sst2.steps", finetune_run() | {"steps": 6316})[0] == "differs"        # counts have no tolerance


def test_the_window_count_differs_for_its_known_reason_only_off_the_articles_tokenizers():
    assert status("v1.dev.windows", squad_v1(windows=10753, tokenizers="0.23.2")) == ("same", "")
    state, why = status("v1.dev.windows", squad_v1(windows=10784, tokenizers="0.23.3"))
    assert state == "differs" and "tokenizers 0.23.1 and 0.23.2" in why and report.WINDOWS_DOC in why
    assert status("v1.dev.windows", squad_v1(windows=10784, tokenizers="0.23.2")) == ("differs", "no known reason")
    assert os.path.isfile(os.path.join(ROOT, report.WINDOWS_DOC.split("#")[0]))


def test_another_model_a_cut_run_and_the_shown_kinds_are_not_judged():
    assert status("sst2.lr2e-05.accuracy", finetune_run(model="models/all-MiniLM-L6-v2"))[0] == "another model"
    assert status("sst2.lr2e-05.accuracy", finetune_run(model="models/bert-base-uncased"))[0] == "same"   # a local copy
    assert status("sst2.lr2e-05.accuracy", finetune_run(init="random"))[0] == "another model"
    assert status("sst2.lr2e-05.accuracy", finetune_run(max_train_examples=300)) == ("cut run", "--max-train-examples 300")
    assert status("v1.dev.em", squad_v1(n=1988))[0] == "cut run"
    assert status("v1.dev.windows", squad_v1(n=1988, model="models/squad-v1-minilm"))[0] == "cut run"  # the tokenizer's
    assert status("sst2.minutes", finetune_run())[0] == "shown"
    assert status("sst2.before", finetune_run())[0] == "shown"
    math_toys = {"span_toy": {"best": [2, 3]}, "run": {"argv": ["bert_part4_math.py", "--only", "toys"], "config": {}}}
    assert status("toy.span.max_any", math_toys)[0] == "in the log only"


def summary_counts(line):
    n, m, k, j, d, c, log, shown = map(int, re.findall(r"\d+", line))
    return {"reproduced": n, "judged": m, "another model": k, "not run yet": j, "differs": d, "cut run": c,
            "in the log only": log, "shown": shown}


def write_runs(folder, runs):
    os.makedirs(folder, exist_ok=True)
    for name, data in runs.items():
        with open(os.path.join(folder, name), "w") as f:
            json.dump(data, f)


def test_the_summary_counts_match_the_rows(tmp_path):
    write_runs(tmp_path, {"part4_sst2.json": finetune_run(accuracy=0.92), "part4_mrpc.json": finetune_run(
        "mrpc", 5e-5, 0.70, model="other"), "part4_squad.json": squad_v1(windows=10784), "notes.json": {"x": 1}})
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / report.REPORT_JSON).read_text())
    md = (tmp_path / report.REPORT_MD).read_text()
    counts = summary_counts(saved["summary"])
    assert f"**{saved['summary']}**" in md
    best = {}
    for r in saved["rows"]:
        best.setdefault(r["key"], []).append(r["status"])
    judged = [k for k in best if article.NUMBERS[k].kind not in report.SHOWN]
    assert counts["judged"] == len(judged) == len([e for e in article.ENTRIES if e.kind == "result"])
    assert counts["reproduced"] == sum(any(s in report.REPRODUCED for s in best[k]) for k in judged)
    assert counts["not run yet"] == sum(best[k] == ["not run yet"] for k in judged)
    assert counts["another model"] == sum("another model" in best[k] and not set(best[k]) & set(report.REPRODUCED)
                                          for k in judged) > 0
    assert counts["differs"] == 1                                 # the window count, with its reason
    assert sum(v for k, v in counts.items() if k not in ("judged", "shown")) == counts["judged"]
    assert "| sst2 dev accuracy at the end, lr 2e-05 | 0.9255 | 0.9200 | -0.0055 | within tolerance" in md


def parses(command):
    """Run the parser of the script a command names on its flags, in-process (nothing is trained or loaded)."""
    words = shlex.split(command)
    at = next(k for k, w in enumerate(words) if re.fullmatch(r"(.*/)?bert_part4_\w+\.py", w))
    module = importlib.import_module(os.path.basename(words[at])[:-3])
    parse = getattr(module, "parse_args", None) or module.build_parser().parse_args
    return parse(words[at + 1:])


def test_on_an_empty_folder_every_number_is_not_run_yet_with_a_command_its_script_accepts(tmp_path):
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / report.REPORT_JSON).read_text())
    assert {r["status"] for r in saved["rows"]} == {"not run yet"}
    assert len(saved["rows"]) == len([e for e in article.ENTRIES if e.kind != "paper"])
    commands = sorted({r["command"] for r in saved["rows"]})
    assert "python bert_part4_finetune.py mrpc 5e-5" in commands and len(commands) == 11
    for command in commands:
        parses(command)
    with pytest.raises(Fatal):
        parses("python bert_part4_squad.py --only v3")


def test_the_committed_report_is_what_the_script_builds_from_the_committed_results(tmp_path):
    copy = tmp_path / "results"
    for path in glob.glob(os.path.join(RESULTS, "**", "*.json"), recursive=True):
        if os.path.basename(path) != report.REPORT_JSON:
            target = copy / os.path.relpath(path, RESULTS)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    assert report.main(["--results-dir", str(copy)]) == 0
    for name in (report.REPORT_MD, report.REPORT_JSON):
        with open(os.path.join(RESULTS, name), encoding="utf-8") as f:
            assert (copy / name).read_text() == f.read(), f"results/{name} is stale: run python bert_part4_report.py"


def test_one_run_against_the_articles_lines(tmp_path, capsys):
    write_runs(tmp_path, {"part4_mrpc_lr2e-5.json": finetune_run("mrpc", accuracy=0.8260), "bad.json": {"x": 1}})
    assert report.main([str(tmp_path / "part4_mrpc_lr2e-5.json")]) == 0
    out = capsys.readouterr().out
    assert "mrpc dev accuracy at the end, lr 2e-05: ours 0.8260   article 0.8333   within spread" in out
    assert "MRPC 2e-5 dev accuracy, the same job run again: ours 0.8260   article 0.8186   within spread" in out
    assert not (tmp_path / report.REPORT_MD).exists()
    with pytest.raises(Fatal, match="no run block"):
        report.main([str(tmp_path / "bad.json")])
    with pytest.raises(Fatal, match="no such file"):
        report.main([str(tmp_path / "none.json")])


def test_the_toy_sections_run_here_reproduce_every_number_the_article_prints_for_them(tmp_path, monkeypatch):
    """bert_part4_math.py --only toys recomputes the toys from their inputs; the report finds each of the article's
    toy numbers among them, equal at the printed precision (the one table cell it keeps only in the log aside)."""
    import bert_part4_math
    monkeypatch.setattr("sys.argv", ["bert_part4_math.py"])          # what a results file records as its script
    assert bert_part4_math.main(["--only", "toys", "--results-dir", str(tmp_path)]) in (0, None)
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / report.REPORT_JSON).read_text())["rows"]
    toys = [r for r in rows if article.NUMBERS[r["key"]].script == article.MATH and not article.NUMBERS[r["key"]].model]
    assert len(toys) == 45
    assert {r["status"] for r in toys if r["key"] != "toy.span.max_any"} == {"same"}
    assert summary_counts(json.loads((tmp_path / report.REPORT_JSON).read_text())["summary"])["reproduced"] == 44


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
