"""The GLUE row in one command (bert_part4_finetune.py glue, part4/run/summaries.py): the choice of learning rate, the
table and its average, the test-server files, random-weight runs, and the faults a new user met (each test here
failed on the code before this command existed)."""

import json
import os
import random
import subprocess
import sys
import types
import zipfile
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import ROOT, SHARED_DATA, needs_shared_data
from transformers import AutoTokenizer, BertForSequenceClassification

import bert_part4_finetune as ft
from part4.command_line import fine_tune_settings
from part4.command_line.declarations import Fatal
from part4.data import readers
from part4.models.loading import run_cli
from part4.output.results_files import Log, fmt
from part4.paper import article, recipe
from part4.run import command, summaries, training_run
from part4.run.run_files import Job
from part4.tasks import families

WORDS = ["good", "great", "witty", "bad", "dull", "worse", "the", "movie", "film", "plot", "is", "a"]


def write_glue(folder, n_train=24, n_dev=12, n_test=10, seed=0, skip=()):
    """Every GLUE task in GLUE's own layout (train/dev/test TSV files, MNLI's matched and mismatched, the diagnostic
    set), with GLUE's headers; random words and labels: the files, not the learning, are under test."""
    rng = random.Random(seed)

    def sent():
        return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 8)))

    def pair(k):
        return f"{sent()}\t{sent()}"

    spec = {
        "CoLA": (None, lambda k, y: f"src\t{y}\t*\t{sent()}", ("0", "1"), "index\tsentence", lambda k: f"{k}\t{sent()}"),
        "SST-2": ("sentence\tlabel", lambda k, y: f"{sent()}\t{y}", ("0", "1"), "index\tsentence",
                  lambda k: f"{k}\t{sent()}"),
        "MRPC": ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", lambda k, y: f"{y}\t{k}\t{k + 1}\t{pair(k)}", ("0", "1"),
                 "index\t#1 ID\t#2 ID\t#1 String\t#2 String", lambda k: f"{k}\t{k}\t{k + 1}\t{pair(k)}"),
        "STS-B": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
                  lambda k, y: f"{k}\tg\tf\ty\t0\tn\tn\t{pair(k)}\t{rng.uniform(0, 5):.3f}", None,
                  "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2",
                  lambda k: f"{k}\tg\tf\ty\t0\tn\tn\t{pair(k)}"),
        "QQP": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", lambda k, y: f"{k}\t1\t2\t{pair(k)}\t{y}",
                ("0", "1"), "id\tquestion1\tquestion2", lambda k: f"{900 + k}\t{pair(k)}"),
        "MNLI": ("index\tsentence1\tsentence2\tgold_label", lambda k, y: f"{k}\t{pair(k)}\t{y}",
                 ("entailment", "neutral", "contradiction"), "index\tsentence1\tsentence2", lambda k: f"{k}\t{pair(k)}"),
        "QNLI": ("index\tquestion\tsentence\tlabel", lambda k, y: f"{k}\t{pair(k)}\t{y}", ("entailment", "not_entailment"),
                 "index\tquestion\tsentence", lambda k: f"{k}\t{pair(k)}"),
        "RTE": ("index\tsentence1\tsentence2\tlabel", lambda k, y: f"{k}\t{pair(k)}\t{y}", ("entailment", "not_entailment"),
                "index\tsentence1\tsentence2", lambda k: f"{k}\t{pair(k)}"),
        "WNLI": ("index\tsentence1\tsentence2\tlabel", lambda k, y: f"{k}\t{pair(k)}\t{y}", ("0", "1"),
                 "index\tsentence1\tsentence2", lambda k: f"{k}\t{pair(k)}"),
    }

    def write(path, lines):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
    for name, (head, row, labels, test_head, test_row) in spec.items():
        if name in skip:
            continue
        devs = ["dev_matched", "dev_mismatched"] if name == "MNLI" else ["dev"]
        for split, n in [("train", n_train)] + [(d, n_dev) for d in devs]:
            rows = [row(k, rng.choice(labels) if labels else None) for k in range(n)]
            write(os.path.join(folder, name, split + ".tsv"), ([head] if head else []) + rows)
        for split in (["test_matched", "test_mismatched"] if name == "MNLI" else ["test"]):
            write(os.path.join(folder, name, split + ".tsv"), [test_head] + [test_row(k) for k in range(n_test)])
    write(os.path.join(folder, "diagnostic", "diagnostic.tsv"),
          ["index\tsentence1\tsentence2"] + [f"{k}\t{pair(k)}" for k in range(n_test + 3)])
    return folder


@pytest.fixture(scope="module")
def glue_data(tmp_path_factory):
    return write_glue(str(tmp_path_factory.mktemp("glue_all")))


# An MRPC run of the script, as a user runs it; then, in the same process, SQuAD's family made as FAMILIES makes it.
MRPC_THEN_SQUAD = ("import runpy, sys\n"
                   "sys.argv = ['bert_part4_finetune.py'] + sys.argv[1:]\n"
                   "try:\n"
                   "    runpy.run_path('bert_part4_finetune.py', run_name='__main__')\n"
                   "except SystemExit as e:\n"
                   "    print('exit', e.code, sorted(m for m in sys.modules if 'squad' in m))\n"
                   "from part4.tasks import families\n"
                   "family = families.FAMILIES['squad']('squad', 64, 32)\n"
                   "print(type(family).__module__, sorted(m for m in sys.modules if 'squad' in m))\n")


