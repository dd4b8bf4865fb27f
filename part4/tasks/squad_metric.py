"""SQuAD's official metric, alone: the answer normalisation, exact match and F1 of SQuAD v1.1 and v2.0, the no-answer
threshold, and a predictions file scored against a dev file as evaluate-v1.1.py and evaluate-v2.0.py score it (the
same numbers, printed as they print them). The standard library only: it runs, and can be copied, without torch.

    python -m part4.tasks.squad_metric dev-v1.1.json squad_v1_predictions.json
    python -m part4.tasks.squad_metric dev-v2.0.json squad_v2_nonnull_predictions.json --na-prob-file squad_v2_null_odds.json
"""

import argparse
import collections
import json
import re
import string
import sys

PUNCTUATION = set(string.punctuation)


# --- One answer against the gold answers: normalisation, EM and F1 ---

def normalize_answer(s):
    """The article's "official answer normalisation (lower case, no punctuation, no "a/an/the")", and extra white
    space dropped (evaluate-v2.0.py's normalize_answer)."""
    s = "".join(ch for ch in s.lower() if ch not in PUNCTUATION)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(prediction, gold):
    return int(normalize_answer(prediction) == normalize_answer(gold))


def shared_words(prediction, gold):
    """How many normalised words the two share (a repeated word counts as often as in both), and their lengths."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    return sum((collections.Counter(pred) & collections.Counter(ref)).values()), len(pred), len(ref)


def squad_f1(prediction, gold, version="2.0"):
    """F1 = 2 P R / (P + R) over the shared words of the normalised texts.

    Both official scripts agree except when a text normalises to nothing: v2.0 then scores 1 if
    both are empty (a correct "no answer"), v1.1 scores 0.
    """
    same, n_pred, n_gold = shared_words(prediction, gold)
    if version == "2.0" and (not n_pred or not n_gold):
        return float(n_pred == n_gold == 0)
    if same == 0:
        return 0.0
    precision, recall = same / n_pred, same / n_gold
    return 2 * precision * recall / (precision + recall)


def question_scores(prediction, golds, version):
    """EM and F1 of one prediction against the best-matching gold answer.

    v2.0 drops gold answers that normalise to nothing; a question left with none is unanswerable,
    and then only the empty prediction is right.
    """
    if version == "2.0":
        golds = [g for g in golds if normalize_answer(g)] or [""]
    return (max(exact_match(prediction, g) for g in golds),
            max(squad_f1(prediction, g, version) for g in golds))


# --- SQuAD v2.0: the no-answer threshold ---

def best_threshold(predictions, scores, na_probs, has_answer):
    """evaluate-v2.0.py's find_best_thresh, the one search of the no-answer threshold (the SQuAD script runs it on its
    arrays through part4/tasks/squad_spans.py's official_best_tau): the best total score over every threshold on the
    no-answer odds, that threshold, and how many questions it answers. Start by answering nothing (each question
    without an answer right), then answer the questions in order of rising odds (ties in the dict's order): one with
    an answer gains its score, one without loses 1 if its prediction is not empty; the first best total is kept. A
    question is answered iff its odds <= the threshold (0.0 when answering nothing is best; the count answered is the
    first that many in that order, which a tie at the threshold can make fewer than the odds <= it).
    predictions, scores, na_probs: {id: ...} (of a prediction only whether it is empty is read); has_answer: {id:
    bool} for every question of the dev file."""
    total = best = sum(1 for has in has_answer.values() if not has)
    threshold, answered, tried = 0.0, 0, 0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        tried += 1
        total += scores[qid] if has_answer[qid] else (-1 if predictions[qid] else 0)
        if total > best:
            best, threshold, answered = total, na_probs[qid], tried
    return 100.0 * best / len(scores), threshold, answered


def no_answer_applied(scores, na_probs, has_answer, na_prob_thresh):
    """evaluate-v2.0.py's apply_no_ans_threshold: where the odds exceed the threshold the answer is "" (right iff the
    question has none)."""
    return {qid: float(not has_answer[qid]) if na_probs[qid] > na_prob_thresh else s for qid, s in scores.items()}


# --- A dev file scored, as the official scripts score it ---

def dev_questions(dataset):
    """{id: gold answer texts} of every question of an official dev file's "data", in file order."""
    return {qa["id"]: [a["text"] for a in qa["answers"]]
            for article in dataset for paragraph in article["paragraphs"] for qa in paragraph["qas"]}


def evaluate_v1(questions, predictions):
    """evaluate-v1.1.py: EM and F1 in percent over every question; one without a prediction scores 0 (said on
    stderr, as the official script says it)."""
    em = f1 = 0
    for qid, golds in questions.items():
        if qid not in predictions:
            print(f"Unanswered question {qid} will receive score 0.", file=sys.stderr)
            continue
        e, f = question_scores(predictions[qid], golds, "1.1")
        em, f1 = em + e, f1 + f
    return {"exact_match": 100.0 * em / len(questions), "f1": 100.0 * f1 / len(questions)}


def totals(exact, f1, qids):
    """evaluate-v2.0.py's make_eval_dict: EM and F1 in percent over the questions qids, and their number."""
    return {"exact": 100.0 * sum(exact[k] for k in qids) / len(qids), "f1": 100.0 * sum(f1[k] for k in qids) / len(qids),
            "total": len(qids)}


