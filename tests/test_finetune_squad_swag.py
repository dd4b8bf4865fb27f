"""bert_part4_finetune.py on SQuAD v1.1, SQuAD v2.0 and SWAG: targets against brute force, the span loss,
saved models, end to end on tiny models, and every bad input of the issue."""

import csv
import json
import os
import random

import numpy as np
import pytest
import torch
from conftest import SHARED_DATA, needs_shared_data
from transformers import AutoTokenizer, BertForMultipleChoice, BertForQuestionAnswering

import bert_part4_finetune as ft
import bert_part4_squad as sq
from part4.command_line import fine_tune_settings
from part4.command_line.declarations import Fatal
from part4.data import readers
from part4.data.batches import collate, epoch_batches
from part4.models.loading import run_cli
from part4.run import command, training_run
from part4.tasks import families, squad_metric, squad_spans

# --- training targets: the start and end token of the answer, or [CLS] ---


def brute_force_targets(offsets, passage, a, b):
    """Among all passage spans (i <= j) whose characters cover [a, b), the tightest; (0, 0) if none."""
    best = None
    tokens = [t for t, p in enumerate(passage) if p]
    for i in tokens:
        for j in tokens:
            if i <= j and offsets[i][0] <= a and offsets[j][1] >= b:
                width = offsets[j][1] - offsets[i][0]
                if best is None or width < best[0]:
                    best = (width, i, j)
    return (best[1], best[2]) if best else (0, 0)


LONG = ("Ada Lovelace was born in London in 1815. " * 3 + "She wrote about the Analytical Engine. "
        "The machine was designed by Charles Babbage, and Ada wrote the first program for it. " * 2)


@pytest.fixture(scope="module")
def tok(tiny_qa_dir):
    return AutoTokenizer.from_pretrained(tiny_qa_dir)


def every_answer(context, words):
    """(answer text, start) for every occurrence of every word or phrase in the context."""
    out = []
    for w in words:
        k = context.find(w)
        while k >= 0:
            out.append((w, k))
            k = context.find(w, k + 1)
    return out


@pytest.mark.parametrize("max_len, stride", [(32, 8), (40, 16), (64, 4)])
def test_targets_equal_the_brute_force_in_every_window(tok, max_len, stride):
    answers = every_answer(LONG, ["London", "born in London in 1815", "Charles Babbage", "first program for it",
                                  "Analytical Engine. The machine"])
    examples = [{"question": "Where was Ada born?", "context": LONG, "golds": [t], "starts": [s], "impossible": False}
                for t, s in answers]
    windows = squad_spans.make_windows(tok, examples, max_len, stride)
    straddled, held = 0, 0
    for w in windows:
        t, s = answers[w["example"]]
        got = squad_spans.span_targets(w["offsets"], w["passage"], s, s + len(t))
        assert got == brute_force_targets(w["offsets"], w["passage"], s, s + len(t))
        if got != (0, 0):
            held += 1
            i, j = got
            assert LONG[w["offsets"][i][0]:w["offsets"][j][1]].lower() == t.lower()    # exactly the answer's words
    for q in range(len(examples)):                                                     # answers cut by a window edge
        ws = [w for w in windows if w["example"] == q]
        t, s = answers[q]
        inside = [squad_spans.span_targets(w["offsets"], w["passage"], s, s + len(t)) != (0, 0) for w in ws]
        touching = [any(p and w["offsets"][k][0] < s + len(t) and w["offsets"][k][1] > s for k, p in enumerate(w["passage"]))
                    for w in ws]
        straddled += sum(tc and not ins for tc, ins in zip(touching, inside))
        if t in ("London", "Charles Babbage"):
            assert any(inside)                          # a short answer is whole in at least one window
    assert held >= len(examples) // 2 and straddled > 0  # and some answers are cut by a window's edge


