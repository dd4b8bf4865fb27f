"""bert_part4_squad.py: span search against brute force, the official metrics, the tau sweep, end to end."""

import itertools
import json
import os
import tokenize

import numpy as np
import pytest
import torch
from conftest import ROOT, SHARED_DATA, needs_shared_data, save_tiny
from transformers import AutoTokenizer, BertForQuestionAnswering

import bert_part4_squad as sq
from bert_part4_math import TOY_END, TOY_START
from part4.command_line import script_settings
from part4.data import readers
from part4.models.loading import run_cli
from part4.paper import recipe
from part4.tasks import squad_metric, squad_spans

# --- span search ---


def brute_force(start, end, allowed, max_answer):
    """max over i <= j < i + max_answer, i and j both allowed, of start[i] + end[j]: the article's best_span,
    with (-inf, -1, -1) when no span is allowed."""
    best = sq.best_span(start, end, [t for t in range(len(start)) if allowed[t]], max_answer)
    return (float(best[0]), best[1], best[2]) if best else (float("-inf"), -1, -1)


def random_batch(seed, B=6, L=40):
    g = torch.Generator().manual_seed(seed)
    start, end = torch.randn(B, L, generator=g), torch.randn(B, L, generator=g)
    passage = torch.zeros(B, L, dtype=torch.bool)
    for b in range(B):
        a = int(torch.randint(1, 10, (1,), generator=g))
        passage[b, a:L - int(torch.randint(1, 5, (1,), generator=g))] = True
    return start, end, passage


@pytest.mark.parametrize("seed", range(5))
def test_n_best_span_search_with_every_start_and_end_is_the_brute_force(seed):
    start, end, passage = random_batch(seed)
    val, i, j = squad_spans.n_best_span_search(start, end, passage, n_best=40, max_answer=7, top=3)
    for b in range(start.shape[0]):
        s, bi, bj = brute_force(start[b], end[b], passage[b], 7)
        assert (val[b, 0].item(), i[b, 0].item(), j[b, 0].item()) == pytest.approx((s, bi, bj), abs=1e-6)
        assert val[b, 0] >= val[b, 1] >= val[b, 2]
        assert passage[b, i[b]].all() and passage[b, j[b]].all() and (j[b] >= i[b]).all()


@pytest.mark.parametrize("seed", range(5))
def test_n_best_span_search_with_every_start_and_end_equals_the_articles_best_span(seed):
    start, end, passage = random_batch(seed)
    for max_answer in (7, 30):
        val, i, j = squad_spans.n_best_span_search(start, end, passage, n_best=start.shape[1], max_answer=max_answer)
        for b in range(start.shape[0]):
            s, bi, bj = sq.best_span(start[b], end[b], passage[b].nonzero().flatten().tolist(), max_answer)
            assert (val[b, 0].item(), i[b, 0].item(), j[b, 0].item()) == (s.item(), bi, bj)


def test_the_articles_toy_best_span_is_2_3_not_the_largest_cell():
    score = np.add.outer(TOY_START, TOY_END)                       # S.T_i + E.T_j
    assert np.unravel_index(score.argmax(), score.shape) == (2, 0) and score[2, 0] == pytest.approx(5.8)
    assert sq.best_span(TOY_START, TOY_END, range(4)) == (4.5, 2, 3)
    for n_best in (2, 4):                                          # the comment above n_best_span_search: n_best 2 finds it too
        val, i, j = squad_spans.n_best_span_search(torch.tensor([TOY_START]), torch.tensor([TOY_END]),
                                                   torch.ones(1, 4, dtype=torch.bool), n_best=n_best, max_answer=30)
        assert (val.item(), i.item(), j.item()) == (4.5, 2, 3)


