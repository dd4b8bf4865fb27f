"""part4/tasks/squad_metric.py: SQuAD's official metric alone, without torch: the scores of a hand-worked dev file, the
no-answer threshold against every threshold tried, and the command line on the prediction files bert_part4_squad.py
wrote, equal to the scores in that run's results."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, SHARED_DATA, needs_shared_data
from test_squad import random_v2, squad_file

import bert_part4_squad as sq
from part4.tasks import squad_metric as metric
from part4.tasks import squad_spans


def write(path, obj):
    path.write_text(json.dumps(obj))
    return str(path)


def dev_file(path, questions, v2):
    """An official dev file of one paragraph: questions [(id, [gold texts])]."""
    context = "Denver Broncos Bidirectional Encoder Representations from Transformers Paris"
    qas = [{"id": qid, "question": "?", "answers": [{"text": g, "answer_start": context.find(g)} for g in golds],
            **({"is_impossible": not golds} if v2 else {})} for qid, golds in questions]
    return write(path, {"version": "v2.0" if v2 else "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]})


def first_questions(path, n, out):
    """The dev file cut to its first n questions in file order (bert_part4_squad.py --max-dev-examples n scores those)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    articles = []
    for article in data["data"]:
        paragraphs = []
        for p in article["paragraphs"]:
            qas, n = p["qas"][:n], n - len(p["qas"][:n])
            paragraphs += [{**p, "qas": qas}] if qas else []
        articles += [{**article, "paragraphs": paragraphs}] if paragraphs else []
    return write(out, {**data, "data": articles})


