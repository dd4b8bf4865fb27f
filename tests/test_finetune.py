"""bert_part4_finetune.py: the recipe's pieces against the library and hand values, then main() end to end."""

import json
import math
import os
import random
import statistics

import numpy as np
import pytest
import torch
from conftest import SHARED_DATA, needs_shared_data
from transformers import BertForSequenceClassification, get_linear_schedule_with_warmup

import bert_part4_finetune as ft
from part4.data import readers
from part4.models.loading import run_cli
from part4.paper import recipe
from part4.run.training_run import TrainingRun
from part4.tasks import families

# --- the schedule and the optimiser ---


def test_learning_rates_in_file_names():
    assert [recipe.lr_tag(x) for x in (2e-5, 5e-5, 2.5e-5, 1e-3, 0.1)] == ["2e-5", "5e-5", "2.5e-5", "1e-3", "1e-1"]


@pytest.mark.parametrize("total, warmup_share", [(345, 0.1), (6315, 0.1), (10, 0.0), (7, 0.5)])
def test_schedule_equals_the_librarys_linear_warmup_at_every_step(total, warmup_share):
    warmup = int(warmup_share * total)
    ours = torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=2e-5),
                                             lambda s: ft.warmup_then_linear_decay(s, warmup, total))
    lib = get_linear_schedule_with_warmup(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=2e-5), warmup, total)
    for _ in range(total + 1):
        assert ours.get_last_lr()[0] == pytest.approx(lib.get_last_lr()[0], abs=1e-15)
        ours.optimizer.step(), ours.step(), lib.optimizer.step(), lib.step()


def test_no_decay_group_is_exactly_the_biases_and_layernorm_weights(tiny_bert_dir):
    model = BertForSequenceClassification.from_pretrained(tiny_bert_dir, num_labels=2)
    decay, no_decay = ft.decay_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    expected = {n for n in names.values() if n.endswith(".bias") or "LayerNorm" in n}
    assert {names[id(p)] for p in no_decay["params"]} == expected
    assert len(decay["params"]) + len(no_decay["params"]) == len(names)
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert "classifier.weight" in {names[id(p)] for p in decay["params"]}


# --- GLUE's metrics against hand values ---

def test_metrics_against_hand_computed_values():
    assert families.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5
    # TP 2, TN 1, FP 1, FN 1: F1 = 2*2 / (3 + 3); MCC = (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6
    pred, gold = [1, 1, 0, 0, 1], [1, 0, 0, 1, 1]
    assert families.f1_positive(pred, gold) == pytest.approx(4 / 6)
    assert families.matthews_corrcoef(pred, gold) == pytest.approx(1 / 6)
    assert families.matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0          # one class predicted: 0, not NaN
    assert families.f1_positive([0, 0], [1, 0]) == 0.0
    # Pearson of (1, 2, 3) and (1, 2, 4): 3 / sqrt(2 * 42/9)
    assert families.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(2 * 42 / 9))
    # Spearman with ties: ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4) -> 4.5 / sqrt(4.5 * 5)
    assert families.average_ranks([1, 2, 2, 3]).tolist() == [1, 2.5, 2.5, 4]
    assert families.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(22.5))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    assert families.pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert families.spearman(x, y) == pytest.approx(np.corrcoef(np.argsort(np.argsort(x)), np.argsort(np.argsort(y)))[0, 1])


# --- a synthetic GLUE folder the tests write ---

GOOD, BAD = ["good", "great", "witty", "gorgeous"], ["bad", "dull", "worse"]
FILLER = ["the", "movie", "film", "plot", "acting", "is", "a", "and"]