@pytest.mark.slow
def test_an_mrpc_run_imports_nothing_of_squad(tiny_bert_dir, glue_data, tmp_path):
    """SQuAD's family lives with SQuAD (part4/tasks/squad_spans.py) and FAMILIES makes it for a SQuAD task only: an
    MRPC run ends with no module of SQuAD's imported (its windows, span search and official metric), and the same
    process, asked for SQuAD's family, then imports them."""
    out = subprocess.run([sys.executable, "-c", MRPC_THEN_SQUAD, "mrpc", "2e-5", "--model", tiny_bert_dir, "--data-dir",
                          glue_data, "--max-train-examples", "8", "--max-dev-examples", "8", "--device", "cpu",
                          "--results-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    ran, made = out.stdout.strip().splitlines()[-2:]
    assert ran == "exit 0 []", out.stdout[-2000:] + out.stderr[-2000:]
    assert (tmp_path / "part4_mrpc_lr2e-5.json").is_file()
    assert made == "part4.tasks.squad_spans ['part4.tasks.squad_metric', 'part4.tasks.squad_spans']"


def config_for(argv):
    settings = fine_tune_settings.parse(argv)
    return command.task_inputs(settings, settings.tasks[0])[0]


def glue_cmd(model, data, out, extra=()):
    return ["glue", "--model", model, "--data-dir", data, "--results-dir", str(out), "--device", "cpu",
            "--batch-size", "8", "--epochs", "1", "--evals", "1", *extra]


def read_tsv(path):
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f]


# --- choosing the learning rate on dev in Table 1's metric ---

def fake_run(lr, seed, final, task="cola"):
    final = {dev: {**f, "n": 100, "correct": round(100 * f.get("accuracy", 0))} for dev, f in final.items()}
    return {"name": f"part4_{task}_lr{lr}_seed{seed}", "lr": lr, "batch_size": 32, "epochs": 3, "seed": seed,
            "final": final, "settings": {"task": task, "dev_evaluations": 30}, "test_predictions": []}


def test_selection_picks_the_best_mean_in_the_tasks_own_metric(tmp_path):
    """CoLA: lr 5e-5 has the best accuracy, 3e-5 the best MCC over two seeds, 2e-5 the best single seed: 3e-5 wins."""
    family = families.FAMILIES["cola"]("cola", 128)
    config = config_for(["cola", "--results-dir", str(tmp_path)])
    dev = {5e-5: [(0.80, 0.00), (0.80, 0.00)], 3e-5: [(0.70, 0.30), (0.72, 0.20)], 2e-5: [(0.60, 0.40), (0.60, 0.00)]}
    results = [fake_run(lr, s, {"dev": {"accuracy": a, "mcc": m}}) for lr, runs in dev.items() for s, (a, m) in enumerate(runs)]
    chosen = summaries.choose(results, family, config)
    assert chosen["lr"] == 3e-5 and chosen["metric"] == "mcc"
    assert chosen["dev"] == pytest.approx([25.0])                         # the mean over the seeds, in percent
    assert chosen["submitted"]["seed"] == 0                               # the better seed's test predictions
    assert {s["lr"]: round(s["dev"], 6) for s in chosen["settings"]} == {5e-5: 0.0, 3e-5: 25.0, 2e-5: 20.0}
    stsb = families.FAMILIES["stsb"]("stsb", 128)
    results = [fake_run(lr, 0, {"dev": {"pearson": p, "spearman": s}}, "stsb") for lr, p, s in
               ((5e-5, 0.9, 0.5), (2e-5, 0.8, 0.7))]
    assert summaries.choose(results, stsb, config)["lr"] == 2e-5


def test_a_tie_broken_by_the_grids_order_is_said(tmp_path):
    """Two learning rates with the same dev score: the first of the grid is chosen, and the table says why."""
    family = families.FAMILIES["cola"]("cola", 128)
    config = config_for(["cola", "--results-dir", str(tmp_path)])
    table = types.SimpleNamespace(grid="glue", seeds=None)
    for mcc, tie in (((0.3, 0.3, 0.1), True), ((0.2, 0.3, 0.3), True), ((0.3, 0.2, 0.1), False)):
        results = [fake_run(lr, 0, {"dev": {"accuracy": 0.5, "mcc": m}}) for lr, m in zip((5e-5, 4e-5, 3e-5), mcc)]
        row = summaries.choose(results, family, config)
        assert row["lr"] == (5e-5, 4e-5, 3e-5)[mcc.index(max(mcc))] and row["tie"] is tie
        _, (_, _, cells) = summaries.every_setting({"cola": row}, table)
        note = [c for c in cells if "tie" in c]
        expected = f"{recipe.lr_tag(row['lr'])} {100 * max(mcc):.2f}* (tie: the first of the grid)"
        assert note == ([expected] if tie else [])


def test_the_majority_class_is_scored_as_the_runs_are():
    """Always the majority class, in Table 1's metric: accuracy = its share of dev; F1 of label 1 = 2p / (1 + p) when
    the class is 1 (precision p, recall 1), 0 when it is 0; MCC 0; one per dev set (MNLI); none for STS-B's scores."""
    dev = {"dev": {"labels": [1, 1, 1, 0, 0, 1, 0, 1]}}                                  # p = 5/8
    mrpc, cola, rte = (families.FAMILIES[t](t, 128) for t in ("mrpc", "cola", "rte"))
    assert mrpc.majority_scores(1, dev) == pytest.approx([100 * 2 * 5 / 8 / (1 + 5 / 8)])
    assert mrpc.majority_scores(0, dev) == [0.0] and cola.majority_scores(1, dev) == [0.0]
    assert rte.majority_scores(0, dev) == pytest.approx([100 * 3 / 8])
    mnli = families.FAMILIES["mnli"]("mnli", 128)
    two = {"dev_matched": {"labels": [2, 2, 0, 1]}, "dev_mismatched": {"labels": [2, 0, 0, 0, 1]}}
    assert mnli.majority_scores(2, two) == pytest.approx([50.0, 20.0])
    assert families.FAMILIES["stsb"]("stsb", 128).majority_scores(None, dev) is None
    assert readers.label_name("wnli", 0) == "not_entailment (0)" and readers.label_name("rte", 1) == "not_entailment"
    assert readers.label_name("mrpc", 1) == "equivalent (1)"


def test_the_grid_is_ranked_by_table_1s_metric(tmp_path):
    """The fault a new user met: CoLA's grid put MCC 0.0000 above MCC 0.0727 because it sorted by accuracy."""
    for task, finals, best in (
            ("cola", [{"accuracy": 0.69, "mcc": 0.0}, {"accuracy": 0.68, "mcc": 0.0727}], 1),
            ("mrpc", [{"accuracy": 0.70, "f1": 0.60}, {"accuracy": 0.68, "f1": 0.81}], 1),
            ("stsb", [{"pearson": 0.80, "spearman": 0.60}, {"pearson": 0.70, "spearman": 0.75}], 1)):
        family = families.FAMILIES[task](task, 128)
        results = [{**fake_run(lr, 0, {"dev": f}, task), "seconds": 1.0, "process": 0}
                   for lr, f in zip((5e-5, 3e-5), finals)]
        report = Log("x", str(tmp_path), quiet=True)
        config = SimpleNamespace(task=task, settings=SimpleNamespace(grid="glue", seeds=None))
        ranked = summaries.grid_table(config, family, results, report)["runs"]
        assert ranked[0]["lr"] == (5e-5, 3e-5)[best], task
        assert f"sorted by dev {family.selection_name}" in report.lines[0]


def test_every_family_ranks_runs_by_one_metric_under_one_name():
    """The score runs are selected by (the grid's order, the best seen, the learning curve, the GLUE table) is one
    concept: each family's `selection` is its `selection_metric` on the first dev set, named `selection_name`; Table
    1's metric for GLUE (paper §4.1), accuracy for SWAG, F1 for SQuAD."""
    paper = {"cola": "mcc", "sst2": "accuracy", "mrpc": "f1", "stsb": "spearman", "qqp": "f1", "mnli": "accuracy",
             "qnli": "accuracy", "rte": "accuracy", "wnli": "accuracy", "swag": "accuracy", "squad": "f1",
             "squad_v2": "f1"}
    assert set(paper) == set(families.FAMILIES)
    names = ("accuracy", "f1", "mcc", "pearson", "spearman", "em")
    scores = {"dev_matched": {m: 0.1 * (k + 1) for k, m in enumerate(names)}, "dev_mismatched": dict.fromkeys(names, 9.0)}
    for task, metric in paper.items():
        family = families.FAMILIES[task](task, 128, **({"stride": 64} if task.startswith("squad") else {}))
        assert family.selection_metric == metric, task
        assert family.selection(scores) == scores["dev_matched"][metric], task
        assert family.selection_name == families.METRIC_NAMES[metric], task
        assert not hasattr(family, "headline"), task                   # no second name for it


def test_one_score_format_for_every_log_and_table():
    """The GLUE table and SQuAD's HasAns/NoAns lines print scores through one function: two decimals, several
    joined by '/', a missing one as the caller's mark."""
    assert fmt(88.5) == "88.50" and fmt(np.float64(2 / 3)) == "0.67"
    assert fmt([84.1, 83.4]) == "84.10/83.40" and fmt([47.2924]) == "47.29"
    assert fmt(None) == "n/a" and fmt(None, "-") == "-" and fmt([], "-") == "-"


def test_the_average_leaves_wnli_out_and_is_table_1s():
    """Table 1's BERT-base average 79.6 is the mean of its nine columns (MNLI matched and mismatched apart)."""
    assert round(summaries.average(list(summaries.paper_columns().values())), 1) == article.PAPER_AVERAGE == 79.6
    assert "wnli" not in summaries.paper_columns() and len(summaries.paper_columns()) == 9
    rows = {t: {"dev": [50.0, 40.0] if t == "mnli" else [60.0]} for t in readers.GLUE}
    rows["wnli"] = {"dev": [0.0]}
    cols = summaries.columns(rows)
    assert "wnli" not in cols and summaries.average(list(cols.values())) == pytest.approx((50 + 40 + 7 * 60) / 9)


# --- the command end to end: every task, the table, the server's files ---

def test_glue_writes_the_table_and_the_servers_files(tiny_bert_dir, glue_data, tmp_path):
    sub = tmp_path / "submission"
    assert ft.main(glue_cmd(tiny_bert_dir, glue_data, tmp_path, ["1e-3", "--glue-submission", str(sub)])) == 0
    table = json.loads((tmp_path / "part4_glue_table_lr1e-3_bs8_ep1.json").read_text())
    assert all(table["tasks"][t]["run"] for t in readers.GLUE) and table["average"]["ours"] is not None
    for t, row in table["tasks"].items():
        run = json.loads((tmp_path / f"{row['runs'][0]}.json").read_text())
        metric = readers.GLUE[t].selection_metric
        assert row["dev"] == pytest.approx([100 * s[metric] for s in run["final"].values()])
        assert row["paper_test"] == families.paper_test_text(t)
    md = (tmp_path / "part4_glue_table_lr1e-3_bs8_ep1.md").read_text()
    assert "| MRPC | F1 | 1e-3 |" in md and "| CoLA | MCC |" in md and "| STS-B | Spearman |" in md
    log = (tmp_path / "part4_glue_table_lr1e-3_bs8_ep1.log").read_text()
    assert "not the same quantity" in log and "the paper's QNLI is v1" in log and "GLUE's QNLI is v2" in log
    servers = {f for t in readers.GLUE.values() for _, f, _ in t.tests}
    assert servers == {"CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv", "MNLI-mm.tsv",
                       "QNLI.tsv", "RTE.tsv", "WNLI.tsv", "AX.tsv"}
    inputs = {"CoLA.tsv": "CoLA/test.tsv", "SST-2.tsv": "SST-2/test.tsv", "MRPC.tsv": "MRPC/test.tsv",
              "STS-B.tsv": "STS-B/test.tsv", "QQP.tsv": "QQP/test.tsv", "MNLI-m.tsv": "MNLI/test_matched.tsv",
              "MNLI-mm.tsv": "MNLI/test_mismatched.tsv", "QNLI.tsv": "QNLI/test.tsv", "RTE.tsv": "RTE/test.tsv",
              "WNLI.tsv": "WNLI/test.tsv", "AX.tsv": "diagnostic/diagnostic.tsv"}
    allowed = {"CoLA.tsv": {"0", "1"}, "SST-2.tsv": {"0", "1"}, "MRPC.tsv": {"0", "1"}, "QQP.tsv": {"0", "1"},
               "WNLI.tsv": {"0", "1"}, "MNLI-m.tsv": {"entailment", "neutral", "contradiction"},
               "MNLI-mm.tsv": {"entailment", "neutral", "contradiction"}, "AX.tsv": {"entailment", "neutral", "contradiction"},
               "QNLI.tsv": {"entailment", "not_entailment"}, "RTE.tsv": {"entailment", "not_entailment"}}
    for name, source in inputs.items():
        rows, given = read_tsv(sub / name), read_tsv(os.path.join(glue_data, source))
        assert rows[0] == ["index", "prediction"], name
        assert [r[0] for r in rows[1:]] == [r[0] for r in given[1:]], name    # every index, in order (QQP: id)
        if name == "STS-B.tsv":
            assert all(0 <= float(r[1]) <= 5 and len(r[1].split(".")[1]) == 3 for r in rows[1:])
        else:
            assert {r[1] for r in rows[1:]} <= allowed[name], name
    wnli_train = [r[-1] for r in read_tsv(os.path.join(glue_data, "WNLI", "train.tsv"))[1:]]
    majority = max(("0", "1"), key=lambda y: (wnli_train.count(y), y == "0"))
    assert {r[1] for r in read_tsv(sub / "WNLI.tsv")[1:]} == {majority}    # the paper's WNLI submission
    with zipfile.ZipFile(sub / "submission.zip") as z:
        assert sorted(z.namelist()) == sorted(servers)
        assert z.read("RTE.tsv").decode() == (sub / "RTE.tsv").read_text()
    assert "WARNING: the GLUE server's test set has 1063 rows" in log          # a toy test set is not the full one


def test_the_servers_zip_is_whole_or_left_as_it_was(tmp_path, monkeypatch):
    """submission.zip is written as every results file is (a temp file beside it, then renamed): a failure while
    writing it leaves the earlier zip as it was and no temp file beside it."""
    folder = tmp_path / "sub"
    (folder / "runs" / "part4_rte_x").mkdir(parents=True)
    text = "index\tprediction\n0\tentailment\n1\tnot_entailment\n"
    (folder / "runs" / "part4_rte_x" / "RTE.tsv").write_text(text)
    rows = {"rte": {"submitted": {"name": "part4_rte_x", "test_predictions": ["part4_rte_x/RTE.tsv"]}}}
    report = Log("x", str(tmp_path), quiet=True)
    out = summaries.write_submission(str(folder), rows, report)
    assert out["files"]["RTE.tsv"]["rows"] == 2 and len(out["missing"]) == 10
    with zipfile.ZipFile(folder / "submission.zip") as z:
        assert z.namelist() == ["RTE.tsv"] and z.read("RTE.tsv").decode() == text
    before = (folder / "submission.zip").read_bytes()

    def broken(self, *args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(zipfile.ZipFile, "write", broken)
    with pytest.raises(Fatal, match=r"submission.zip: not written \(disk full\); nothing half-written is left$"):
        summaries.write_submission(str(folder), rows, report)
    assert sorted(os.listdir(folder)) == ["RTE.tsv", "runs", "submission.zip"]
    assert (folder / "submission.zip").read_bytes() == before


def test_the_submitted_labels_are_the_models_classes_by_name(tiny_bert_dir, glue_data, tmp_path):
    """MNLI-m.tsv holds, for every test row, the name of the class the MNLI model scores highest."""
    sub = tmp_path / "sub"
    assert ft.main(glue_cmd(tiny_bert_dir, glue_data, tmp_path, ["1e-3", "--tasks", "mnli", "--glue-submission",
                            str(sub), "--save-model", str(tmp_path / "m")])) == 0
    model = BertForSequenceClassification.from_pretrained(str(tmp_path / "m" / "part4_mnli_lr1e-3_bs8_ep1")).eval()
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "m" / "part4_mnli_lr1e-3_bs8_ep1"))
    test = read_tsv(os.path.join(glue_data, "MNLI", "test_matched.tsv"))[1:]
    import torch
    with torch.no_grad():
        logits = model(**tok([r[1] for r in test], [r[2] for r in test], padding=True, return_tensors="pt")).logits
    names = ["entailment", "neutral", "contradiction"]
    assert [r[1] for r in read_tsv(sub / "MNLI-m.tsv")[1:]] == [names[k] for k in logits.argmax(-1).tolist()]