def evaluate_v2(questions, predictions, na_probs=None, na_prob_thresh=1.0):
    """evaluate-v2.0.py: EM and F1 over every question (the answer is "" where the no-answer odds exceed
    na_prob_thresh), then over those with an answer (HasAns) and those without (NoAns); with the odds of a
    --na-prob-file, the best EM and F1 over every threshold (best_exact, best_f1) and those thresholds."""
    has_answer = {qid: bool(golds) for qid, golds in questions.items()}
    scored = {qid: question_scores(predictions[qid], golds, "2.0") for qid, golds in questions.items()}
    exact_raw, f1_raw = ({qid: s[k] for qid, s in scored.items()} for k in (0, 1))
    odds = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    exact, f1 = (no_answer_applied(s, odds, has_answer, na_prob_thresh) for s in (exact_raw, f1_raw))
    out = totals(exact, f1, list(questions))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, has in has_answer.items() if has == wanted]
        out |= {f"{prefix}_{k}": v for k, v in totals(exact, f1, qids).items()} if qids else {}
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            out[f"best_{name}"], out[f"best_{name}_thresh"], _ = best_threshold(predictions, raw, na_probs, has_answer)
    return out


# --- The command line: a dev file, a predictions file (and the no-answer odds), as the official scripts take them ---

class Refused(Exception):
    """A file that cannot be scored: one line on stderr, exit code 2."""


def json_or_refused(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise Refused(f"{path}: cannot read the {what} ({e.strerror or e})")
    except ValueError as e:
        raise Refused(f"{path}: the {what} is not JSON ({e})")


def read_dev(path):
    """The questions of an official dev file ({id: golds}) and its SQuAD version: 2.0 when its questions carry
    is_impossible, else 1.1."""
    data = json_or_refused(path, "dev file")
    try:
        questions = dev_questions(data["data"])
        v2 = any("is_impossible" in qa for article in data["data"] for p in article["paragraphs"] for qa in p["qas"])
    except (KeyError, TypeError) as e:
        raise Refused(f"{path}: not an official SQuAD dev file ({type(e).__name__}: {e})")
    if not questions:
        raise Refused(f"{path}: holds no questions")
    unanswered = [qid for qid, golds in questions.items() if not golds]
    if unanswered and not v2:
        raise Refused(f"{path}: a SQuAD v1.1 dev file whose question {unanswered[0]} has no answer (only v2.0 questions "
                      f"may have none)")
    return questions, "2.0" if v2 else "1.1"


def is_text(value):
    return isinstance(value, str)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_answers(path, what, wanted):
    """{id: value} of a predictions file (wanted: is_text) or a no-answer odds file (wanted: is_number)."""
    values = json_or_refused(path, what)
    if not isinstance(values, dict):
        raise Refused(f"{path}: the {what} must be a JSON object {{question id: value}}")
    wrong = [qid for qid, v in values.items() if not wanted(v)]
    if wrong:
        raise Refused(f"{path}: the {what} of {len(wrong)} question(s) are not {'text' if wanted is is_text else 'numbers'} "
                      f"(e.g. {wrong[0]})")
    return values


def refuse_missing(questions, values, path, what):
    """evaluate-v2.0.py stops with a KeyError at a question without a prediction (or odds): one line here."""
    absent = [qid for qid in questions if qid not in values]
    if absent:
        raise Refused(f"{path}: no {what} for {len(absent)} of the {len(questions)} questions (e.g. {absent[0]}); "
                      f"SQuAD v2.0 scores every question")


def build_parser():
    p = argparse.ArgumentParser(
        prog="python -m part4.tasks.squad_metric",
        description="Score SQuAD predictions against an official dev file, as evaluate-v1.1.py (v1.1 dev files) or "
                    "evaluate-v2.0.py (v2.0 dev files, whose questions carry is_impossible) do, printing what they print.")
    p.add_argument("dev_file", help="official dev JSON (dev-v1.1.json or dev-v2.0.json)")
    p.add_argument("predictions", help="JSON {question id: answer text}, \"\" = no answer")
    p.add_argument("--na-prob-file", "-n", help="SQuAD v2.0: JSON {question id: no-answer odds} (e.g. "
                                                "squad_v2_null_odds.json): adds best_exact, best_f1 and their thresholds")
    p.add_argument("--na-prob-thresh", "-t", type=float, default=1.0,
                   help="SQuAD v2.0: answer \"\" where the odds exceed this (default 1.0, as evaluate-v2.0.py)")
    return p


def official_scores(dev_file, predictions_file, na_prob_file=None, na_prob_thresh=1.0):
    """The official numbers for the files the command line names."""
    questions, version = read_dev(dev_file)
    predictions = read_answers(predictions_file, "predictions", is_text)
    if version == "1.1":
        if na_prob_file:
            raise Refused(f"--na-prob-file: {dev_file} is a SQuAD v1.1 dev file, where every question has an answer")
        return evaluate_v1(questions, predictions)
    refuse_missing(questions, predictions, predictions_file, "prediction")
    na_probs = None
    if na_prob_file:
        na_probs = read_answers(na_prob_file, "no-answer odds", is_number)
        refuse_missing(questions, na_probs, na_prob_file, "no-answer odds")
    return evaluate_v2(questions, predictions, na_probs, na_prob_thresh)


def main(argv=None):
    """Prints the scores as the official script of the dev file's version prints them (v1.1 on one line, v2.0
    indented); returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        out = official_scores(args.dev_file, args.predictions, args.na_prob_file, args.na_prob_thresh)
    except Refused as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    print(json.dumps(out) if "exact_match" in out else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