def test_targets_on_non_ascii_text(tok):
    context = "Zürich café — naïve Ångström 東京 résumé and more text about Zürich café here"
    examples = [{"question": "Where?", "context": context, "golds": [t], "starts": [s], "impossible": False}
                for t, s in every_answer(context, ["Ångström", "naïve Ångström 東京", "résumé", "東京"])]
    enc = squad_spans.encode_squad(tok, examples, 64, 16)
    windows = squad_spans.make_windows(tok, examples, 64, 16)
    for w, i, j in zip(windows, enc["start_positions"], enc["end_positions"]):
        ex = examples[w["example"]]
        assert (i, j) == brute_force_targets(w["offsets"], w["passage"], ex["starts"][0],
                                             ex["starts"][0] + len(ex["golds"][0]))
        assert context[w["offsets"][i][0]:w["offsets"][j][1]] == ex["golds"][0]


def test_unanswerable_questions_and_bad_answer_starts(tok):
    examples = [{"question": "Who won the cup?", "context": LONG, "golds": [], "starts": [], "impossible": True},
                {"question": "Where was Ada born?", "context": LONG, "golds": ["London"], "starts": [3],
                 "impossible": False},                                      # answer_start does not point at London
                {"question": "Where was Ada born?", "context": LONG, "golds": ["London"], "starts": [LONG.find("London")],
                 "impossible": False}]
    enc = squad_spans.encode_squad(tok, examples, 32, 8)
    assert enc["skipped"] == 1 and enc["questions"] == 2
    windows = squad_spans.make_windows(tok, [examples[0], examples[2]], 32, 8)
    assert len(enc["start_positions"]) == len(windows)
    for w, i, j in zip(windows, enc["start_positions"], enc["end_positions"]):
        if w["example"] == 0:
            assert (i, j) == (0, 0)                                          # unanswerable: every window -> [CLS]
    assert enc["to_cls"] == sum(1 for i in enc["start_positions"] if i == 0) > 0


# --- the span loss ---

def test_span_loss_is_the_formula_and_ignores_padding(tiny_qa_dir, tok):
    model = BertForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    examples = [{"question": "Where was Ada born?", "context": LONG[:k], "golds": ["London"],
                 "starts": [LONG.find("London")], "impossible": False} for k in (60, 120, 200)]
    enc = squad_spans.encode_squad(tok, examples, 64, 16)
    idx = list(range(len(enc["input_ids"])))
    dynamic = collate(enc, idx, torch.device("cpu"))
    padded = collate(enc, idx, torch.device("cpu"), pad_to=96)
    with torch.no_grad():
        a, b = squad_spans.SpanExtraction.loss(model, dynamic), squad_spans.SpanExtraction.loss(model, padded)
        out = model(input_ids=dynamic["input_ids"], token_type_ids=dynamic["token_type_ids"],
                    attention_mask=dynamic["attention_mask"])
    assert a.item() == pytest.approx(b.item(), abs=1e-5)
    by_hand = []
    for r in idx:                                          # -(log P_start(s) + log P_end(e)) / 2, one window at a time
        n = int(dynamic["attention_mask"][r].sum())
        ls = torch.log_softmax(out.start_logits[r, :n], -1)[enc["start_positions"][r]]
        le = torch.log_softmax(out.end_logits[r, :n], -1)[enc["end_positions"][r]]
        by_hand.append(-(ls + le).item() / 2)
    assert a.item() == pytest.approx(np.mean(by_hand), abs=1e-5)


def test_grouped_batches_are_a_permutation_of_every_row():
    lengths = [random.Random(k).randrange(10, 384) for k in range(1000)]
    plan = epoch_batches(1000, 32, 2, 0, lengths)
    for batches in plan:
        rows = sorted(i for b in batches for i in b)
        assert rows == list(range(1000)) and len(batches) == 32
    spread = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in plan[0]])
    plain = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in epoch_batches(1000, 32, 1, 0)[0]])
    assert spread < plain / 4


# --- saved models ---