@pytest.mark.parametrize("seed", range(5))
def test_n_best_span_search_with_n_best_pairs_the_top_starts_and_ends_of_the_window(seed):
    """As run_squad.py: the 5 best starts and ends of the whole window, then only pairs in the passage."""
    start, end, passage = random_batch(seed)
    start[:, -3:], end[:, -3:] = float("-inf"), float("-inf")      # padding, as score_windows hands it over
    val, i, j = squad_spans.n_best_span_search(start, end, passage, n_best=5, max_answer=30)
    for b in range(start.shape[0]):
        s_top = set(start[b, :-3].topk(5).indices.tolist())
        e_top = set(end[b, :-3].topk(5).indices.tolist())
        best = (float("-inf"), -1, -1)
        for x, y in itertools.product(s_top, e_top):
            if passage[b, x] and passage[b, y] and x <= y < x + 30 and start[b, x] + end[b, y] > best[0]:
                best = (float(start[b, x] + end[b, y]), x, y)
        if best[1] >= 0:
            assert (val[b, 0].item(), i[b, 0].item(), j[b, 0].item()) == pytest.approx(best, abs=1e-6)
        else:
            assert val[b, 0] == float("-inf")


def test_a_window_without_a_valid_span_scores_minus_infinity():
    start, end = torch.tensor([[0.0, 5.0, 1.0]]), torch.tensor([[0.0, 1.0, 5.0]])
    val, _, _ = squad_spans.n_best_span_search(start, end, torch.tensor([[False, False, False]]), n_best=20, max_answer=30)
    assert val[0, 0] == float("-inf")
    assert squad_spans.null_score(start, end).tolist() == [0.0]


# --- windows, padding, and the best span over all windows of a question ---

LONG = ("Ada Lovelace was born in London in 1815. " * 3 + "She wrote about the Analytical Engine. "
        "The machine was designed by Charles Babbage, and Ada wrote the first program for it. " * 2)


@pytest.fixture(scope="module")
def tiny_qa(tmp_path_factory):
    folder = save_tiny(str(tmp_path_factory.mktemp("tiny_qa")), BertForQuestionAnswering, seed=3)
    return folder, BertForQuestionAnswering.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def test_consecutive_windows_share_exactly_stride_passage_tokens(tiny_qa):
    _, _, tok = tiny_qa
    ex = [{"question": "Where was Ada born?", "context": LONG}]
    windows = squad_spans.make_windows(tok, ex, max_len=32, stride=8)
    assert len(windows) > 3 and all(w["example"] == 0 for w in windows)
    passages = [[tuple(o) for o, p in zip(w["offsets"], w["passage"]) if p] for w in windows]
    for a, b in zip(passages, passages[1:]):
        assert len(set(a) & set(b)) == 8
    assert all(len(w["input_ids"]) <= 32 for w in windows)


def test_the_coverage_check_finds_windows_that_stop_short_of_the_passage(tiny_qa):
    _, _, tok = tiny_qa
    examples = [{"question": "Where was Ada born?", "context": LONG}, {"question": "When?", "context": "Ada was born in 1815."},
                {"question": "Who?", "context": LONG}]
    windows = squad_spans.make_windows(tok, examples, max_len=32, stride=8)
    assert squad_spans.uncovered_questions(tok, examples, windows) == []
    last = max(k for k, w in enumerate(windows) if w["example"] == 0)
    dropped = windows[:last] + windows[last + 1:]                       # question 0 loses its last window
    assert squad_spans.uncovered_questions(tok, examples, dropped) == [0]
    cut = [dict(w) for w in windows]                                   # question 2's last window ends one token early
    last2 = max(k for k, w in enumerate(cut) if w["example"] == 2)
    end = max(t for t, p in enumerate(cut[last2]["passage"]) if p)
    cut[last2]["passage"] = [p and t != end for t, p in enumerate(cut[last2]["passage"])]
    assert squad_spans.uncovered_questions(tok, examples, cut) == [2]
    line = squad_spans.coverage_line(1, 3)
    assert "the windows of 1 of 3 questions stop before the end of their passage" in line and "tokenizers " in line
    assert squad_spans.coverage_line(0, 3) == ""