def sst2_rows(n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        y = rng.randrange(2)
        words = [rng.choice(FILLER) for _ in range(rng.randrange(2, 8))] + [rng.choice(GOOD if y else BAD)]
        rng.shuffle(words)
        rows.append((" ".join(words), y))
    return rows


def write_sst2(folder, n_train=600, n_dev=100):
    os.makedirs(os.path.join(folder, "SST-2"), exist_ok=True)
    for split, n, seed in (("train", n_train, 0), ("dev", n_dev, 1)):
        with open(os.path.join(folder, "SST-2", f"{split}.tsv"), "w") as f:
            f.write("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in sst2_rows(n, seed)))
    return folder


def write_stsb(folder, n_train=64, n_dev=32):
    os.makedirs(os.path.join(folder, "STS-B"), exist_ok=True)
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    rng = random.Random(2)
    for split, n in (("train", n_train), ("dev", n_dev)):
        rows = [f"{k}\tg\tf\ty\t0\tnone\tnone\tthe movie is good\tthe film is {rng.choice(GOOD + BAD)}\t"
                f"{rng.uniform(0, 5):.3f}\n" for k in range(n)]
        with open(os.path.join(folder, "STS-B", f"{split}.tsv"), "w") as f:
            f.write(head + "".join(rows))
    return folder


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("glue"))
    write_stsb(write_sst2(folder))
    return folder


def run(tiny_bert_dir, glue_dir, out, extra=()):
    argv = ["sst2", "--model", tiny_bert_dir, "--data-dir", glue_dir, "--results-dir", str(out), "--device", "cpu", *extra]
    assert ft.main(argv) == 0


def test_a_tiny_model_learns_a_synthetic_task(tiny_bert_dir, glue_dir, tmp_path):
    run(tiny_bert_dir, glue_dir, tmp_path, ["1e-3", "--batch-size", "16", "--epochs", "4", "--evals", "4"])
    r = json.loads((tmp_path / "part4_sst2_lr1e-3_bs16_ep4.json").read_text())
    assert r["steps"] == 4 * math.ceil(600 / 16) == 152 and r["warmup_steps"] == 15
    assert r["final"]["dev"]["accuracy"] >= 0.95 > r["before"]["dev"]["accuracy"] + 0.3
    assert r["curve"][-1]["train_loss"] < r["curve"][0]["train_loss"]
    assert r["final"]["dev"]["correct"] == round(r["final"]["dev"]["accuracy"] * 100)


def test_main_end_to_end_json_and_log(tiny_bert_dir, glue_dir, tmp_path):
    run(tiny_bert_dir, glue_dir, tmp_path, ["--max-train-examples", "100", "--evals", "3"])
    r = json.loads((tmp_path / "part4_sst2_lr2e-5.json").read_text())
    for key in ("task", "lr", "batch_size", "epochs", "steps", "warmup_steps", "seed", "device", "before", "final",
                "curve", "seconds"):
        assert key in r
    assert (r["task"], r["lr"], r["batch_size"], r["epochs"], r["seed"]) == ("sst2", 2e-5, 32, 3, 0)
    assert r["steps"] == 3 * math.ceil(100 / 32) == 12 and r["warmup_steps"] == 1
    assert [c["step"] for c in r["curve"]] == [4, 8, 12]
    assert [c["epoch"] for c in r["curve"]] == [1, 2, 3]
    log = (tmp_path / "part4_sst2_lr2e-5.log").read_text().splitlines()
    assert log[0] == "task sst2: 100 training examples, 100 dev examples, device cpu"
    assert log[2] == "batch 32, 3 epochs = 12 steps, learning rate 2e-05, warmup 1 steps, weight decay 0.01"
    assert log[3].endswith(", article: bert-base-uncased)") and "; model " in log[3]
    final = r["final"]["dev"]
    assert log[-2].startswith(f"FINAL sst2 dev accuracy {final['accuracy']:.4f} ({final['correct']}/100), "
                              f"dev F1 {final['f1']:.4f}, training time ")
    assert "[paper, BERT-base dev: 92.7]" in log[-2]
    assert "[article (bert-base-uncased, batch 32, 3 epochs, seed 0): 0.9255 (807/872), F1 0.9279]" in log[-2]
    assert log[-1] == f"written: {tmp_path}/part4_sst2_lr2e-5.log, .json"    # the folder as given: absolute here
    assert sum(line.startswith("step ") for line in log) == 3
    try:
        import matplotlib  # noqa: F401
        assert (tmp_path / "part4_sst2_lr2e-5_curve.png").stat().st_size > 1000
    except ImportError:
        pass


def test_two_cpu_runs_with_one_seed_give_identical_losses(tiny_bert_dir, glue_dir, tmp_path):
    for k in range(2):
        run(tiny_bert_dir, glue_dir, tmp_path / str(k), ["--max-train-examples", "64", "--evals", "4", "--seed", "3"])
    a, b = (json.loads((tmp_path / str(k) / "part4_sst2_lr2e-5_seed3.json").read_text()) for k in range(2))
    assert [c["train_loss"] for c in a["curve"]] == [c["train_loss"] for c in b["curve"]]
    c = tmp_path / "other"
    run(tiny_bert_dir, glue_dir, c, ["--max-train-examples", "64", "--evals", "4", "--seed", "4"])
    other = json.loads((c / "part4_sst2_lr2e-5_seed4.json").read_text())
    assert [x["train_loss"] for x in other["curve"]] != [x["train_loss"] for x in a["curve"]]


def test_stsb_is_a_regression_with_pearson_and_spearman(tiny_bert_dir, glue_dir, tmp_path):
    assert ft.main(["stsb", "--model", tiny_bert_dir, "--data-dir", glue_dir, "--results-dir", str(tmp_path),
                    "--device", "cpu", "--evals", "2"]) == 0
    r = json.loads((tmp_path / "part4_stsb_lr2e-5.json").read_text())
    assert set(r["final"]["dev"]) == {"pearson", "spearman", "n"} and -1 <= r["final"]["dev"]["pearson"] <= 1


def test_seeds_give_mean_and_std_of_the_runs(tiny_bert_dir, glue_dir, tmp_path):
    run(tiny_bert_dir, glue_dir, tmp_path, ["--max-train-examples", "64", "--max-dev-examples", "40", "--seeds", "2",
        "--evals", "2"])
    runs = [json.loads((tmp_path / f"part4_sst2_lr2e-5_seed{s}.json").read_text()) for s in range(2)]
    summary = json.loads((tmp_path / "part4_sst2_lr2e-5_seeds2.json").read_text())["summary"]["dev.accuracy"]
    values = [r["final"]["dev"]["accuracy"] for r in runs]
    assert summary["values"] == values
    assert summary["mean"] == pytest.approx(statistics.mean(values)) and summary["std"] == pytest.approx(statistics.stdev(values))


def test_grid_glue_runs_four_learning_rates_sorted(tiny_bert_dir, glue_dir, tmp_path):
    run(tiny_bert_dir, glue_dir, tmp_path, ["--max-train-examples", "32", "--max-dev-examples", "40", "--grid", "glue",
        "--evals", "1"])
    g = json.loads((tmp_path / "part4_sst2_grid_glue.json").read_text())
    assert sorted(r["lr"] for r in g["runs"]) == [2e-5, 3e-5, 4e-5, 5e-5]
    acc = [r["final"]["dev"]["accuracy"] for r in g["runs"]]
    assert acc == sorted(acc, reverse=True)
    for lr in ("2e-5", "3e-5", "4e-5", "5e-5"):
        assert (tmp_path / f"part4_sst2_lr{lr}.json").exists()
    assert len(recipe.grid_points("a3", 32, 3)) == 18


# --- bad input: one line, non-zero exit, nothing that looks finished ---

def test_bad_inputs_are_one_line_errors(tiny_bert_dir, glue_dir, tmp_path, capsys):
    bad = tmp_path / "bad"
    for name, train in (("rows", "sentence\tlabel\nfine movie\t1\njust one field\n"),
                        ("labels", "sentence\tlabel\nfine movie\t1\nbad movie\t7\n")):
        os.makedirs(bad / name / "SST-2")
        (bad / name / "SST-2" / "train.tsv").write_text(train)
        (bad / name / "SST-2" / "dev.tsv").write_text("sentence\tlabel\nok\t1\n")
    out = tmp_path / "results"
    base = ["--model", tiny_bert_dir, "--results-dir", str(out), "--device", "cpu"]
    cases = [
        (["sts", "--data-dir", glue_dir], "unknown task 'sts'"),
        (["sst2", "abc", "--data-dir", glue_dir], "lr abc: not a number: a learning rate must be positive and below 1"),
        (["sst2", "-0.00002", "--data-dir", glue_dir], "a learning rate must be positive and below 1"),
        (["sst2", "0", "--data-dir", glue_dir], "a learning rate must be positive and below 1"),
        (["sst2", "2e-5", "--bogus", "--data-dir", glue_dir], "unrecognized arguments: --bogus (see --help)"),
        (["sst2", "nan", "--data-dir", glue_dir], "lr nan: a learning rate must be positive and below 1"),
        (["sst2", "--batch-size", "0", "--data-dir", glue_dir], "--batch-size 0: must be positive"),
        (["sst2", "--epochs", "-2", "--data-dir", glue_dir], "--epochs -2: must be positive"),
        (["sst2", "--data-dir", str(tmp_path / "nowhere")], "no such directory"),
        (["rte", "--data-dir", glue_dir], "RTE/train.tsv: no such file"),
        (["sst2", "--data-dir", str(bad / "rows")], "line 3: malformed row"),
        (["sst2", "--data-dir", str(bad / "labels")], "line 3: label '7' is not one of ['0', '1']"),
    ]
    if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        cases.append((["sst2", "--device", "mps", "--data-dir", glue_dir], "no Apple MPS device"))
    for extra, message in cases:
        argv = base + extra if "--device" not in extra else [a for a in base if a not in ("--device", "cpu")] + extra
        assert run_cli(ft.main, argv) == 2, message
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and message in err and "\n" not in err, err
    assert not out.exists()


def test_a_nan_loss_stops_with_the_step_and_writes_nothing(tiny_bert_dir, glue_dir, tmp_path, monkeypatch, capsys):
    real = TrainingRun.step_done
    calls = []

    def nan_from_step_2(training, loss):
        calls.append(1)
        return real(training, loss * float("nan") if len(calls) >= 2 else loss)
    monkeypatch.setattr(TrainingRun, "step_done", nan_from_step_2)   # evaluations come every 3 steps
    argv = ["sst2", "--model", tiny_bert_dir, "--data-dir", glue_dir, "--results-dir", str(tmp_path), "--device", "cpu",
            "--max-train-examples", "160", "--evals", "5"]
    assert run_cli(ft.main, argv) == 1
    assert "the training loss became nan at step 2 " in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json"))


def test_ctrl_c_leaves_no_finished_looking_result(tiny_bert_dir, glue_dir, tmp_path, monkeypatch, capsys):
    def interrupt(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(TrainingRun, "step_done", interrupt)
    argv = ["sst2", "--model", tiny_bert_dir, "--data-dir", glue_dir, "--results-dir", str(tmp_path), "--device", "cpu"]
    assert run_cli(ft.main, argv) == 130
    assert "interrupted" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json")) and not list(tmp_path.glob("*.log"))


# --- the real GLUE files in ../shared/data ---

@needs_shared_data
@pytest.mark.parametrize("task, split, rows", [
    ("sst2", "train", 67349), ("sst2", "dev", 872), ("mrpc", "train", 3668), ("mrpc", "dev", 408),
    ("cola", "train", 8551), ("cola", "dev", 1043), ("stsb", "train", 5749), ("stsb", "dev", 1500),
    ("rte", "train", 2490), ("rte", "dev", 277), ("wnli", "train", 635), ("wnli", "dev", 71),
    ("qnli", "dev", 5463), ("mnli", "dev_matched", 9815)])
def test_glue_readers_on_the_real_files(task, split, rows):
    examples = readers.read_split(os.path.join(SHARED_DATA, "glue_data"), task, split)
    assert len(examples) == rows
    n_texts = len(readers.GLUE[task].columns)
    assert all(len(texts) == n_texts and all(isinstance(t, str) and t for t in texts) for texts, _ in examples[:200])


@needs_shared_data
def test_real_label_counts():
    glue = os.path.join(SHARED_DATA, "glue_data")
    mrpc = [y for _, y in readers.read_split(glue, "mrpc", "dev")]
    assert sum(mrpc) == 279                       # 68% paraphrases: the article's "always yes" scores 0.684
    mnli = [y for _, y in readers.read_split(glue, "mnli", "dev_matched")]
    assert [mnli.count(k) for k in range(3)] == [3479, 3123, 3213]
    assert readers.read_split(glue, "mnli", "dev_matched")[0][0] == ["The new rights are nice enough",
                                                                "Everyone really likes the newest benefits "]


# --- GLUE's TSV layouts for the tasks not in ../shared, and the Hub path ---

MNLI_HEAD = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
             "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n")
MNLI_DEV_HEAD = MNLI_HEAD.replace("label1\t", "label1\tlabel2\tlabel3\tlabel4\tlabel5\t")


def write_mnli(folder, n=48):
    os.makedirs(os.path.join(folder, "MNLI"), exist_ok=True)
    rng = random.Random(5)
    labels = ["entailment", "neutral", "contradiction"]
    rows = lambda extra: "".join(  # noqa: E731
        f"{k}\t0\t0\tg\tp\tp\tp\tp\tthe movie is good\tthe film is {rng.choice(GOOD)}\tneutral\t{extra}{labels[k % 3]}\n"
        for k in range(n))
    with open(os.path.join(folder, "MNLI", "train.tsv"), "w") as f:
        f.write(MNLI_HEAD + rows(""))
    for name in ("dev_matched", "dev_mismatched"):
        with open(os.path.join(folder, "MNLI", f"{name}.tsv"), "w") as f:
            f.write(MNLI_DEV_HEAD + rows("a\tb\tc\td\t"))


def test_mnli_reports_matched_and_mismatched(tiny_bert_dir, tmp_path):
    glue = str(tmp_path / "glue")
    write_mnli(glue)
    examples = readers.read_split(glue, "mnli", "dev_mismatched")
    assert [y for _, y in examples[:4]] == [0, 1, 2, 0] and examples[0][0] == ["the movie is good", examples[0][0][1]]
    out = tmp_path / "r"
    assert ft.main(["mnli", "--model", tiny_bert_dir, "--data-dir", glue, "--results-dir", str(out), "--device", "cpu",
                    "--evals", "2"]) == 0
    r = json.loads((out / "part4_mnli_lr2e-5.json").read_text())
    assert set(r["final"]) == {"dev_matched", "dev_mismatched"}
    last = (out / "part4_mnli_lr2e-5.log").read_text().splitlines()[-2]
    assert "dev accuracy (matched)" in last and "dev accuracy (mismatched)" in last and "[paper, BERT-base dev: 84.4]" in last


def test_qqp_tsv_layout(tmp_path):
    os.makedirs(tmp_path / "QQP")
    (tmp_path / "QQP" / "dev.tsv").write_text("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                                              "1\t2\t3\tIs it good?\tIs it great?\t1\n4\t5\t6\tWhy?\tHow?\t0\n")
    assert readers.read_split(str(tmp_path), "qqp", "dev") == [(["Is it good?", "Is it great?"], 1), (["Why?", "How?"], 0)]


@pytest.mark.parametrize("task", sorted(readers.GLUE))
def test_hub_rows_map_to_the_same_examples(task, monkeypatch):
    """Without --data-dir the Hub dataset nyu-mll/glue is read; its columns map onto (texts, label)."""
    spec = readers.GLUE[task]
    rows = [{**{c: f"{c} {k}" for c in spec.hub_columns}, "label": k % max(2, len(spec.labels))} for k in range(4)]
    asked = []

    def fake_hub(name, config, split, flag):
        asked.append((name, config, split))
        return rows
    monkeypatch.setattr(readers, "load_hub_dataset", fake_hub)
    split = "dev_mismatched" if task == "mnli" else "dev"
    examples = readers.read_split(None, task, split)
    assert asked == [("nyu-mll/glue", task, "validation_mismatched" if task == "mnli" else "validation")]
    assert examples[1] == ([f"{c} 1" for c in spec.hub_columns], 1)


def test_grid_with_seeds_runs_every_setting_with_every_seed(tiny_bert_dir, glue_dir, tmp_path):
    run(tiny_bert_dir, glue_dir, tmp_path, ["--max-train-examples", "32", "--max-dev-examples", "20", "--grid", "glue",
        "--seeds", "2", "--evals", "1", "--epochs", "1"])
    g = json.loads((tmp_path / "part4_sst2_grid_glue_seeds2.json").read_text())
    assert sorted((r["lr"], r["name"].endswith("_seed1")) for r in g["runs"]) == sorted(
        (lr, s) for lr in (2e-5, 3e-5, 4e-5, 5e-5) for s in (False, True))
    log = (tmp_path / "part4_sst2_grid_glue_seeds2.log").read_text().splitlines()
    assert log[0] == "grid glue (paper §4.1): lr {5e-5, 4e-5, 3e-5, 2e-5} = 4 runs, x 2 seeds = 8 runs"
    means = [x for x in log if x.startswith("  batch") and "+-" in x]
    assert len(means) == 4
    for lr in (2e-5, 3e-5, 4e-5, 5e-5):
        values = [r["final"]["dev"]["accuracy"] for r in g["runs"] if r["lr"] == lr]
        line = next(x for x in means if f"lr {lr:<6g}" in x)
        assert f"{statistics.mean(values):.4f} +- {statistics.stdev(values):.4f}" in line