def command_line(*argv):
    out = subprocess.run([sys.executable, "-m", "part4.tasks.squad_metric", *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


V2_QUESTIONS = [("q1", ["Denver Broncos"]), ("q2", ["Bidirectional Encoder Representations from Transformers"]),
                ("q3", []), ("q4", [])]
V2_PREDICTIONS = {"q1": "The Denver Broncos.", "q2": "Bidirectional Encoder Representations", "q3": "", "q4": "Paris"}


def test_a_v2_dev_file_scored_by_hand(tmp_path, capsys):
    """EM 1, 0, 1, 0 and F1 1, 0.75, 1, 0 (the article's worked examples; q3 rightly empty, q4 answers a question
    without an answer). With the odds q1 -2, q2 0.5, q3 3, q4 2, the threshold 1.0 empties q3 and q4 (both then
    right); the best F1 answers q1 and q2 (2 + 1 + 0.75 = 3.75 of 4, threshold 0.5), the best EM q1 only (threshold
    -2: answering q2 adds no exact match)."""
    dev = dev_file(tmp_path / "dev.json", V2_QUESTIONS, v2=True)
    preds = write(tmp_path / "preds.json", V2_PREDICTIONS)
    assert metric.main([dev, preds]) == 0
    printed = capsys.readouterr().out
    expected = {"exact": 50.0, "f1": 68.75, "total": 4, "HasAns_exact": 50.0, "HasAns_f1": 87.5, "HasAns_total": 2,
                "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}
    assert printed == json.dumps(expected, indent=2) + "\n"            # as evaluate-v2.0.py prints it, in its order
    odds = write(tmp_path / "odds.json", {"q1": -2.0, "q2": 0.5, "q3": 3.0, "q4": 2.0})
    assert metric.main([dev, preds, "--na-prob-file", odds]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == list(expected) + ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
    assert (out["exact"], out["f1"], out["NoAns_exact"]) == (75.0, 93.75, 100.0)
    assert (out["best_exact"], out["best_exact_thresh"], out["best_f1"], out["best_f1_thresh"]) == (75.0, -2.0, 93.75, 0.5)
    assert metric.main([dev, preds, "-n", odds, "--na-prob-thresh", "2.5"]) == 0      # only q3's odds exceed 2.5
    assert json.loads(capsys.readouterr().out)["f1"] == 68.75


def test_a_v1_dev_file_scored_by_hand_an_unanswered_question_scores_0(tmp_path, capsys):
    """evaluate-v1.1.py: every gold counts, even one that normalises to nothing (d: "The" matches "the" exactly, with
    F1 0, as v1.1 scores two empty texts); a question without a prediction scores 0 and is said on stderr; printed
    on one line."""
    dev = dev_file(tmp_path / "dev.json", [("a", ["Denver Broncos", "Broncos"]), ("b", ["Paris"]),
                                           ("c", ["Bidirectional Encoder Representations from Transformers"]),
                                           ("d", ["the", "Paris"])], v2=False)
    preds = write(tmp_path / "preds.json", {"a": "the Broncos defeated the Panthers", "c": "Bidirectional Encoder",
                                            "d": "The"})
    assert metric.main([dev, preds]) == 0
    out, err = capsys.readouterr()
    f1_a = 2 * (1 / 3) * 1 / (1 / 3 + 1)        # 'broncos defeated panthers': 1 of 3 words, all of the gold 'broncos'
    f1_c = 2 * 1 * (2 / 5) / (1 + 2 / 5)        # 2 of 2 words, 2 of the gold's 5
    assert json.loads(out) == pytest.approx({"exact_match": 25.0, "f1": 100.0 * (f1_a + f1_c) / 4})
    assert out == json.dumps(json.loads(out)) + "\n"
    assert err == "Unanswered question b will receive score 0.\n"


@pytest.mark.parametrize("seed", range(4))
def test_the_best_threshold_is_the_best_of_every_threshold_and_the_sweeps_search_agrees(seed):
    """Brute force: every threshold on the odds (answer iff odds <= threshold), the first of the best, and the
    questions it answers; the span search's array form (part4/tasks/squad_spans.py's official_best_tau) runs the same
    search and gives the same threshold, score and share answered."""
    golds, texts, diff = random_v2(seed)
    texts = [t if k % 5 else "" for k, t in enumerate(texts)]            # some empty predictions
    ids = [f"q{k}" for k in range(len(texts))]
    preds, has = dict(zip(ids, texts)), {q: bool(g) for q, g in zip(ids, golds)}
    f1 = {q: metric.question_scores(t, g, "2.0")[1] for q, t, g in zip(ids, texts, golds)}
    odds = {q: float(-d) for q, d in zip(ids, diff)}
    best, threshold, answered = metric.best_threshold(preds, f1, odds, has)

    def right(q, answered):            # answered: its F1, or 1 for an empty prediction of a question without answer
        return (f1[q] if has[q] else float(not preds[q])) if answered else float(not has[q])

    tried = [(sum(right(q, odds[q] <= t) for q in ids), t) for t in [-np.inf, *sorted(odds.values())]]
    top = max(total for total, _ in tried)
    first = next(t for total, t in tried if total >= top - 1e-9)
    assert best == pytest.approx(100 * top / len(ids)) and threshold == (0.0 if first == -np.inf else first)
    assert answered == sum(odds[q] <= first for q in ids)
    array = squad_spans.official_best_tau(np.asarray(diff), np.array([f1[q] for q in ids]), np.array([has[q] for q in ids]),
                                       np.array([bool(t) for t in texts]))
    assert array["f1"] == pytest.approx(best) and array["threshold"] == threshold
    assert (array["f1"], array["answered"]) == (best, 100 * answered / len(ids))     # the one search: the same numbers


def test_a_tie_at_the_best_threshold_answers_the_first_in_order_of_the_odds():
    """evaluate-v2.0.py's search keeps the first best total: of two questions with the same odds, answering the first
    (with an answer, F1 1) is best and the second (without one, a non-empty prediction) would cost 1; the threshold is
    their odds, which the official rule would apply to both, and the count answered is the one the total counts."""
    preds, f1, odds, has = {"a": "x", "b": "y"}, {"a": 1.0, "b": 0.0}, {"a": 0.5, "b": 0.5}, {"a": True, "b": False}
    assert metric.best_threshold(preds, f1, odds, has) == (100.0, 0.5, 1)
    array = squad_spans.official_best_tau(np.array([-0.5, -0.5]), np.array([1.0, 0.0]), np.array([True, False]),
                                       np.array([True, True]))
    assert array == {"f1": 100.0, "answered": 50.0, "threshold": 0.5, "tau": -0.5}


def test_bad_files_are_one_line_errors(tmp_path, capsys):
    v2 = dev_file(tmp_path / "dev2.json", V2_QUESTIONS, v2=True)
    v1 = dev_file(tmp_path / "dev1.json", V2_QUESTIONS[:2], v2=False)
    preds = write(tmp_path / "preds.json", V2_PREDICTIONS)
    (tmp_path / "notjson.json").write_text("{")
    for argv, message in [
        ([str(tmp_path / "absent.json"), preds], "cannot read the dev file"),
        ([str(tmp_path / "notjson.json"), preds], "the dev file is not JSON"),
        ([write(tmp_path / "nodata.json", {"version": "1.1"}), preds], "not an official SQuAD dev file"),
        ([v2, write(tmp_path / "three.json", {k: V2_PREDICTIONS[k] for k in ("q1", "q2", "q3")})],
         "no prediction for 1 of the 4 questions (e.g. q4)"),
        ([v2, write(tmp_path / "numbers.json", {"q1": 3})], "are not text (e.g. q1)"),
        ([v2, preds, "-n", write(tmp_path / "odds.json", {"q1": "high"})], "are not numbers (e.g. q1)"),
        ([v1, preds, "-n", write(tmp_path / "odds1.json", {"q1": 0.0})], "is a SQuAD v1.1 dev file"),
        ([dev_file(tmp_path / "v1none.json", V2_QUESTIONS, v2=False), preds], "question q3 has no answer"),
    ]:
        assert metric.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, (argv, err)


@pytest.mark.slow
def test_the_metric_imports_nothing_heavy():
    out = subprocess.run([sys.executable, "-c", "import sys; from part4.tasks import squad_metric; print(sorted(m for m in "
                          "('torch', 'transformers', 'tokenizers', 'numpy', 'part4.models.loading', 'part4.run.run_files') "
                          "if m in sys.modules))"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


def scored_by_the_squad_script(folder, v1, v2, out, max_dev_examples, windows=()):
    """bert_part4_squad.py on both dev files (--max-dev-examples: their first questions); its results."""
    argv = ["--v1-model", folder, "--v2-model", folder, "--v1-data", v1, "--v2-data", v2, "--only", "v1", "--only", "v2",
            *windows, "--max-dev-examples", str(max_dev_examples), "--results-dir", str(out), "--device", "cpu"]
    assert sq.main(argv) == 0
    return json.loads((out / "part4_squad.json").read_text())


def check_the_command_line_gives_the_runs_scores(r, v1, v2, out):
    """The official numbers of the run's prediction files are the ones its results hold: v1.1 EM and F1; v2.0 at the
    tau chosen on dev (squad_v2_predictions.json) with its HasAns / NoAns split; the best over every threshold from
    the non-empty predictions and their odds."""
    one = command_line(v1, str(out / "squad_v1_predictions.json"))
    assert one == pytest.approx({"exact_match": r["v1_dev"]["em"], "f1": r["v1_dev"]["f1"]}, rel=1e-12)
    d = r["v2_dev"]
    two = command_line(v2, str(out / "squad_v2_predictions.json"))
    ours = {"exact": d["best"]["em"], "f1": d["best"]["f1"], "total": d["n"],
            "HasAns_exact": d["has_ans"]["em"], "HasAns_f1": d["has_ans"]["f1"], "HasAns_total": d["has_ans"]["n"],
            "NoAns_exact": d["no_ans"]["em"], "NoAns_f1": d["no_ans"]["f1"], "NoAns_total": d["no_ans"]["n"]}
    assert two == pytest.approx({k: v for k, v in ours.items() if v is not None}, rel=1e-12, abs=1e-12)
    best = command_line(v2, str(out / "squad_v2_nonnull_predictions.json"), "--na-prob-file",
                        str(out / "squad_v2_null_odds.json"))
    assert best["best_f1"] == d["exact_best"]["f1"]              # one search (best_threshold), the same arithmetic
    assert best["best_f1_thresh"] == d["exact_best"]["threshold"]


@pytest.mark.slow
def test_the_command_line_scores_the_squad_scripts_prediction_files(tiny_qa_dir, tmp_path):
    """On dev files the test writes, cut by --max-dev-examples 4: v1.1's 3 questions whole, v2.0's first 4 of 5."""
    v1, v2 = squad_file(tmp_path / "v1.json", False), squad_file(tmp_path / "v2.json", True)
    out = tmp_path / "results"
    r = scored_by_the_squad_script(tiny_qa_dir, v1, v2, out, max_dev_examples=4, windows=("--max-len", "64", "--stride", "16"))
    assert (r["v1_dev"]["n"], r["v2_dev"]["n"]) == (3, 4)
    check_the_command_line_gives_the_runs_scores(r, first_questions(v1, 4, tmp_path / "v1_4.json"),
                                                 first_questions(v2, 4, tmp_path / "v2_4.json"), out)


@pytest.mark.slow
@needs_shared_data
def test_the_command_line_scores_the_squad_scripts_predictions_on_the_real_dev_sets(tiny_qa_dir, tmp_path):
    dev = {v: os.path.join(SHARED_DATA, "squad", f"dev-v{v}.json") for v in ("1.1", "2.0")}
    out = tmp_path / "results"
    r = scored_by_the_squad_script(tiny_qa_dir, dev["1.1"], dev["2.0"], out, max_dev_examples=40)
    assert r["v1_dev"]["n"] == r["v2_dev"]["n"] == 40 and r["v2_dev"]["n_noans"] > 0
    check_the_command_line_gives_the_runs_scores(r, first_questions(dev["1.1"], 40, tmp_path / "v1.json"),
                                                 first_questions(dev["2.0"], 40, tmp_path / "v2.json"), out)