def test_the_span_search_pads_its_windows_as_the_tokenizer_pads(tiny_qa, monkeypatch):
    """The windows of a batch reach the model padded as the library pads them (tok.pad: pad id, token type 0,
    attention mask 0), with the passage mask False and the start and end scores -inf on the padding: one batch maker
    for training and search."""
    _, model, tok = tiny_qa
    examples = [{"question": "Where was Ada born?", "context": LONG}, {"question": "When?", "context": "Ada was born."}]
    windows = squad_spans.make_windows(tok, examples, max_len=40, stride=10)
    seen = []
    real = squad_spans.n_best_span_search

    def spy(start, end, passage, n_best, max_answer, top=1):
        seen.append((passage, start, end))
        return real(start, end, passage, n_best=n_best, max_answer=max_answer, top=top)
    monkeypatch.setattr(squad_spans, "n_best_span_search", spy)
    calls = []
    monkeypatch.setattr(model, "forward", lambda **inputs: calls.append(inputs) or type(model).forward(model, **inputs))
    squad_spans.score_windows(model, windows, squad_spans.SpanSearch(batch_size=3, n_best=20, max_answer=30), torch.device("cpu"))
    order = sorted(range(len(windows)), key=lambda w: len(windows[w]["input_ids"]))
    assert len(calls) == len(seen) == -(-len(windows) // 3)
    for k, (inputs, (passage, start, end)) in enumerate(zip(calls, seen)):
        rows = [windows[w] for w in order[3 * k:3 * k + 3]]
        ref = tok.pad({"input_ids": [w["input_ids"] for w in rows], "token_type_ids": [w["token_type_ids"] for w in rows]},
                      return_tensors="pt")
        assert set(inputs) == {"input_ids", "token_type_ids", "attention_mask"}
        for key in inputs:
            assert torch.equal(inputs[key], ref[key]), key
        L = ref["input_ids"].shape[1]
        assert passage.dtype == torch.bool
        assert passage.tolist() == [w["passage"] + [False] * (L - len(w["passage"])) for w in rows]
        padding = ref["attention_mask"] == 0                          # never among the n_best
        assert torch.equal(start.isneginf(), padding) and torch.equal(end.isneginf(), padding)


def test_predict_equals_an_unbatched_brute_force_over_all_windows(tiny_qa):
    _, model, tok = tiny_qa
    examples = [{"question": q, "context": c, "golds": ["x"]} for q, c in [
        ("Where was Ada born?", LONG), ("Who designed the machine?", LONG[40:]), ("When?", "Ada was born in 1815.")]]
    search = squad_spans.SpanSearch(max_len=40, stride=10, batch_size=3, n_best=64, max_answer=30)
    answers, timing = squad_spans.predict(model, tok, examples, search, device=torch.device("cpu"))
    windows = squad_spans.make_windows(tok, examples, 40, 10)
    assert timing["windows"] == len(windows) > len(examples)
    for q, ex in enumerate(examples):
        best, text, s_null = (float("-inf"),), "", float("inf")
        for w in (w for w in windows if w["example"] == q):   # one window at a time, no padding
            with torch.no_grad():
                out = model(input_ids=torch.tensor([w["input_ids"]]), token_type_ids=torch.tensor([w["token_type_ids"]]))
            s, e = out.start_logits[0], out.end_logits[0]
            s_null = min(s_null, float(s[0] + e[0]))
            cand = brute_force(s, e, w["passage"], 30)
            if cand[0] > best[0]:
                best, text = cand, ex["context"][w["offsets"][cand[1]][0]:w["offsets"][cand[2]][1]]
        assert answers[q]["score"] == pytest.approx(best[0], abs=1e-4)
        assert answers[q]["text"] == text
        assert answers[q]["s_null"] == pytest.approx(s_null, abs=1e-4)


def test_offsets_give_the_original_text_of_non_ascii_contexts(tiny_qa):
    _, _, tok = tiny_qa
    context = "Zürich café — naïve Ångström 東京 résumé"
    w = squad_spans.make_windows(tok, [{"question": "Where?", "context": context}], 64, 16)[0]
    pieces = [context[a:b] for (a, b), p in zip(w["offsets"], w["passage"]) if p]
    words = context.split()
    first = [k for k, p in enumerate(w["passage"]) if p][0]
    # the pieces of each word put back together give the word as written, accents and all
    assert "".join(pieces) == "".join(words)
    assert context[w["offsets"][first][0]:w["offsets"][first + len(pieces) - 1][1]] == context


# --- the official metrics ---

@pytest.mark.parametrize("pred, gold, f1, em", [
    ("The Denver Broncos.", "Denver Broncos", 1.0, 1),
    ("Bidirectional Encoder Representations", "Bidirectional Encoder Representations from Transformers", 0.75, 0),
    ("the Broncos defeated the Panthers", "Denver Broncos", 0.4, 0),
    ("eight", "2", 0.0, 0),
])
def test_the_articles_worked_em_f1_examples(pred, gold, f1, em):
    assert squad_metric.squad_f1(pred, gold) == pytest.approx(f1) == pytest.approx(squad_metric.squad_f1(pred, gold, "1.1"))
    assert squad_metric.exact_match(pred, gold) == em


def test_normalisation_and_the_official_edge_cases():
    assert squad_metric.normalize_answer("the Broncos defeated the Panthers") == "broncos defeated panthers"
    assert squad_metric.normalize_answer("  An apple,  a Day! ") == "apple day"
    # v2.0: a gold that normalises to nothing is dropped; with none left, only "" is right
    assert squad_metric.question_scores("", ["the"], "2.0") == (1, 1.0)
    assert squad_metric.question_scores("The", ["a"], "2.0") == (1, 1.0)
    assert squad_metric.question_scores("Denver", ["a", "Denver Broncos"], "2.0") == (0, pytest.approx(2 / 3))
    assert squad_metric.question_scores("", [], "2.0") == (1, 1.0)
    assert squad_metric.question_scores("Paris", [], "2.0") == (0, 0.0)
    # v1.1 keeps every gold, and scores F1 0 when nothing is shared, even two empty texts
    assert squad_metric.question_scores("The", ["a"], "1.1") == (1, 0.0)
    assert squad_metric.question_scores("Denver Broncos", ["Broncos", "the Denver Broncos"], "1.1") == (1, 1.0)
    # repeated words count as often as they appear in both
    assert squad_metric.squad_f1("a b b b", "b b c") == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))