def test_prediction_strings_map_classes_by_name_and_clip_stsb():
    logits, GLUE = np.array([[0.1, 0.2, 3.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.5]]), readers.GLUE
    assert families.prediction_strings(logits, GLUE["mnli"]) == ["contradiction", "entailment", "neutral"]
    assert families.prediction_strings(logits[:, :2], GLUE["rte"]) == ["not_entailment", "entailment", "not_entailment"]
    assert families.prediction_strings(np.array([[-1.0], [2.3456], [7.0]]), GLUE["stsb"]) == ["0.000", "2.346", "5.000"]
    assert families.prediction_strings(logits[:, :2], GLUE["wnli"], majority=0) == ["0", "0", "0"]


def test_hub_labels_are_read_by_name_not_by_index(monkeypatch):
    """A Hub dataset whose label order differs from ours (GLUE's run_classifier.py orders MNLI contradiction,
    entailment, neutral) is still read right: by the names its features give."""
    class Names:
        names = ["contradiction", "entailment", "neutral"]

    class Rows(list):
        features = {"label": Names()}
    rows = Rows([{"premise": "p", "hypothesis": "h", "label": k} for k in range(3)])
    monkeypatch.setattr(readers, "load_hub_dataset", lambda *a: rows)
    got = [y for _, y in readers.read_split(None, "mnli", "dev_matched")]
    assert [readers.GLUE["mnli"].labels[y] for y in got] == ["contradiction", "entailment", "neutral"]
    Names.names = ["entailment", "maybe"]
    with pytest.raises(Fatal, match="unknown label name"):
        readers.read_split(None, "rte", "dev")


