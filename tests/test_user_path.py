"""What a new user met with the glue command and with bad inputs: the table shows every setting tried and what a
cut run left out, the majority class is the whole training set's and named, every bad input is one line (exit 2,
nothing written, nothing overwritten), a resumed run's log is whole, and the modules say which script to run."""

import json
import os
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from conftest import ROOT
from test_glue import read_tsv, write_glue

import bert_part4_finetune as ft
from part4.data import readers
from part4.models.loading import ALONE, run_cli
from part4.output.results_files import Log
from part4.run import run_files, summaries, training_run
from part4.run.run_files import Job
from part4.tasks import families


@pytest.fixture(scope="module")
def two_tasks(tmp_path_factory):
    """RTE and WNLI in GLUE's layout; WNLI's first 10 training rows are all label 1, the 14 after them label 0: the
    whole training set's majority is 0, the first 10 rows' is 1."""
    folder = write_glue(str(tmp_path_factory.mktemp("two")), n_train=24, n_dev=12, n_test=6)
    path = os.path.join(folder, "WNLI", "train.tsv")
    rows = read_tsv(path)
    with open(path, "w") as f:
        f.write("\t".join(rows[0]) + "\n" + "".join("\t".join(r[:-1] + ["1" if k < 10 else "0"]) + "\n"
                                                    for k, r in enumerate(rows[1:])))
    return folder


def glue_argv(model, data, out, extra=()):
    return ["glue", "--tasks", "rte,wnli", "--model", model, "--data-dir", data, "--results-dir", str(out), "--device",
            "cpu", "--batch-size", "8", "--epochs", "1", "--evals", "1", *extra]