# --- the tau sweep ---

def random_v2(seed, n=60):
    rng = np.random.default_rng(seed)
    golds = [[] if rng.random() < 0.5 else [f"w{rng.integers(3)} x"] for _ in range(n)]
    texts = [f"w{rng.integers(3)} {'x' if rng.random() < 0.5 else 'y'}" for _ in range(n)]
    diff = rng.normal(0, 3, n)
    return golds, texts, diff


@pytest.mark.parametrize("seed", range(3))
def test_tau_sweep_against_a_direct_recomputation(seed):
    golds, texts, diff = random_v2(seed)
    em_ans, f1_ans = map(np.array, zip(*(squad_metric.question_scores(t, g, "2.0") for t, g in zip(texts, golds))))
    null = np.array([float(not g) for g in golds])
    taus = [-2.0, -0.5, 0.0, 1.25, 4.0]
    rows = squad_spans.tau_sweep(diff, np.zeros(len(diff)), em_ans, f1_ans, em_f1_null=null, taus=taus)  # s_hat=diff, s_null=0
    for tau, row in zip(taus, rows):
        preds = [t if d > tau else "" for t, d in zip(texts, diff)]
        scores = [squad_metric.question_scores(p, g, "2.0") for p, g in zip(preds, golds)]
        assert row["f1"] == pytest.approx(100 * np.mean([s[1] for s in scores]))
        assert row["em"] == pytest.approx(100 * np.mean([s[0] for s in scores]))
        assert row["answered"] == pytest.approx(100 * np.mean([p != "" for p in preds]))


@pytest.mark.parametrize("seed", range(3))
def test_official_best_tau_is_the_best_of_every_official_threshold(seed):
    golds, texts, diff = random_v2(seed)
    f1_ans = np.array([squad_metric.question_scores(t, g, "2.0")[1] for t, g in zip(texts, golds)])
    has = np.array([bool(g) for g in golds])
    got = squad_spans.official_best_tau(diff, f1_ans, has, np.ones(len(texts), bool))
    na_prob = -diff   # evaluate-v2.0.py: answered iff na_prob <= threshold
    brute = [(100 * np.mean(np.where(na_prob <= t, f1_ans, (~has).astype(float))), t) for t in [-np.inf, *sorted(na_prob)]]
    best = max(s for s, _ in brute)
    assert got["f1"] == pytest.approx(best)
    answered = na_prob <= got["threshold"] if got["answered"] > 0 else np.zeros(len(diff), bool)
    assert 100 * np.mean(np.where(answered, f1_ans, (~has).astype(float))) == pytest.approx(best)
    assert got["tau"] == -got["threshold"] or got["threshold"] == 0