def test_a_task_without_files_is_named_as_not_run(tiny_bert_dir, tmp_path):
    data = write_glue(str(tmp_path / "data"), skip=("MNLI", "QQP", "QNLI", "SST-2", "CoLA", "STS-B"))
    assert ft.main(glue_cmd(tiny_bert_dir, data, tmp_path / "out", ["1e-3"])) == 0
    log = (tmp_path / "out" / "part4_glue_table_lr1e-3_bs8_ep1.log").read_text().splitlines()
    assert log[0].startswith("GLUE (paper §4.1): 3 of 9 tasks run (mrpc, rte, wnli); not run: ")
    assert "mnli (no MNLI/train.tsv, MNLI/dev_matched.tsv in --data-dir)" in log[0]
    table = json.loads((tmp_path / "out" / "part4_glue_table_lr1e-3_bs8_ep1.json").read_text())
    assert not table["tasks"]["qqp"]["run"] and table["average"]["ours"] is None
    assert table["average"]["columns_run"] == ["mrpc", "rte"]
    assert table["average"]["paper_on_columns_run"] == pytest.approx((88.9 + 66.4) / 2)
    assert any(line.startswith("QQP    not run: no QQP/train.tsv") for line in log)


def test_the_grid_is_the_default_and_done_runs_are_not_run_again(tiny_bert_dir, glue_data, tmp_path):
    argv = glue_cmd(tiny_bert_dir, glue_data, tmp_path, ["--tasks", "rte,wnli"])
    assert ft.main(argv) == 0
    runs = sorted(tmp_path.glob("part4_rte_lr*.json"))
    assert [p.name for p in runs] == [f"part4_rte_lr{lr}_bs8_ep1.json" for lr in ("2e-5", "3e-5", "4e-5", "5e-5")]
    table = json.loads((tmp_path / "part4_glue_table_bs8_ep1.json").read_text())["tasks"]["rte"]
    scores = {s["lr"]: s["dev"] for s in table["settings"]}
    assert table["dev"] == [max(scores.values())] and scores[table["lr"]] == max(scores.values())
    stamps = [p.stat().st_mtime_ns for p in runs]
    assert ft.main(argv) == 0
    assert [p.stat().st_mtime_ns for p in runs] == stamps