@pytest.mark.slow
def test_the_table_shows_every_setting_the_cut_and_where_it_wrote(tiny_bert_dir, two_tasks, tmp_path, capsys):
    out, sub = tmp_path / "r", tmp_path / "sub"
    assert ft.main(glue_argv(tiny_bert_dir, two_tasks, out, ["--max-train-examples", "10", "--glue-submission",
                             str(sub)])) == 0
    name = "part4_glue_table_bs8_ep1"
    log = (out / f"{name}.log").read_text().splitlines()
    md = (out / f"{name}.md").read_text()
    table = json.loads((out / f"{name}.json").read_text())
    assert table["settings"]["lr"] == "chosen per task on dev from grid glue"          # not a rate no one gave
    assert sum(x.startswith("rte: grid glue (paper §4.1)") for x in log) == 1
    assert sum(x.startswith("wnli: grid glue (paper §4.1)") for x in log) == 1
    cut = "cut runs, not the paper's (--max-train-examples 10): RTE 10 of 24 training examples; WNLI 10 of 24 " \
          "training examples; --evals 1: 1 dev evaluation per run of those trained here (the article: about 30), the " \
          "learning curves' points; the final numbers do not depend on them"
    assert cut in log and f"**{cut}**" in md
    # every learning rate of each task, in Table 1's metric, read back from each run's own results file; a tie
    # broken by the grid's order said beside the chosen one
    for task, folder in (("rte", "RTE"), ("wnli", "WNLI")):
        row = table["tasks"][task]
        line = next(x for x in log if x.startswith(f"  {folder} "))
        tie = " (tie: the first of the grid)"
        cells = re.findall(r"(\S+) (\d+\.\d\d)(\*?)", line.split("accuracy", 1)[1])
        assert len(cells) == 4 and [c[2] for c in cells].count("*") == 1
        values = []
        for lr_text, value, star in cells:
            run = json.loads((out / f"part4_{task}_lr{lr_text}_bs8_ep1.json").read_text())
            values.append(run["final"]["dev"]["accuracy"])
            assert value == f"{100 * values[-1]:.2f}"
            assert (star == "*") == (run["lr"] == row["lr"])
        chosen = values[[c[2] for c in cells].index("*")]
        assert (tie in line) == (values.count(chosen) > 1) == row["tie"]
        assert chosen == max(values) and values.index(chosen) == [c[2] for c in cells].index("*")   # the first best
        assert f"- {folder} (accuracy): " + ", ".join(f"{lr} {v}{star}" + (tie if star and row["tie"] else "")
                                                      for lr, v, star in cells) in md
        # the majority class of the whole training file, scored on the dev file, beside the chosen score
        train = [r[-1] for r in read_tsv(os.path.join(two_tasks, folder, "train.tsv"))[1:]]
        dev = [r[-1] for r in read_tsv(os.path.join(two_tasks, folder, "dev.tsv"))[1:]]
        names = readers.GLUE[task].labels
        majority = max(names, key=lambda y: (train.count(y), -names.index(y)))          # the first of any ties
        baseline = 100 * dev.count(majority) / len(dev)
        assert row["majority"]["dev"] == pytest.approx([baseline])
        table_row = next(x for x in log if x.startswith(f"{folder} "))
        assert table_row.split()[3:6] == [f"{100 * chosen:.2f}", "-", f"{baseline:.2f}"]  # ours, random init, majority
        assert f"| {100 * chosen:.2f} | - | {baseline:.2f} |" in md
        below = f"{folder} {100 * chosen:.2f} <= {baseline:.2f}"
        assert (below in table["below_majority"]) == (100 * chosen <= baseline)
    assert row["majority"]["class"] == "not_entailment (0)"                              # WNLI's whole training file
    average = next(x for x in log if x.startswith("average of Table 1's columns"))
    assert "over the 1 column run (rte)" in average and "over all nine: 79.6]" in average
    # what it wrote, in the folders as given (absolute here), with its runs' files and the server's
    assert log[-1] == (f"written: {out}/{name}.log, .json, .md; its 8 runs: {out}/part4_<task>_*.log, .json; the GLUE "
                       f"server's files: {sub}/ (2 files), each run's test predictions in {sub}/runs/ and "
                       f"{sub}/submission.zip")
    assert "submission.zip" in md
    # WNLI: the majority class of the whole training file (0), not of the 10 rows trained on (1), and said so
    assert {r[1] for r in read_tsv(sub / "WNLI.tsv")[1:]} == {"0"}
    assert any(x.startswith("submission WNLI.tsv: 6 rows from part4_wnli_") and "majority class, not the model" in x
               for x in log)
    wnli_log = (out / "part4_wnli_lr2e-5_bs8_ep1.log").read_text()
    assert "(always the training set's majority class, not_entailment (0): dev accuracy" in wnli_log
    assert "  (cut, not the paper's: the first 10 of 24 training examples; --max-train-examples" in wnli_log