# --- main end to end on a tiny QA model and SQuAD files the test writes ---

def squad_file(path, v2):
    qas = [("Where was Ada born?", "London"), ("When was Ada born?", "1815"),
           ("Who designed the machine?", "Charles Babbage"), ("What did Ada write?", None),
           ("Who won the cup?", None)]
    context = LONG
    paragraphs = [{"context": context, "qas": []}]
    for k, (q, a) in enumerate(qas):
        if a is None and not v2:
            continue
        qa = {"id": f"q{k}", "question": q, "answers": [] if a is None else [{"text": a, "answer_start": context.find(a)}]}
        if v2:
            qa["is_impossible"] = a is None
        paragraphs[0]["qas"].append(qa)
    with open(path, "w") as f:
        json.dump({"version": "v2.0" if v2 else "1.1", "data": [{"title": "Ada", "paragraphs": paragraphs}]}, f)
    return str(path)


def test_main_end_to_end_writes_the_official_files(tiny_qa, tmp_path):
    folder = tiny_qa[0]
    v1, v2 = squad_file(tmp_path / "v1.json", False), squad_file(tmp_path / "v2.json", True)
    out = tmp_path / "results"
    argv = ["--v1-model", folder, "--v2-model", folder, "--v1-data", v1, "--v2-data", v2, "--max-len", "48",
            "--stride", "16", "--results-dir", str(out), "--device", "cpu", "--tau-step", "0.5"]
    assert sq.main(argv) == 0
    r = json.loads((out / "part4_squad.json").read_text())
    preds1 = json.loads((out / "squad_v1_predictions.json").read_text())
    examples1 = readers.read_squad_json(v1, "1.1", "--v1-data")
    assert r["v1_dev"]["n"] == len(preds1) == 3 and r["v1_dev"]["windows"] > 3
    em, f1 = zip(*(squad_metric.question_scores(preds1[ex["id"]], ex["golds"], "1.1") for ex in examples1))
    assert r["v1_dev"]["em"] == pytest.approx(100 * np.mean(em)) and r["v1_dev"]["f1"] == pytest.approx(100 * np.mean(f1))
    assert all(p in LONG for p in preds1.values())
    v2r = r["v2_dev"]
    assert v2r["n"] == 5 and v2r["n_noans"] == 2 and len(v2r["sweep"]) == 25
    assert v2r["best"]["f1"] == max(row["f1"] for row in v2r["sweep"])
    assert v2r["exact_best"]["f1"] >= v2r["best"]["f1"] - 1e-9
    nonnull = json.loads((out / "squad_v2_nonnull_predictions.json").read_text())
    odds = json.loads((out / "squad_v2_null_odds.json").read_text())
    final = json.loads((out / "squad_v2_predictions.json").read_text())
    tau = v2r["best"]["tau"]
    assert final == {k: (nonnull[k] if -odds[k] > tau else "") for k in nonnull}
    assert len(r["v1_demo"]) == 4 and all(d["hand_gap"] < 1e-4 for d in r["v1_demo"])
    assert [d["question"] for d in r["v2_demo"]] == sq.V2_QUESTIONS
    log = (out / "part4_squad.log").read_text()
    assert f"SQuAD v1.1 dev: 3 questions ({r['v1_dev']['windows']} windows of 48 tokens, stride 16)" in log
    assert f"best tau = {tau:+.2f}: F1 {v2r['best']['f1']:.2f}" in log
    assert log.splitlines()[-1] == (f"written: {out}/part4_squad.log, .json, squad_v1_predictions.json, "
                                    f"squad_v2_predictions.json, squad_v2_nonnull_predictions.json, squad_v2_null_odds.json")
    if has_matplotlib():
        assert (out / "part4_squad_tau_sweep.png").stat().st_size > 1000