def test_random_init_runs_the_same_architecture_from_random_weights(tiny_bert_dir, glue_data, tmp_path):
    family = families.FAMILIES["rte"]("rte", 128)
    pre = ft.new_model(family, tiny_bert_dir, "pretrained", "new")
    rnd = ft.new_model(family, tiny_bert_dir, "random", "new")
    saved = BertForSequenceClassification.from_pretrained(tiny_bert_dir, num_labels=2)
    for name, p in saved.bert.named_parameters():
        assert p.equal(dict(pre.bert.named_parameters())[name]), name
    assert not saved.bert.embeddings.word_embeddings.weight.equal(rnd.bert.embeddings.word_embeddings.weight)
    assert rnd.config.num_hidden_layers == saved.config.num_hidden_layers and rnd.num_labels == 2
    glue_argv = glue_cmd(tiny_bert_dir, glue_data, tmp_path, ["1e-3", "--tasks", "rte"])
    random_argv = ["glue", "1e-3", "--tasks", "rte", "--model", tiny_bert_dir, "--data-dir", glue_data, "--results-dir",
                   str(tmp_path), "--device", "cpu", "--batch-size", "8", "--epochs", "1", "--evals", "2", "--init", "random"]
    assert ft.main(random_argv) == 0                                        # other evaluations: still shown beside
    r = json.loads((tmp_path / "part4_rte_lr1e-3_bs8_ep1_random-init.json").read_text())
    assert r["settings"]["init"] == "random" and r["weights"] is None          # no weights loaded, no head to keep
    assert "random weights (--init random)" in (tmp_path / "part4_rte_lr1e-3_bs8_ep1_random-init.log").read_text()
    assert ft.main(glue_argv) == 0                                          # the pre-trained table shows it beside
    row = json.loads((tmp_path / "part4_glue_table_lr1e-3_bs8_ep1.json").read_text())["tasks"]["rte"]
    assert row["other_init"] == {"init": "random", "dev": [100 * r["final"]["dev"]["accuracy"]]}
    pre_run = json.loads((tmp_path / "part4_rte_lr1e-3_bs8_ep1.json").read_text())
    assert "init" not in pre_run["settings"]                                # a pre-trained run's JSON is as before


# --- the faults a new user met ---