def test_save_model_reloads_with_identical_logits_and_is_atomic(tiny_qa_dir, tmp_path, monkeypatch):
    model = BertForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_qa_dir)
    target = tmp_path / "saved"
    training_run.save_model_folder(model, tok, str(target))
    again = BertForQuestionAnswering.from_pretrained(str(target)).eval()
    enc = tok("Where was Ada born?", LONG[:80], return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(model(**enc).start_logits, again(**enc).start_logits)
    assert (target / "model.safetensors").exists() and (target / "tokenizer_config.json").exists()

    def broken(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(type(model), "save_pretrained", broken)
    with pytest.raises(Fatal, match=r"never: not written \(disk full\); nothing half-written is left$"):
        training_run.save_model_folder(model, tok, str(tmp_path / "never"))
    assert not (tmp_path / "never").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved"]              # no half-written folder left
    with pytest.raises(Fatal, match=r"saved: not written \(disk full\); nothing half-written is left$"):
        training_run.save_model_folder(model, tok, str(target))
    assert torch.equal(BertForQuestionAnswering.from_pretrained(str(target)).qa_outputs.weight, model.qa_outputs.weight)


def test_a_saved_model_folder_has_the_permissions_of_the_umask(tiny_qa_dir, tmp_path):
    """A colleague on the same machine can load it: 0755 / 0644 under umask 022, like every other file we write."""
    model = BertForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_qa_dir)
    old = os.umask(0o022)
    try:
        training_run.save_model_folder(model, tok, str(tmp_path / "saved"))
    finally:
        os.umask(old)
    assert oct((tmp_path / "saved").stat().st_mode & 0o777) == oct(0o755)
    files = list((tmp_path / "saved").iterdir())
    assert len(files) >= 4 and {oct(f.stat().st_mode & 0o777) for f in files} == {oct(0o644)}


# --- SQuAD end to end on a tiny model and files the test writes ---

QUESTIONS = [("Where was Ada born?", "London"), ("When was Ada born?", "1815"), ("Who designed the machine?", "Charles Babbage"),
             ("What did Ada write?", "the first program"), ("What did she write about?", "the Analytical Engine")]


def squad_json(path, n, v2, seed=0, bad_start=False):
    rng = random.Random(seed)
    paragraphs = []
    for p in range(n // 5 + 1):
        qas = []
        for k, (q, a) in enumerate(QUESTIONS):
            impossible = v2 and rng.random() < 0.3
            start = LONG.find(a) + (1 if bad_start and k == 0 and p == 0 else 0)
            qa = {"id": f"p{p}q{k}", "question": q,
                  "answers": [] if impossible else [{"text": a, "answer_start": start}]}
            if v2:
                qa["is_impossible"] = impossible
            qas.append(qa)
        paragraphs.append({"context": LONG, "qas": qas})
    with open(path, "w") as f:
        json.dump({"version": "v2.0" if v2 else "1.1", "data": [{"title": "Ada", "paragraphs": paragraphs}]}, f)
    return str(path)


def test_squad_fine_tune_end_to_end_and_squad_script_agrees(tiny_bert_dir, tmp_path):
    train = squad_json(tmp_path / "train.json", 40, False, bad_start=True)
    dev = squad_json(tmp_path / "dev.json", 10, False, seed=1)
    out, saved = tmp_path / "r", tmp_path / "models" / "squad"
    assert ft.main(["squad", "3e-4", "--model", tiny_bert_dir, "--train-data", train, "--dev-data", dev, "--max-len", "48",
                    "--stride", "16", "--batch-size", "8", "--epochs", "3", "--results-dir", str(out),
                    "--save-model", str(saved), "--device", "cpu"]) == 0
    r = json.loads((out / "part4_squad_lr3e-4_bs8.json").read_text())
    log = (out / "part4_squad_lr3e-4_bs8.log").read_text().splitlines()
    assert "questions skipped because answer_start does not match the context: 1" in log
    assert r["steps"] == 3 * -(-r["train_rows"] // 8) and len(r["curve"]) == 3          # once per epoch
    assert [c["epoch"] for c in r["curve"]] == [1, 2, 3]
    final = r["final"]["dev"]
    assert final["n"] == 15 and r["curve"][-1]["train_loss"] < r["curve"][0]["train_loss"]
    line = next(x for x in log if x.startswith("FINAL "))
    assert line.startswith(f"FINAL squad dev EM {final['em']:.2f}, F1 {final['f1']:.2f} (15 questions")
    assert "[paper, BERT-base dev (Table 2): EM 80.8, F1 88.5]" in line
    assert log[-1] == f"written: {out}/part4_squad_lr3e-4_bs8.log, .json"
    assert (saved / "model.safetensors").exists() and r["saved_model"].startswith("squad@")
    # bert_part4_squad.py on the saved model gives the FINAL line's numbers
    assert sq.main(["--v1-model", str(saved), "--v1-data", dev, "--only", "v1", "--max-len", "48", "--stride", "16",
                    "--results-dir", str(tmp_path / "sq"), "--device", "cpu"]) == 0
    v1 = json.loads((tmp_path / "sq" / "part4_squad.json").read_text())["v1_dev"]
    assert (round(v1["em"], 6), round(v1["f1"], 6)) == (round(final["em"], 6), round(final["f1"], 6))


def test_squad_v2_fine_tune_end_to_end(tiny_bert_dir, tmp_path):
    train = squad_json(tmp_path / "train.json", 30, True)
    dev = squad_json(tmp_path / "dev.json", 10, True, seed=2)
    out, saved = tmp_path / "r", tmp_path / "v2model"
    assert ft.main(["squad_v2", "--model", tiny_bert_dir, "--train-data", train, "--dev-data", dev, "--max-len", "48",
                    "--stride", "16", "--epochs", "1", "--batch-size", "8", "--results-dir", str(out),
                    "--save-model", str(saved), "--device", "cpu"]) == 0
    r = json.loads((out / "part4_squad_v2_lr5e-5_bs8_ep1.json").read_text())
    final = r["final"]["dev"]
    assert final["has_ans"]["n"] + final["no_ans"]["n"] == final["n"] == 15
    assert final["best"]["f1"] >= final["at0"]["f1"] and final["f1"] == final["at0"]["f1"]
    assert "the paper gives no BERT-base v2.0 number" in (out / "part4_squad_v2_lr5e-5_bs8_ep1.log").read_text()
    assert sq.main(["--v2-model", str(saved), "--v2-data", dev, "--only", "v2", "--max-len", "48", "--stride", "16",
                    "--results-dir", str(tmp_path / "sq"), "--device", "cpu"]) == 0
    v2 = json.loads((tmp_path / "sq" / "part4_squad.json").read_text())["v2_dev"]
    assert v2["at0"] == pytest.approx(final["at0"]) and v2["best"] == pytest.approx(final["best"])
    assert v2["has_ans"] == pytest.approx(final["has_ans"]) and v2["no_ans"] == pytest.approx(final["no_ans"])


def test_squad_defaults_are_the_papers():
    for task, (lr, batch, epochs) in (("squad", (5e-5, 32, 3)), ("squad_v2", (5e-5, 48, 2)), ("swag", (2e-5, 16, 3)),
                                      ("mrpc", (2e-5, 32, 3))):
        settings = fine_tune_settings.parse([task])
        assert (settings.lr, settings.batch_size, settings.epochs) == (lr, batch, epochs)
    assert fine_tune_settings.parse(["squad"]).max_len == 384 and fine_tune_settings.parse(["squad"]).stride == 128
    for task, evals in (("squad", 3), ("squad_v2", 2), ("sst2", 30)):      # SQuAD once per epoch, GLUE the article's 30
        settings = fine_tune_settings.parse([task])
        assert [job.dev_evaluations for job in ft.planned_jobs(command.task_inputs(settings, task)[0])] == [evals]


# --- SWAG: a CSV in the official layout whose right ending follows a learnable rule ---

SWAG_HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0", "ending1", "ending2",
               "ending3", "label"]


def swag_rows(n, seed):
    """The right ending is the only one with a word of GOOD; the three others each have a word of BAD."""
    rng = random.Random(seed)
    good, bad, filler = ["good", "great", "witty"], ["bad", "dull", "worse"], ["the", "movie", "film", "plot", "is", "a"]
    rows = []
    for k in range(n):
        label = rng.randrange(4)
        endings = [" ".join(rng.sample(filler, 3) + [rng.choice(good if e == label else bad)]) for e in range(4)]
        sent1, sent2 = " ".join(rng.sample(filler, 4)), "the film"
        rows.append([str(k), f"v{k}", str(k), f"{sent1} {sent2}", sent1, sent2, "gold", *endings, str(label)])
    return rows


def write_swag(folder, n_train=480, n_dev=64, header=SWAG_HEADER, label=None):
    os.makedirs(folder, exist_ok=True)
    for name, n, seed in (("train.csv", n_train, 0), ("val.csv", n_dev, 1)):
        rows = swag_rows(n, seed)
        if label is not None:
            rows[3][-1] = label
        with open(os.path.join(folder, name), "w", newline="") as f:
            csv.writer(f).writerows([header, *rows])
    return folder


def test_swag_reader_and_the_four_inputs(tmp_path, tok):
    folder = write_swag(str(tmp_path / "swag"), n_train=8, n_dev=4)
    rows = readers.read_swag_csv(os.path.join(folder, "train.csv"))
    raw = swag_rows(8, 0)
    assert rows[0] == (raw[0][4], [f"{raw[0][5]} {raw[0][7 + k]}" for k in range(4)], int(raw[0][-1]))
    enc = families.encode_swag(tok, rows, 128)
    batch = collate(enc, [0, 1, 2], torch.device("cpu"))
    assert batch["input_ids"].shape[:2] == (3, 4) and batch["labels"].tolist() == [r[2] for r in rows[:3]]
    for k in range(4):
        assert batch["input_ids"][1, k, :len(enc["input_ids"][1][k])].tolist() == enc["input_ids"][1][k]


def test_a_tiny_multiple_choice_model_beats_chance_on_swag(tiny_bert_dir, tmp_path):
    folder = write_swag(str(tmp_path / "swag"))
    out, saved = tmp_path / "r", tmp_path / "swag_model"
    assert ft.main(["swag", "1e-3", "--model", tiny_bert_dir, "--data-dir", folder, "--epochs", "4", "--results-dir",
                    str(out), "--save-model", str(saved), "--device", "cpu"]) == 0
    r = json.loads((out / "part4_swag_lr1e-3_ep4.json").read_text())
    final = r["final"]["dev"]
    assert final["n"] == 64 and final["accuracy"] >= 0.6 > r["before"]["dev"]["accuracy"] + 0.2
    assert final["correct"] == round(final["accuracy"] * 64)
    assert "[paper, BERT-base dev (Table 4): accuracy 81.6]" in (out / "part4_swag_lr1e-3_ep4.log").read_text()
    model = BertForMultipleChoice.from_pretrained(str(saved))
    assert model.classifier.weight.shape == (1, 32)


# --- bad input: one clear line, non-zero exit, nothing that looks complete ---

def test_bad_inputs_are_one_line_errors(tiny_bert_dir, tmp_path, capsys):
    v1, v2 = squad_json(tmp_path / "v1.json", 10, False), squad_json(tmp_path / "v2.json", 10, True)
    (tmp_path / "notsquad.json").write_text('{"rows": []}')
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "not_a_model").mkdir()
    (tmp_path / "not_a_model" / "notes.txt").write_text("mine")
    nocols = write_swag(str(tmp_path / "swag_nocols"), 8, 4, header=[h if h != "ending2" else "end2" for h in SWAG_HEADER])
    badlabel = write_swag(str(tmp_path / "swag_label"), 8, 4, label="4")
    out = tmp_path / "results"
    base = ["--model", tiny_bert_dir, "--results-dir", str(out), "--device", "cpu"]
    cases = [
        (["squad", "--train-data", str(tmp_path / "missing.json"), "--dev-data", v1], "--train-data", "no such file"),
        (["squad", "--train-data", str(tmp_path / "notsquad.json"), "--dev-data", v1], "--train-data",
         "not an official SQuAD JSON file"),
        (["squad", "--train-data", v2, "--dev-data", v1], "--train-data", "looks like SQuAD v2.0"),
        (["squad_v2", "--train-data", v1, "--dev-data", v2], "--train-data", "looks like SQuAD v1.1"),
        (["squad_v2", "--train-data", v2, "--dev-data", v1], "--dev-data", "looks like SQuAD v1.1"),
        (["swag", "--data-dir", nocols], "train.csv", "no column(s) ending2"),
        (["swag", "--data-dir", badlabel], "train.csv, line 5", "label '4' is not one of 0, 1, 2, 3"),
        (["squad", "--train-data", v1, "--dev-data", v1, "--save-model", str(tmp_path / "a_file" / "m")], "--save-model",
         "is a file"),
        (["squad", "--train-data", v1, "--dev-data", v1, "--save-model", str(tmp_path / "a_file")], "--save-model",
         "not a directory"),
        (["squad", "--train-data", v1, "--dev-data", v1, "--save-model", str(tmp_path / "not_a_model")], "--save-model",
         "not a model folder"),
        (["squad", "--train-data", v1, "--dev-data", v1, "--stride", "384"], "--stride 384",
         "must be below the window length"),
        (["squad", "--train-data", v1, "--dev-data", v1, "--max-len", "1024"], "--max-len 1024",
         "above the model's 512 positions"),
        (["sst2", "--max-len", "4096", "--data-dir", str(tmp_path)], "--max-len 4096", "above the model's 512 positions"),
    ]
    for extra, where, message in cases:
        assert run_cli(ft.main, base + extra) == 2, message
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and where in err and message in err and "\n" not in err, err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


# --- the real offline split ---

@needs_shared_data
def test_the_offline_squad_split_encodes_every_answer(tmp_path):
    from transformers import BertTokenizer
    tok = BertTokenizer(vocab=os.path.join(SHARED_DATA, "bert-base-uncased", "vocab.txt"))
    folder = str(tmp_path / "tok")
    tok.save_pretrained(folder)
    fast = AutoTokenizer.from_pretrained(folder)
    examples = readers.read_squad_json(os.path.join(SHARED_DATA, "squad", "offline-train-v1.1.json"), "1.1", "x")[:400]
    enc = squad_spans.encode_squad(fast, examples, 384, 128)
    windows = squad_spans.make_windows(fast, examples, 384, 128)
    assert enc["skipped"] == 0 and enc["questions"] == 400
    found, exact = set(), 0
    for w, i, j in zip(windows, enc["start_positions"], enc["end_positions"]):
        if i:
            ex = examples[w["example"]]
            text = ex["context"][w["offsets"][i][0]:w["offsets"][j][1]]
            assert ex["golds"][0].strip() in text              # whole tokens: "gold" inside "golden" gives "golden"
            exact += squad_metric.normalize_answer(text) == squad_metric.normalize_answer(ex["golds"][0])
            found.add(w["example"])
    assert len(found) == 400 and exact >= 0.97 * len(found)


def test_hub_routes_ask_for_the_papers_datasets(monkeypatch):
    asked = []

    def fake_hub(name, config, split, flag):
        asked.append((name, config, split))
        if name == "allenai/swag":
            return [{"sent1": "She opened the fridge", "sent2": "and", "ending0": "took milk.", "ending1": "flew.",
                     "ending2": "sang.", "ending3": "painted.", "label": 0}]
        return [{"id": "a", "question": "Q?", "context": "ctx x", "answers": {"text": ["x"], "answer_start": [4]}}]
    monkeypatch.setattr(readers, "load_hub_dataset", fake_hub)
    train, devs = readers.read_swag(command.task_inputs(fine_tune_settings.parse(["swag"]), "swag")[2])
    assert train == [("She opened the fridge", ["and took milk.", "and flew.", "and sang.", "and painted."], 0)]
    assert asked == [("allenai/swag", "regular", "train"), ("allenai/swag", "regular", "validation")]
    asked.clear()
    train, devs = readers.read_squad_task(command.task_inputs(fine_tune_settings.parse(["squad_v2"]), "squad_v2")[2])
    assert asked == [("rajpurkar/squad_v2", None, "train"), ("rajpurkar/squad_v2", None, "validation")]
    assert train[0]["starts"] == [4] and squad_spans.answer_chars(train[0]) == (4, 5)


def test_every_family_has_every_member_of_the_written_interface():
    """Family (part4/tasks/families.py) lists what the recipe, its lines and its plan ask of a head family, a line per
    member: every family has every member, its loss among them (SWAG trains with GLUE's: the library's)."""
    interface = families.Family
    members = set(interface.__annotations__) | {n for n, v in vars(interface).items() if callable(v) and not n.startswith("_")}
    assert "loss" in members and len(members) >= 25
    assert all(vars(interface)[n].__doc__ for n in members if n in vars(interface)), "a method without its meaning"
    for task in ("sst2", "stsb", "mnli", "swag", "squad", "squad_v2"):
        family = families.FAMILIES[task](task, 64, **({"stride": 32} if task.startswith("squad") else {}))
        assert isinstance(family, interface) and all(hasattr(family, m) for m in members), task
    assert families.MultipleChoice.loss is families.Classification.loss