def has_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def test_only_and_max_dev_examples(tiny_qa, tmp_path):
    v1 = squad_file(tmp_path / "v1.json", False)
    out = tmp_path / "results"
    assert sq.main(["--v1-model", tiny_qa[0], "--v1-data", v1, "--only", "v1", "--max-dev-examples", "2",
                    "--results-dir", str(out), "--device", "cpu"]) == 0
    r = json.loads((out / "part4_squad.json").read_text())
    assert r["v1_dev"]["n"] == 2 and "v2_dev" not in r and "v1_demo" not in r


def test_a_run_of_other_settings_never_replaces_the_results(tiny_qa, tmp_path, capsys):
    """Results of other settings are not replaced (a quick check must not overwrite a full dev set's): refused before
    any work in one line naming what differs, every file left as it was; the same command again replaces them."""
    v1 = squad_file(tmp_path / "v1.json", False)
    out = tmp_path / "results"
    argv = ["--v1-model", tiny_qa[0], "--v1-data", v1, "--only", "v1", "--results-dir", str(out), "--device", "cpu"]
    assert sq.main([*argv, "--max-dev-examples", "3"]) == 0
    written = {f: (out / f).read_bytes() for f in os.listdir(out)}
    capsys.readouterr()
    for more, said in ((["--max-dev-examples", "2"], "max_dev_examples 3 -> 2"),
                       (["--max-dev-examples", "3", "--stride", "64"], "stride 128 -> 64")):
        assert run_cli(sq.main, [*argv, *more]) == 2
        assert capsys.readouterr().err.strip() == (f"error: {out / 'part4_squad.json'}: results of other settings "
                                                   f"({said}); refusing to overwrite them: pass --results-dir, or delete it")
        assert {f: (out / f).read_bytes() for f in os.listdir(out)} == written
    assert sq.main([*argv, "--max-dev-examples", "3", "--device", "cpu"]) == 0
    saved = json.loads((out / "part4_squad.json").read_text())               # as an earlier version recorded it
    saved["run"]["config"]["limit"] = saved["run"]["config"].pop("max_dev_examples")
    (out / "part4_squad.json").write_text(json.dumps(saved))
    capsys.readouterr()
    assert run_cli(sq.main, [*argv, "--max-dev-examples", "2"]) == 2
    assert "results of other settings (max_dev_examples 3 -> 2)" in capsys.readouterr().err


def test_a_dev_file_of_another_size_is_labelled_another_split(tiny_qa, tmp_path):
    """Beside our numbers the article's are labelled with what sets the two dev sets apart: another file of another
    number of questions is said as another split, a cut run as the first N of the full dev set."""
    folder = tiny_qa[0]
    v1, v2 = squad_file(tmp_path / "v1.json", False), squad_file(tmp_path / "v2.json", True)
    sizes = {v: sum(len(p["qas"]) for a in json.loads(open(f).read())["data"] for p in a["paragraphs"])
             for v, f in (("v1", v1), ("v2", v2))}
    argv = ["--v1-model", folder, "--v2-model", folder, "--v1-data", v1, "--v2-data", v2, "--only", "v1", "--only", "v2",
            "--max-len", "48", "--stride", "16", "--device", "cpu", "--tau-step", "1"]
    assert sq.main([*argv, "--results-dir", str(tmp_path / "a")]) == 0
    log = (tmp_path / "a" / "part4_squad.log").read_text()
    assert f"[article, on the dev set's 10,570 questions (this file: {sizes['v1']}, another split): EM " in log
    assert f"[article, on the dev set's 11,873 questions (this file: {sizes['v2']}, another split): F1 " in log
    assert "[article: " not in log
    assert sq.main([*argv, "--max-dev-examples", "2", "--results-dir", str(tmp_path / "b")]) == 0
    log = (tmp_path / "b" / "part4_squad.log").read_text()
    assert "[article, on the full dev set (this run: the first 2): EM " in log and "another split" not in log