def test_a_cut_run_does_not_overwrite_a_full_run(tiny_bert_dir, glue_data, tmp_path, capsys):
    base = ["rte", "1e-3", "--model", tiny_bert_dir, "--data-dir", glue_data, "--results-dir", str(tmp_path),
            "--device", "cpu", "--batch-size", "8", "--evals", "1"]
    assert run_cli(ft.main, base) == 0
    before = (tmp_path / "part4_rte_lr1e-3_bs8.json").read_text()
    capsys.readouterr()
    assert run_cli(ft.main, base + ["--max-train-examples", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a result of other settings (" in err and "max_train_examples None -> 8" in err and "\n" not in err
    assert (tmp_path / "part4_rte_lr1e-3_bs8.json").read_text() == before
    assert run_cli(ft.main, base) == 0                                      # the same settings: a rerun rewrites it


def test_summaries_are_named_by_everything_that_sets_them_apart(tiny_bert_dir, glue_data, tmp_path, capsys):
    common = ["wnli", "--model", tiny_bert_dir, "--data-dir", glue_data, "--results-dir", str(tmp_path), "--device",
              "cpu", "--evals", "1", "--seeds", "2"]
    assert ft.main(common + ["--batch-size", "8", "--run-tag", "tiny"]) == 0
    assert ft.main(common + ["--batch-size", "16"]) == 0
    assert (tmp_path / "part4_wnli_lr2e-5_bs8_seeds2_tiny.json").exists()
    assert (tmp_path / "part4_wnli_lr2e-5_bs16_seeds2.json").exists()
    assert ft.main(["wnli", "--model", tiny_bert_dir, "--data-dir", glue_data, "--results-dir", str(tmp_path),
                    "--device", "cpu", "--evals", "1", "--grid", "glue", "--run-tag", "tiny", "--epochs", "1"]) == 0
    assert (tmp_path / "part4_wnli_grid_glue_tiny.json").exists()
    assert run_cli(ft.main, ["wnli", "--model", tiny_bert_dir, "--data-dir", glue_data, "--results-dir", str(tmp_path),
                             "--device", "cpu", "--evals", "1", "--grid", "glue", "--run-tag", "tiny", "--epochs", "2"]) == 2
    assert not (tmp_path / "part4_wnli_lr2e-5_ep2_tiny.json").exists()      # refused before any training


@pytest.mark.parametrize("argv, message", [
    (["mrpc", "3e-5", "--grid", "glue"], "--grid glue tries its own learning rates: drop the learning rate 3e-5"),
    (["mrpc", "--grid", "a3", "--batch-size", "16"], "--grid a3 tries its own batch sizes and epochs"),
    (["mrpc", "--grid", "a3", "--epochs", "2"], "--grid a3 tries its own batch sizes and epochs"),
    (["mrpc", "--seeds", "3", "--seed", "7"], "--seeds 3 runs the seeds 0..2: drop --seed 7"),
    (["mrpc", "--tasks", "rte"], "--tasks: only with the glue command"),
    (["rte", "--glue-submission", "x"], "--glue-submission: only with the glue command"),
    (["glue", "--tasks", "cola,mnlii"], "unknown GLUE task(s) mnlii"),
    (["glue", "--init", "pre"], "argument --init: invalid choice: 'pre'"),
    (["squad", "--data-dir", "x"], "--data-dir: squad does not take it (--train-data, --dev-data, --stride do)"),
    (["cola", "--train-data", "x.json"], "--train-data: cola does not take it (--data-dir does)"),
    (["cola", "--stride", "7"], "--stride: cola does not take it"),
    (["glue", "--dev-data", "x.json"], "--dev-data: glue does not take it"),
])
def test_flags_a_command_would_ignore_are_refused(argv, message, capsys):
    assert run_cli(ft.main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err, err


def test_once_per_epoch_follows_each_runs_epochs():
    """Under --grid a3, a SWAG run of 2 or 4 epochs is evaluated 2 or 4 times, not 3."""
    jobs = ft.planned_jobs(config_for(["swag", "--grid", "a3"]))
    assert {(job.epochs, job.dev_evaluations) for job in jobs} == {(2, 2), (3, 3), (4, 4)} and len(jobs) == 18
    assert {job.dev_evaluations for job in ft.planned_jobs(config_for(["mrpc", "--grid", "a3"]))} == {30}


def test_the_glue_command_evaluates_mnli_and_qqp_once_per_epoch(tiny_bert_dir, glue_data, tmp_path):
    """Their dev sets are the large ones (QQP 40,430 pairs, MNLI 9,815 + 9,832): ~30 evaluations would cost 20-40%."""
    argv = ["glue", "1e-3", "--tasks", "qqp,rte", "--model", tiny_bert_dir, "--data-dir", glue_data, "--results-dir",
            str(tmp_path), "--device", "cpu", "--batch-size", "8", "--epochs", "2"]
    assert ft.main(argv) == 0
    qqp, rte = (json.loads((tmp_path / f"part4_{t}_lr1e-3_bs8_ep2.json").read_text()) for t in ("qqp", "rte"))
    assert qqp["settings"]["dev_evaluations"] == 2 and [c["epoch"] for c in qqp["curve"]] == [1, 2]
    assert rte["settings"]["dev_evaluations"] == 30 and len(rte["curve"]) == rte["steps"] == 6
    assert qqp["run"]["config"]["evals"] is None and "evals" not in qqp["settings"]     # the flag as given: not given


def test_the_final_line_shows_the_articles_number_only_for_its_setting():
    family, final = families.FAMILIES["mrpc"]("mrpc", 128), {"dev": {"accuracy": 0.5, "f1": 0.6, "correct": 2, "n": 4}}
    article = "[article (bert-base-uncased, batch 32, 3 epochs, seed 0): 0.8333 (340/408), F1 0.8847"
    job = Job(lr=2e-5, batch_size=32, epochs=3, seed=0, dev_evaluations=30)
    assert article in training_run.final_line("mrpc", family, job, final, 60)
    other = training_run.final_line("mrpc", family, replace(job, batch_size=16), final, 60)
    assert "0.8333" not in other and "[article: no run with these settings" in other
    # the runs it names are the article's FINAL entries, in its setting (part4/paper/article.py), each lr on its grid
    assert "(it ran SST-2 at lr 2e-5 and MRPC at 5e-5..2e-5, batch 32, 3 epochs)]" in other
    for job, init in ((Job(lr=2e-5, batch_size=32, epochs=3, seed=7, dev_evaluations=30), "pretrained"),
                      (Job(lr=2e-5, batch_size=32, epochs=3, seed=0, dev_evaluations=30), "random")):
        assert "0.8333" not in training_run.final_line("mrpc", family, job, final, 60, init)      # another seed, random weights
    rte = training_run.final_line("rte", families.FAMILIES["rte"]("rte", 128),
                           Job(lr=2e-5, batch_size=32, epochs=3, seed=0, dev_evaluations=30),
                           {"dev": {"accuracy": 0.5, "correct": 2, "n": 4}}, 60)
    assert "[article: no run with these settings" in rte
    assert "[paper Table 1, BERT-base test (GLUE server): accuracy 66.4]" in rte and "accuracy 65.70" in rte


def test_mnlis_missing_file_names_its_dev_files(tmp_path):
    os.makedirs(tmp_path / "MNLI")
    (tmp_path / "MNLI" / "train.tsv").write_text("index\tsentence1\tsentence2\tgold_label\n")
    with pytest.raises(Fatal, match="dev_matched.tsv, dev_mismatched.tsv"):
        readers.read_split(str(tmp_path), "mnli", "dev_matched")


# --- bad input: one line, exit 2, nothing that looks complete ---

def test_bad_glue_inputs_fail_before_any_training(tiny_bert_dir, glue_data, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    out = tmp_path / "out"
    assert run_cli(ft.main, glue_cmd(tiny_bert_dir, glue_data, out, ["--glue-submission", str(blocker / "sub")])) == 2
    assert "--glue-submission" in capsys.readouterr().err and not out.exists()
    bad = write_glue(str(tmp_path / "bad"))
    (tmp_path / "bad" / "RTE" / "test.tsv").write_text("index\tpremise\thypothesis\n0\ta\tb\n")
    assert run_cli(ft.main, glue_cmd(tiny_bert_dir, bad, out, ["--glue-submission", str(tmp_path / "sub")])) == 2
    err = capsys.readouterr().err.strip()
    assert "RTE/test.tsv: no column 'sentence1' in the header" in err and "\n" not in err
    assert not out.exists() or not list(out.glob("*.json"))


@needs_shared_data
def test_the_shared_glue_folder_runs_six_tasks():
    """../shared/data/glue_data has training files for six tasks; MNLI, QNLI and QQP are named as not run."""
    data = os.path.join(SHARED_DATA, "glue_data")
    absent = {t: summaries.missing_data(t, data) for t in readers.GLUE}
    assert [t for t, why in absent.items() if why is None] == ["cola", "sst2", "mrpc", "stsb", "rte", "wnli"]
    assert absent["mnli"] == "no MNLI/train.tsv in --data-dir"


@pytest.mark.slow
def test_glue_under_torchrun_gives_one_process_numbers(tiny_bert_dir, glue_data, tmp_path):
    """Two processes (gloo): the grid's runs spread over them, each run once, the same table as one process."""
    from test_processes import alone, torchrun
    argv = glue_cmd(tiny_bert_dir, glue_data, tmp_path, ["--tasks", "rte,wnli"])
    one = alone("finetune", argv + ["--results-dir", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr
    two = torchrun("finetune", argv + ["--results-dir", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr
    a, b = (json.loads((tmp_path / d / "part4_glue_table_bs8_ep1.json").read_text())["tasks"] for d in ("one", "two"))
    for t in ("rte", "wnli"):
        assert (a[t]["lr"], a[t]["dev"], a[t]["runs"]) == (b[t]["lr"], b[t]["dev"], b[t]["runs"])
    assert two.stdout.count("FINAL rte") == 2 and "whole runs" in two.stdout       # rank 0 prints its own two runs


def test_what_a_second_glue_command_meets(tiny_bert_dir, glue_data, tmp_path, capsys):
    """Runs done before are reused (a single run's 30 evaluations serve glue's once per epoch); a run without test
    predictions is run again for --glue-submission; --save-model keeps one folder per run, again and again; a table
    of other settings is refused before any training."""
    common = ["--model", tiny_bert_dir, "--data-dir", glue_data, "--results-dir", str(tmp_path), "--device", "cpu",
              "--batch-size", "8", "--epochs", "1"]
    assert ft.main(["qqp", "1e-3", *common]) == 0                           # 30 evaluations, as a single run does
    qqp = tmp_path / "part4_qqp_lr1e-3_bs8_ep1.json"
    stamp = qqp.stat().st_mtime_ns
    glue_argv = ["glue", "1e-3", "--tasks", "qqp,rte", *common, "--save-model", str(tmp_path / "models")]
    assert ft.main(glue_argv) == 0
    assert qqp.stat().st_mtime_ns == stamp                                  # reused, not run again
    assert "run part4_qqp_lr1e-3_bs8_ep1: its results already exist" in (
        tmp_path / "part4_glue_table_lr1e-3_bs8_ep1.log").read_text()
    assert (tmp_path / "models" / "part4_rte_lr1e-3_bs8_ep1" / "config.json").exists()
    assert ft.main(glue_argv) == 0                                          # the model folders do not stop a rerun
    sub = tmp_path / "sub"
    assert ft.main(glue_argv + ["--glue-submission", str(sub)]) == 0        # no test predictions yet: run again
    assert qqp.stat().st_mtime_ns != stamp and (sub / "QQP.tsv").exists() and (sub / "RTE.tsv").exists()
    capsys.readouterr()
    assert run_cli(ft.main, ["glue", "1e-3", "--tasks", "rte", *common]) == 2
    err = capsys.readouterr().err
    assert "part4_glue_table_lr1e-3_bs8_ep1.json: a table of other settings (tasks ['qqp', 'rte'] -> ['rte'])" in err


def test_more_evaluations_than_steps_are_said_with_those_made(tiny_bert_dir, glue_data, tmp_path):
    """--evals above the run's steps: one evaluation a step, said in the preamble beside the count asked; the curve
    holds as many points as the line says."""
    argv = ["rte", "1e-3", "--model", tiny_bert_dir, "--data-dir", glue_data, "--results-dir", str(tmp_path),
            "--device", "cpu", "--batch-size", "8", "--epochs", "1", "--evals", "5"]
    assert ft.main(argv) == 0
    result = json.loads((tmp_path / "part4_rte_lr1e-3_bs8_ep1.json").read_text())
    steps = -(-24 // 8)                                                     # write_glue's 24 training rows
    assert [point["step"] for point in result["curve"]] == list(range(1, steps + 1))
    log = (tmp_path / "part4_rte_lr1e-3_bs8_ep1.log").read_text()
    assert f"  (5 dev evaluations asked, {steps} made: one at every step)" in log.splitlines()


def test_no_run_of_other_data_or_other_test_sets_is_reused(tiny_bert_dir, tmp_path, capsys):
    """A run's results record its data's fingerprint: the same command on a training set of other labels is refused
    before any training, naming the data (never skipped as done, its results taken for the other data's); test
    predictions of other test sets are made again, the server's file then holding the new test set's indices."""
    data = write_glue(str(tmp_path / "glue"), skip=("QQP", "MNLI", "QNLI", "SST-2", "CoLA", "STS-B", "WNLI", "MRPC"))
    sub, out = tmp_path / "sub", tmp_path / "out"
    argv = glue_cmd(tiny_bert_dir, data, out, ["1e-3", "--tasks", "rte", "--glue-submission", str(sub)])
    assert ft.main(argv) == 0
    run = out / "part4_rte_lr1e-3_bs8_ep1.json"
    first = json.loads(run.read_text())
    assert len(first["settings"]["data"]) == 12 and len(first["test_data"]) == 12
    stamp = run.stat().st_mtime_ns
    assert ft.main(argv) == 0 and run.stat().st_mtime_ns == stamp            # the same data: reused
    earlier = {k: v for k, v in first.items() if k != "test_data"}          # as an earlier version wrote it
    earlier["settings"] = {k: v for k, v in first["settings"].items() if k != "data"}
    run.write_text(json.dumps(earlier))
    stamp = run.stat().st_mtime_ns
    assert ft.main(argv) == 0 and run.stat().st_mtime_ns == stamp            # no fingerprints: compared without them
    run.write_text(json.dumps(first))
    stamp = run.stat().st_mtime_ns
    test = os.path.join(data, "RTE", "test.tsv")
    rows = read_tsv(test)
    with open(test, "w") as f:                                              # other test rows, other indices
        f.write("\t".join(rows[0]) + "\n" + "".join(f"{1000 + k}\t" + "\t".join(r[1:]) + "\n" for k, r in enumerate(rows[1:])))
    assert ft.main(argv) == 0
    assert run.stat().st_mtime_ns != stamp                                  # run again for the new test set
    assert [r[0] for r in read_tsv(sub / "RTE.tsv")[1:]] == [str(1000 + k) for k in range(len(rows) - 1)]
    assert json.loads(run.read_text())["settings"] == first["settings"]      # the training data is the same
    train = os.path.join(data, "RTE", "train.tsv")
    flip = {"entailment": "not_entailment", "not_entailment": "entailment"}
    lines = read_tsv(train)
    with open(train, "w") as f:                                             # every training label flipped
        f.write("".join("\t".join(r[:-1] + [flip.get(r[-1], r[-1])]) + "\n" for r in lines))
    written = run.read_text()
    capsys.readouterr()
    assert run_cli(ft.main, argv) == 2
    err = capsys.readouterr().err
    assert "holds a result of other settings (data '" + first["settings"]["data"] + "' -> '" in err, err
    assert run.read_text() == written


def test_save_model_replaces_only_a_model_a_run_of_its_settings_saved(tiny_bert_dir, glue_data, tmp_path, capsys):
    """--save-model: the --model the run starts from and a model folder this script did not save are refused before
    any training, as is one a run of other settings saved; the same command run again replaces its own. Each refusal
    is one line, and leaves the folder as it was and no results file."""
    import shutil
    common = ["mrpc", "1e-3", "--data-dir", glue_data, "--device", "cpu", "--evals", "1", "--max-dev-examples", "8"]
    start, other = tmp_path / "start", tmp_path / "other"
    shutil.copytree(tiny_bert_dir, start)
    shutil.copytree(tiny_bert_dir, other)

    def files(folder):
        return {f: (folder / f).read_bytes() for f in sorted(os.listdir(folder))}

    kept = files(start)
    for target, said in ((start, "the model this run starts from (--model)"),
                         (other, "a model folder with no part4_saved_by.json (saved by hand, by another program or by "
                                 "an earlier version of this script): its run cannot be told")):
        out = tmp_path / f"refused_{target.name}"
        assert run_cli(ft.main, [*common, "--model", str(start), "--max-train-examples", "16", "--results-dir",
                                 str(out), "--save-model", str(target)]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"error: --save-model {target}: {said}; refusing to replace it: choose another folder" + (
            "" if target == start else ", or delete it")
        assert files(target) == kept and not out.exists()
    saved = tmp_path / "saved"
    argv = [*common, "--model", str(start), "--max-train-examples", "16", "--results-dir", str(tmp_path / "r"),
            "--save-model", str(saved)]
    assert ft.main(argv) == 0
    by = json.loads((saved / "part4_saved_by.json").read_text())
    result = json.loads((tmp_path / "r" / "part4_mrpc_lr1e-3.json").read_text())
    assert by == {"name": result["name"], "settings": result["settings"]}
    (saved / "model.safetensors").write_bytes(b"stale")
    assert ft.main(argv) == 0 and (saved / "model.safetensors").read_bytes() != b"stale"     # its own: replaced
    capsys.readouterr()
    mine = files(saved)
    assert run_cli(ft.main, [*common, "--model", str(start), "--max-train-examples", "12", "--results-dir",
                             str(tmp_path / "r12"), "--save-model", str(saved)]) == 2
    assert ("a model saved by a run of other settings (max_train_examples 16 -> 12; train_rows 16 -> 12; data '"
            in capsys.readouterr().err)
    assert files(saved) == mine and not (tmp_path / "r12").exists()


def test_save_model_is_checked_for_the_runs_that_train_only(tiny_bert_dir, glue_data, tmp_path, capsys):
    """Restarts with --save-model, run again with another count of dev evaluations: each run's results exist for its
    settings (the count aside, as results are reused), so each is skipped, and its model folder is not checked."""
    seeds = ["mrpc", "1e-3", "--data-dir", glue_data, "--device", "cpu", "--max-dev-examples", "8", "--model",
             tiny_bert_dir, "--max-train-examples", "16", "--seeds", "2", "--results-dir", str(tmp_path / "seeds"),
             "--save-model", str(tmp_path / "per_run")]
    assert ft.main([*seeds, "--evals", "1"]) == 0
    capsys.readouterr()
    assert ft.main(seeds) == 0
    assert capsys.readouterr().out.count("its results already exist") == 2


def test_a_random_init_run_says_every_weight_is_random(tiny_bert_dir, glue_data, tmp_path):
    assert ft.main(["mrpc", "1e-3", "--init", "random", "--model", tiny_bert_dir, "--data-dir", glue_data,
                    "--results-dir", str(tmp_path), "--device", "cpu", "--evals", "1"]) == 0
    log = (tmp_path / "part4_mrpc_lr1e-3_random-init.log").read_text()
    assert "before fine-tuning (every weight random, --init random):" in log and "[article: dev accuracy 0.3162" not in log
    assert "[article (bert-base-uncased" not in log and "[article: no run with these settings" in log