def copy_glue(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


def refused(argv, capsys):
    code = run_cli(ft.main, argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_empty_files_and_bad_test_layouts_are_one_line_before_any_training(tiny_bert_dir, two_tasks, tmp_path, capsys):
    def header_only(data, rel):
        with open(os.path.join(data, rel)) as f:
            head = f.readline()
        with open(os.path.join(data, rel), "w") as f:
            f.write(head)

    for rel in ("RTE/dev.tsv", "RTE/train.tsv"):
        data = copy_glue(two_tasks, tmp_path / rel.replace("/", "_"))
        header_only(data, rel)
        out = tmp_path / ("out_" + rel.replace("/", "_"))
        err = refused(["rte", "--model", tiny_bert_dir, "--data-dir", data, "--results-dir", str(out)], capsys)
        assert f"{rel}: no examples (a header and no rows)" in err
        assert not out.exists() or not list(out.glob("*.json"))

    out = tmp_path / "sub_runs"
    data = copy_glue(two_tasks, tmp_path / "empty_test")
    header_only(data, "WNLI/test.tsv")                      # WNLI runs after RTE: caught before RTE trains
    err = refused(glue_argv(tiny_bert_dir, data, out, ["2e-5", "--glue-submission", str(tmp_path / "s1")]), capsys)
    assert "WNLI/test.tsv: no test examples (a header and no rows)" in err and not list(out.glob("*.json"))

    data = copy_glue(two_tasks, tmp_path / "no_tests")
    os.remove(os.path.join(data, "RTE", "test.tsv"))
    os.remove(os.path.join(data, "WNLI", "test.tsv"))
    err = refused(glue_argv(tiny_bert_dir, data, out, ["2e-5", "--glue-submission", str(tmp_path / "s2")]), capsys)
    assert "2 inputs cannot be used" in err and "RTE/test.tsv: no such file" in err and "WNLI/test.tsv: no such file" in err

    for bad, expected in ((lambda h: h + ["label"], "has a label column 'label'"),
                          (lambda h: ["id"] + h[1:], "no column 'index'")):
        data = copy_glue(two_tasks, tmp_path / f"layout_{len(expected)}")
        rows = read_tsv(os.path.join(data, "RTE", "test.tsv"))
        with open(os.path.join(data, "RTE", "test.tsv"), "w") as f:
            f.write("\t".join(bad(rows[0])) + "\n" + "".join("\t".join(r + ["x"]) + "\n" for r in rows[1:]))
        err = refused(glue_argv(tiny_bert_dir, data, out, ["2e-5", "--glue-submission", str(tmp_path / "s3")]), capsys)
        assert "RTE/test.tsv" in err and expected in err and not list(out.glob("*.json"))


def test_a_results_file_that_is_not_json_is_named_and_left_as_it_is(tiny_bert_dir, two_tasks, tmp_path, capsys):
    out = tmp_path / "r"
    out.mkdir()
    conflicted = "<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> other\n"
    one_run = ["rte", "--model", tiny_bert_dir, "--data-dir", two_tasks, "--results-dir", str(out), "--batch-size", "8",
               "--epochs", "1"]
    for name, argv in (("part4_rte_lr2e-5_bs8_ep1.json", one_run),
                       ("part4_glue_table_lr2e-5_bs8_ep1.json", glue_argv(tiny_bert_dir, two_tasks, out, ["2e-5"]))):
        (out / name).write_text(conflicted)
        err = refused(argv, capsys)
        assert name in err and "not a results file (not JSON" in err and "left as it is" in err
        assert (out / name).read_text() == conflicted
        (out / name).unlink()


def test_resumed_losses_are_on_the_runs_device(tiny_bert_dir, tmp_path):
    """The restored losses sit beside the ones to come (torch.stack of a meta and a cpu tensor raises, as cuda and
    cpu would): the meta device stands in for a GPU."""
    from transformers import BertForSequenceClassification
    model = BertForSequenceClassification.from_pretrained(tiny_bert_dir, num_labels=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    path = str(tmp_path / "x.checkpoint")
    saving = run_files.Checkpoint(path, {"task": "t"}, ALONE, torch.device("cpu"))
    saving.write_checkpoint(model, opt, sched, {"settings": {"task": "t"}, "step": 2, "lines": ["a line"]},
                losses=[torch.tensor(0.5), torch.tensor(0.25)])
    meta = torch.device("meta")
    checkpoint = run_files.Checkpoint(path, {"task": "t"}, ALONE, meta)
    log = Log("x", str(tmp_path), quiet=True)
    state, losses = checkpoint.load_into(model, opt, sched, log=log, steps=10)
    assert state["step"] == 2 and [x.device for x in losses] == [meta, meta]
    assert log.lines[0] == "a line" and log.lines[1].startswith("(resumed from ")
    assert torch.load(path, weights_only=True)["processes"][0]["losses"] == [0.5, 0.25]   # this process's, unsummed
    losses.append(torch.tensor(0.125, device=meta))
    assert torch.stack(losses).shape == (3,)                        # raised before: cpu beside meta


def test_the_articles_numbers_only_beside_the_articles_setting():
    """grid_table() and the FINAL line ask the one predicate: batch 32, 3 epochs, seed 0, pre-trained weights."""
    family = families.FAMILIES["sst2"]("sst2", 128)
    result = {"name": "n", "lr": 2e-5, "batch_size": 32, "epochs": 3, "seed": 0, "seconds": 1.0, "process": 0,
              "final": {"dev": {"accuracy": 0.5, "f1": 0.5, "n": 2, "correct": 1}}, "settings": {"dev_evaluations": 30}}
    for init, shown in (("pretrained", True), ("random", False)):
        log = Log("x", "unused", quiet=True)
        config = SimpleNamespace(task="sst2", settings=SimpleNamespace(grid="glue", seeds=None))
        summaries.grid_table(config, family, [result], log, labels=summaries.article_numbers("sst2", [result], init))
        assert ("[article (bert-base-uncased" in log.lines[-1]) == shown
        job = Job(lr=2e-5, batch_size=32, epochs=3, seed=0, dev_evaluations=30)
        final = training_run.final_line("sst2", family, job, result["final"], 60.0, init)
        assert ("[article (bert-base-uncased" in final) == shown
    assert not run_files.article_setting(Job(lr=2e-5, batch_size=32, epochs=3, seed=1, dev_evaluations=30), "pretrained")
    assert run_files.article_setting(Job(lr=5e-5, batch_size=32, epochs=3, seed=0, dev_evaluations=30), "pretrained")


def test_the_best_seen_during_training_is_in_table_1s_metric():
    """CoLA: accuracy peaks at step 1, MCC at step 2: the line names step 2 (MCC), as Table 1 would rank them."""
    curve = [{"step": 1, "dev": {"dev": {"accuracy": 0.70, "mcc": 0.00}}},
             {"step": 2, "dev": {"dev": {"accuracy": 0.60, "mcc": 0.20}}},
             {"step": 3, "dev": {"dev": {"accuracy": 0.65, "mcc": 0.10}}}]
    assert training_run.best_seen(curve, families.FAMILIES["cola"]("cola", 128))["step"] == 2
    stsb = [{"step": 1, "dev": {"dev": {"pearson": 0.9, "spearman": 0.1}}},
            {"step": 2, "dev": {"dev": {"pearson": 0.5, "spearman": 0.6}}}]
    assert training_run.best_seen(stsb, families.FAMILIES["stsb"]("stsb", 128))["step"] == 2


@pytest.mark.parametrize("module", ["run.summaries", "run.command", "run.run_files", "models.loading",
                                    "command_line.fine_tune_settings", "paper.recipe", "output.results_files",
                                    "command_line.declarations"])
@pytest.mark.slow
def test_a_room_run_as_a_module_does_nothing(module):
    p = subprocess.run([sys.executable, "-m", f"part4.{module}", "--help"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


@pytest.mark.slow
def test_runs_found_done_are_reported_in_their_turn(tiny_bert_dir, two_tasks, tmp_path, capsys):
    """A grid run again after one of its runs was lost: the runs found done are said in the grid's order, around
    the one that trains again, not after it."""
    out = tmp_path / "r"
    argv = ["rte", "--grid", "glue", "--model", tiny_bert_dir, "--data-dir", two_tasks, "--results-dir", str(out),
            "--batch-size", "8", "--epochs", "1", "--evals", "1"]
    assert ft.main(argv) == 0
    (out / "part4_rte_lr3e-5_bs8_ep1.json").unlink()
    capsys.readouterr()
    assert ft.main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    said = [k for k, x in enumerate(printed) if x.startswith("run part4_rte_lr") and x.endswith(": skipped")]
    trained = next(k for k, x in enumerate(printed) if x.startswith("task rte:"))
    assert [printed[k].split()[1].rstrip(":") for k in said] == ["part4_rte_lr5e-5_bs8_ep1", "part4_rte_lr4e-5_bs8_ep1",
                                                    "part4_rte_lr2e-5_bs8_ep1"]
    assert said[1] < trained < said[2]