def test_a_window_too_short_for_its_stride_is_one_line_naming_the_max_len_needed(tiny_qa, tmp_path, capsys):
    """A window must hold more passage tokens than two windows share (the tokenizer panics otherwise): with the
    longest question's tokens, [CLS] and two [SEP], --max-len L leaves L - q - 3; at exactly the stride the command
    is refused in one line naming the --max-len needed, and runs with it."""
    folder, _, tok = tiny_qa
    v1 = squad_file(tmp_path / "v1.json", False)
    with open(v1) as f:
        questions = [qa["question"] for qa in json.load(f)["data"][0]["paragraphs"][0]["qas"]]
    longest = max(len(tok.tokenize(q)) for q in questions)
    stride = 8
    argv = ["--v1-model", folder, "--v1-data", v1, "--only", "v1", "--stride", str(stride), "--device", "cpu",
            "--results-dir", str(tmp_path / "out")]
    assert run_cli(sq.main, [*argv, "--max-len", str(longest + 3 + stride)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"the longest question ({longest} tokens) leaves room for {stride} passage tokens in a window, "
                        f"not more than the {stride} that two windows share; pass --max-len {longest + 3 + stride + 1} "
                        f"or more, or a smaller --stride") and "\n" not in err, err
    assert not (tmp_path / "out").exists()
    assert sq.main([*argv, "--max-len", str(longest + 3 + stride + 1)]) == 0


def test_the_results_guard_compares_the_dtype_as_run(tiny_qa, tmp_path, capsys):
    """--dtype auto on the CPU runs in fp32: its results are those of --dtype fp32, replaced by it (never refused as
    other settings); a bf16 run is another computation, refused before any work, naming the dtypes as they ran."""
    v1 = squad_file(tmp_path / "v1.json", False)
    out = tmp_path / "results"
    argv = ["--v1-model", tiny_qa[0], "--v1-data", v1, "--only", "v1", "--max-dev-examples", "2",
            "--results-dir", str(out), "--device", "cpu"]
    assert sq.main([*argv, "--dtype", "auto"]) == 0
    assert json.loads((out / "part4_squad.json").read_text())["config"]["dtype"] == "fp32"
    assert sq.main([*argv, "--dtype", "fp32"]) == 0
    capsys.readouterr()
    assert run_cli(sq.main, [*argv, "--dtype", "bf16"]) == 2
    assert "results of other settings (dtype 'fp32' -> 'bf16')" in capsys.readouterr().err


# --- bad input: one line, non-zero exit, no results ---

def test_bad_inputs_are_one_line_errors(tiny_qa, tiny_bert_dir, tmp_path, capsys):
    folder = tiny_qa[0]
    v1, v2 = squad_file(tmp_path / "v1.json", False), squad_file(tmp_path / "v2.json", True)
    (tmp_path / "bad.json").write_text('{"data": [{"title": "x"}]}')
    (tmp_path / "notjson.json").write_text("hello")
    out = tmp_path / "results"
    base = ["--v1-model", folder, "--v2-model", folder, "--results-dir", str(out), "--device", "cpu"]
    cases = [
        (["--only", "v1", "--v1-data", v1, "--max-dev-examples", "0"], "--max-dev-examples 0"),
        (["--only", "v1", "--v1-data", v1, "--stride", "384"], "--stride 384"),
        (["--only", "v1", "--v1-data", str(tmp_path / "missing.json")], "no such file"),
        (["--only", "v1", "--v1-data", str(tmp_path / "bad.json")], "not an official SQuAD JSON file"),
        (["--only", "v1", "--v1-data", str(tmp_path / "notjson.json")], "not an official SQuAD JSON file"),
        (["--only", "v2", "--v2-data", v1], "looks like SQuAD v1.1"),
        (["--only", "v1", "--v1-data", v2], "looks like SQuAD v2.0"),
        (["--only", "v1", "--v1-data", v1, "--max-len", "1000"], "above the model's 512 positions"),
        (["--only", "v1", "--v1-data", v1, "--v1-model", tiny_bert_dir], "has no question-answering head"),
    ]
    for extra, message in cases:
        assert run_cli(sq.main, base + extra) == 2, message
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and message in err and "\n" not in err, err
    assert not out.exists()


@needs_shared_data
def test_the_real_dev_files_read_with_their_counts():
    v1 = readers.read_squad_json(os.path.join(SHARED_DATA, "squad", "dev-v1.1.json"), "1.1", "--v1-data")
    v2 = readers.read_squad_json(os.path.join(SHARED_DATA, "squad", "dev-v2.0.json"), "2.0", "--v2-data")
    assert len(v1) == 10570 and len(v2) == 11873
    assert sum(not ex["golds"] for ex in v2) == 5945
    assert v1[0]["question"] == "Which NFL team represented the AFC at Super Bowl 50?"


def test_hub_rows_are_read_like_the_official_files(monkeypatch):
    rows = [{"id": "a", "question": "Q?", "context": "ctx", "answers": {"text": ["x", "y"], "answer_start": [0, 1]}},
            {"id": "b", "question": "Q2?", "context": "ctx", "answers": {"text": [], "answer_start": []}}]
    monkeypatch.setattr(readers, "load_hub_dataset",
                        lambda name, config, split, flag: rows if name == "rajpurkar/squad_v2" else 1 / 0)
    ex = readers.read_squad(None, "2.0", "--v2-data")
    assert [(e["id"], e["golds"], e["impossible"]) for e in ex] == [("a", ["x", "y"], False), ("b", [], True)]


def test_the_tau_grid_never_passes_tau_max():
    assert squad_spans.tau_grid(-6, 6, 0.25).tolist() == [-6 + 0.25 * k for k in range(49)]
    assert squad_spans.tau_grid(-6, 5.9, 0.25)[-1] == 5.75                     # 48 steps would end at 6.0, past 5.9
    assert squad_spans.tau_grid(0.1, 1.0, 0.3)[-1] == pytest.approx(1.0) and len(squad_spans.tau_grid(0.1, 1.0, 0.3)) == 4


def number_literals(path, values):
    """The numbers of `values` written as literals in a Python file's code (strings and comments are not code)."""
    with open(path, "rb") as f:
        return sorted(t.string for t in tokenize.tokenize(f.readline) if t.type == tokenize.NUMBER and t.string in values)


def test_the_span_search_settings_have_one_home():
    """run_squad.py's windows of 384 tokens and its doc_stride of 128 (here the tokens two windows share), its 20 best
    starts and ends and answers of at most 30 tokens, and 64 windows a forward pass are defined once, in the recipe
    (part4/paper/recipe.py, which the command lines read without torch); the SQuAD script's defaults, SpanSearch's,
    the fine-tuning's evaluation and the math script read them from there."""
    assert (recipe.MAX_LEN, recipe.STRIDE, recipe.N_BEST, recipe.MAX_ANSWER, recipe.SPAN_BATCH_SIZE) == (384, 128, 20, 30, 64)
    args = script_settings.parse_squad([])
    assert (args.max_len, args.stride, args.n_best, args.max_answer, args.batch_size) == (384, 128, 20, 30, 64)
    assert squad_spans.SpanSearch() == squad_spans.SpanSearch(max_len=384, stride=128, batch_size=64, n_best=20, max_answer=30)
    assert squad_spans.SpanExtraction.eval_batch_size == 64
    values = ("384", "128", "64", "20", "30")
    assert number_literals(os.path.join(ROOT, "part4", "tasks", "squad_spans.py"), values) == []
    # the windows' 384 once; 128 is also GLUE's and SWAG's input length and their evaluation batch, 30 also the
    # article's number of evaluations
    assert number_literals(os.path.join(ROOT, "part4", "paper", "recipe.py"), values) == ["128", "128", "128", "128", "20",
                                                                                 "30", "30", "384", "64"]
    assert number_literals(os.path.join(ROOT, "part4", "command_line", "script_settings.py"), values) == []
    assert number_literals(os.path.join(ROOT, "bert_part4_math.py"), values) == []
    assert number_literals(os.path.join(ROOT, "bert_part4_squad.py"), values) == ["30"]  # best_span as the article prints it
    assert number_literals(os.path.join(ROOT, "part4", "tasks", "families.py"), values) == []   # its eval batch: the recipe's
