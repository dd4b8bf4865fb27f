"""bert_part4_math.py: the toy numbers are the article's, the attention shares against loops, end to end."""

import ast
import glob
import json
import os
import sys

import numpy as np
import pytest
import torch
from conftest import ROOT, save_tiny
from transformers import AutoTokenizer, BertForQuestionAnswering, BertForSequenceClassification

import bert_part4_math as bm
from part4.command_line import script_settings
from part4.command_line.declarations import Fatal
from part4.models import loading, section_inputs
from part4.output.results_files import Log

REFERENCE = os.path.join(ROOT, "..", "shared", "article", "reference_logs", "part4_math_stdout.txt")


def script_imports(path):
    """The modules a file imports, by their first name (bert_part4_squad, part4, torch, ...)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


def test_no_script_imports_another_what_two_share_is_in_part4(tmp_path):
    """The math script reads the span search, the demo, the QA loading and the heads' count from part4/, as the SQuAD
    and heads scripts do: no script imports another (the check finds one that does)."""
    scripts = sorted(glob.glob(os.path.join(ROOT, "bert_part4_*.py")))
    names = {os.path.splitext(os.path.basename(p))[0] for p in scripts}
    assert len(scripts) >= 6
    assert {os.path.basename(p): sorted(script_imports(p) & names) for p in scripts} == {
        os.path.basename(p): [] for p in scripts}
    (tmp_path / "x.py").write_text("import bert_part4_squad as squad\nfrom bert_part4_heads import PASSAGE\n")
    assert script_imports(str(tmp_path / "x.py")) & names == {"bert_part4_squad", "bert_part4_heads"}


def test_toy_numbers_are_the_articles(tmp_path):
    log = Log("x", str(tmp_path))
    glue, span, swag = bm.glue_toy(log), bm.span_toy(log), bm.swag_toy(log)
    f1 = bm.f1_examples(log)
    assert [round(x, 3) for x in glue["p"]] == [0.867, 0.032, 0.101] and round(glue["loss"], 3) == 0.143
    assert [round(x, 3) for x in glue["logits"]] == [1.5, -1.8, -0.65]
    assert span["best_any"] == [2, 0] and span["best"] == [2, 3] and round(span["best_score"], 1) == 4.5
    assert round(span["loss"], 4) == 1.9543
    assert [round(x, 3) for x in span["p_start"]] == [0.064, 0.106, 0.782, 0.048]
    assert [round(x, 3) for x in swag["p"]] == [0.596, 0.015, 0.327, 0.063] and round(swag["loss"], 3) == 0.518
    assert [round(x, 2) for x in swag["scores"]] == [1.95, -1.75, 1.35, -0.3]
    assert [(round(e["f1"], 3), e["em"]) for e in f1] == [(1.0, 1), (0.75, 0), (0.4, 0), (0.0, 0)]
    assert [round(e["precision"], 3) for e in f1] == [1.0, 1.0, 0.333, 0.0]


@pytest.mark.skipif(not os.path.isfile(REFERENCE), reason="../shared/article/reference_logs is not beside this checkout")
def test_toy_sections_print_the_articles_lines_exactly(tmp_path, capsys):
    assert bm.main(["--only", "toys", "--results-dir", str(tmp_path)]) == 0
    ours = [line.split("   [article:")[0] for line in (tmp_path / "part4_math.log").read_text().splitlines()]
    reference = open(REFERENCE).read().splitlines()
    for header in ("== 1a.", "== 3a.", "== 5.", "== 6."):
        start = next(k for k, line in enumerate(reference) if line.startswith(header))
        end = next((k for k in range(start + 1, len(reference)) if reference[k] == ""), len(reference))
        mine = next(k for k, line in enumerate(ours) if line.startswith(header))
        assert ours[mine:mine + end - start] == reference[start:end]


def test_only_toys_needs_no_model(tmp_path):
    assert bm.main(["--only", "toys", "--results-dir", str(tmp_path), "--sst2-model", "/nonexistent"]) == 0
    r = json.loads((tmp_path / "part4_math.json").read_text())
    assert set(r) >= {"glue_toy", "span_toy", "swag_toy", "f1_examples"} and "attention" not in r


def random_attention(heads=3, T=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(heads, T, T, generator=g), -1)


def test_block_share_against_a_plain_loop():
    A = random_attention()
    rows, cols = [1, 2, 3], [5, 6, 7]
    got = bm.block_share(A, rows, cols)
    for n, r in enumerate(rows):
        expected = sum(sum(A[h, r, c].item() for c in cols) for h in range(A.shape[0])) / A.shape[0]
        assert got[n].item() == pytest.approx(expected, abs=1e-6)


def test_the_shares_of_each_question_token_add_up_to_one(tiny_qa_dir):
    model = BertForQuestionAnswering.from_pretrained(tiny_qa_dir, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(tiny_qa_dir)
    enc = tok(bm.FLOW_QUESTION, bm.FLOW_PASSAGE, return_tensors="pt")
    q, p, special = bm.segment_positions(enc)
    assert sorted(q + p + special) == list(range(enc["input_ids"].shape[1]))
    with torch.no_grad():
        att = model(**enc, output_attentions=True).attentions
    for A in att:
        total = bm.block_share(A[0], q, p) + bm.block_share(A[0], q, special) + bm.block_share(A[0], q, q)
        assert torch.allclose(total, torch.ones(len(q)), atol=1e-5)
    layers = bm.flow_shares([a[0] for a in att], q, p, special)
    for r in layers:
        assert r["q_to_p"] + r["q_to_special"] + r["q_to_q"] == pytest.approx(1.0, abs=1e-5)


def test_weight_counts_against_the_heads(tiny_sst2_dir, tmp_path):
    model = BertForSequenceClassification.from_pretrained(tiny_sst2_dir)
    w = bm.new_weights(model, Log("x", str(tmp_path)))
    H = model.config.hidden_size
    assert w["total"] == sum(p.numel() for p in model.parameters()) == w["trainable"]
    assert w["new"] == sum(p.numel() for p in model.classifier.parameters()) == 2 * H + 2
    assert [v["counted"] for v in w["heads"].values()] == [2 * H + 2, 3 * H + 3, 2 * H + 2, H + 1]
    assert all(v["counted"] == v["formula"] for v in w["heads"].values())


def squad_file(path):
    context = "Ada Lovelace was born in London in 1815. She wrote the first program for the Analytical Engine."
    qas = [{"id": f"q{k}", "question": q, "answers": [{"text": "London", "answer_start": context.find("London")}]}
           for k, q in enumerate(["Where was Ada born?", "When was Ada born?", "What did she write?"])]
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "Ada", "paragraphs": [{"context": context, "qas": qas}]}]}))
    return str(path)


def test_main_end_to_end_on_tiny_models(tiny_sst2_dir, tiny_qa_dir, tmp_path):
    out = tmp_path / "results"
    argv = ["--sst2-model", tiny_sst2_dir, "--squad-model", tiny_qa_dir, "--squad2-model", tiny_qa_dir,
            "--flow-data", squad_file(tmp_path / "flow.json"), "--flow-questions", "3", "--results-dir", str(out),
            "--device", "cpu"]
    assert bm.main(argv) == 0
    r = json.loads((out / "part4_math.json").read_text())
    assert set(r) >= {"glue_toy", "glue_real", "new_weights", "attention", "span_toy", "span_real", "null",
                      "f1_examples", "swag_toy"}
    assert all(s["max_gap"] < 1e-5 for s in r["glue_real"])
    layers = r["attention"]["layers"]
    assert [x["layer"] for x in layers] == [1, 2]
    assert all({"q_to_p", "p_to_q", "q_to_special"} <= set(x) for x in layers)
    assert 0 < r["attention"]["born_to_passage"] < 1 and r["attention"]["dev"]["questions"] == 3
    assert r["null"]["tau"] == 4.0 and r["null"]["tau_source"].startswith("the article's value")
    for q in r["null"]["questions"]:
        assert q["answer"]["+0.00"] == (q["s_hat"] > q["s_null"])
    gold = r["span_real"][0]
    assert r["span_real"][0]["heatmap"]["tokens"][4] == "bidirectional" and gold["gold_tokens"][0] == 21
    assert gold["loss"] == pytest.approx(-np.log(gold["p_start_gold"]) - np.log(gold["p_end_gold"]))
    log = (out / "part4_math.log").read_text()
    assert "tau chosen on the dev set = +4.00 (the article's value" in log
    try:
        import matplotlib  # noqa: F401
        assert (out / "part4_math_attention.png").stat().st_size > 1000
        assert (out / "part4_math_span_heatmap.png").stat().st_size > 1000
    except ImportError:
        pass


def test_an_input_that_cannot_be_used_stops_only_the_sections_that_read_it():
    """part4/models/section_inputs.py on a table of three sections: a missing data file stops the one section that
    reads it; a model is loaded only while some section still reads it; a model refused as it loads stops its own
    sections; the run's one line names each input with the sections it stopped."""
    sections = {"a": ("1", ("--m",)), "b": ("2", ("--m", "--data")), "c": ("3", ("--n",)), "d": ("4", ("--k", "--data"))}

    def refused(folder):
        raise Fatal(f"--n {folder}: refused")

    problems = {"--data": "--data x.json: no such file"}
    assert section_inputs.sections_not_run(sections, problems) == {"b": problems["--data"], "d": problems["--data"]}
    loaded, problems = section_inputs.load_models({"--m": lambda f: ("model", f), "--n": refused, "--k": lambda f: 1 / 0},
                                                  {"--m": "m", "--n": "n", "--k": "k"}, sections, problems)
    assert loaded == {"--m": ("model", "m")} and problems["--n"] == "--n n: refused"        # --k: no section left
    not_run = section_inputs.sections_not_run(sections, problems)
    assert not_run == {"b": "--data x.json: no such file", "c": "--n n: refused", "d": "--data x.json: no such file"}
    assert section_inputs.not_run_error(sections, problems, not_run, "r/part4_math.json") == (
        "2 inputs cannot be used: --data x.json: no such file (sections 2, 4 not run); --n n: refused (section 3 not "
        "run); r/part4_math.json holds the toys and every section that ran, and marks the others (not_run)")


def test_tau_comes_from_the_squad_results_of_the_same_model(tmp_path):
    args = script_settings.parse_math(["--results-dir", str(tmp_path), "--squad2-model", "m2"])
    assert bm.chosen_tau(args.tau, args.results_dir, args.squad2_model) == (
        4.0, f"the article's value: no {tmp_path.name}/part4_squad.json for this model")      # the folder given
    payload = {"v2_dev": {"best": {"tau": 2.25}, "n": 11873}, "run": {"config": {"v2_model": "m2", "max_dev_examples": None}}}
    (tmp_path / "part4_squad.json").write_text(json.dumps(payload))
    assert bm.chosen_tau(args.tau, args.results_dir, args.squad2_model) == (
        2.25, "from bert_part4_squad.py, chosen on all 11873 dev questions")
    limited = {"v2_dev": {"best": {"tau": -1.5}, "n": 40}, "run": {"config": {"v2_model": "m2", "max_dev_examples": 40}}}
    (tmp_path / "part4_squad.json").write_text(json.dumps(limited))
    tau, source = bm.chosen_tau(args.tau, args.results_dir, args.squad2_model)
    assert tau == 4.0 and f"{tmp_path.name}/part4_squad.json chose -1.50 on only the first 40 questions" in source
    other = script_settings.parse_math(["--results-dir", str(tmp_path), "--squad2-model", "another"])
    assert bm.chosen_tau(other.tau, other.results_dir, other.squad2_model)[0] == 4.0
    given = script_settings.parse_math(["--results-dir", str(tmp_path), "--tau", "1.5"])
    assert bm.chosen_tau(given.tau, given.results_dir, given.squad2_model) == (1.5, "from --tau")


def test_a_refused_model_stops_its_sections_only_the_toys_and_the_rest_are_written(tiny_sst2_dir, tiny_qa_dir,
                                                                                   tmp_path, capsys, monkeypatch):
    """A --squad-model without a span head: sections 2 and 3b are not run, each said in one line and marked in the
    JSON (not_run); the toys and sections 1b, 7 and 4 are written, the same as a run of the toys alone; the exit
    code is 2, the error one line. The report reads the file: every toy number reproduced, sections 2 and 3b not run
    yet with the reason; the reproduce script does not count the file as done."""
    import bert_part4_report as report
    from part4.models.loading import run_cli
    from part4.paper import article
    from part4.reproduction import experiments
    from part4.reproduction import our_numbers as rules
    folder = save_tiny(str(tmp_path / "base"))
    monkeypatch.setattr(sys, "argv", ["bert_part4_math.py"])              # the name the results record, as run
    out = tmp_path / "r"
    argv = ["--sst2-model", tiny_sst2_dir, "--squad-model", folder, "--squad2-model", tiny_qa_dir, "--flow-questions", "0",
            "--results-dir", str(out), "--device", "cpu"]
    capsys.readouterr()
    assert run_cli(bm.main, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no question-answering head" in err[0] and "sections 2, 3b not run" in err[0], err
    r = json.loads((out / "part4_math.json").read_text())
    assert set(r["not_run"]) == {"attention", "span_real"} and "has no question-answering head" in r["not_run"]["attention"]
    assert "attention" not in r and "span_real" not in r and {"glue_real", "new_weights", "null"} <= set(r)
    assert set(r["models"]) == {"--sst2-model", "--squad2-model"}
    log = (out / "part4_math.log").read_text().splitlines()
    assert [x for x in log if " not run: " in x] == [f"== {n}. not run: {r['not_run']['attention']}" for n in ("2", "3b")]
    toys = tmp_path / "toys"
    assert bm.main(["--only", "toys", "--results-dir", str(toys)]) == 0
    alone = json.loads((toys / "part4_math.json").read_text())
    toy_blocks = rules.BLOCKS[article.MATH]["toys"]
    assert {k: r[k] for k in toy_blocks} == {k: alone[k] for k in toy_blocks}

    assert report.main(["--results-dir", str(out)]) == 0
    rows = json.loads((out / report.REPORT_JSON).read_text())["rows"]
    toy_keys = {e.key for e in article.ENTRIES if e.script == article.MATH and not e.model and e.kind == "result"}
    assert toy_keys and {r["key"]: r["status"] for r in rows if r["key"] in toy_keys} == dict.fromkeys(toy_keys, "same")
    not_run = [r for r in rows if r["key"].startswith(("flow.", "gold."))]
    assert not_run and {r["status"] for r in not_run} == {"not run yet"}
    assert all("not run in part4_math.json: " in r["why"] and "has no question-answering head" in r["why"] for r in not_run)
    assert {r["status"] for r in rows if r["key"].startswith(("sst2.0.", "null."))} == {"another model"}   # tiny models
    inputs = experiments.Inputs(results_dir=str(out), models=None)
    assert experiments.done_before([experiments.BY_NAME["math"]], inputs) == {"math": None}


def test_a_run_never_replaces_sections_run_before_or_results_of_other_settings(tiny_sst2_dir, tiny_qa_dir, tmp_path,
                                                                               monkeypatch, capsys):
    """A toys-only run's results (no model read) are replaced by any run; a run's that read models are not replaced
    by one that leaves their sections out (--only toys) or by one of other settings: each refused before any section
    runs, in one line, the file left as it was. The same command again replaces them."""
    from part4.models.loading import run_cli
    monkeypatch.setattr(sys, "argv", ["bert_part4_math.py"])
    out = tmp_path / "r"
    toys = ["--only", "toys", "--results-dir", str(out)]
    full = ["--sst2-model", tiny_sst2_dir, "--squad-model", tiny_qa_dir, "--squad2-model", tiny_qa_dir,
            "--flow-questions", "0", "--results-dir", str(out), "--device", "cpu"]
    assert bm.main(toys) == 0
    nowhere = [str(tmp_path / "none")] * 3                   # every model refused: no section that reads one is run
    refused = [x for pair in zip(("--sst2-model", "--squad-model", "--squad2-model"), nowhere) for x in pair]
    assert run_cli(bm.main, [*refused, "--flow-questions", "0", "--results-dir", str(out), "--device", "cpu"]) == 2
    assert bm.main(full) == 0                              # the command its error asked for, into the same folder
    path = out / "part4_math.json"
    written = path.read_bytes()
    capsys.readouterr()
    for argv, said in ((toys, "holds sections 1b, 7, 2, 3b, 4, run before, which this run does not run; refusing to "
                              "replace them"),
                       ([*full, "--tau", "1.5"], "results of other settings (tau None -> 1.5); refusing to overwrite "
                                                 "them")):
        assert run_cli(bm.main, argv) == 2
        assert capsys.readouterr().err.strip() == f"error: {path}: {said}: pass --results-dir, or delete it"
        assert path.read_bytes() == written
    assert bm.main(full) == 0


@pytest.mark.slow
def test_offline_every_missing_input_is_reported_at_once(tmp_path):
    """Plain bert_part4_math.py without the Hub: the toys are written; one line names all three models and the
    dataset, and the sections each stops; exit 2."""
    import subprocess
    import sys
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "empty_cache"))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bert_part4_math.py"), "--results-dir", str(tmp_path / "r")],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=600)
    assert p.returncode == 2 and "== 1a. GLUE head, toy" in p.stdout
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: 4 inputs cannot be used: ")
    for name in (bm.SST2, "csarron/bert-base-uncased-squad-v1", "deepset/bert-base-uncased-squad2", "'rajpurkar/squad'"):
        assert name in lines[0]
    r = json.loads((tmp_path / "r" / "part4_math.json").read_text())
    assert set(r["not_run"]) == set(bm.SECTION_INPUTS) and r["models"] == {} and "glue_toy" in r and "tables" in r


def test_offline_local_models_and_no_flow_data_leave_out_section_2_alone(tiny_sst2_dir, tiny_qa_dir, tmp_path,
                                                                         monkeypatch, capsys):
    """Three local models, HF_HUB_OFFLINE=1 and no --flow-data: the missing dataset is checked first, before any model
    is read, and stops section 2 alone; every other section runs and is written; exit 2 with one line naming it."""
    import datasets
    from huggingface_hub import constants

    from part4.models.loading import run_cli
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "empty_datasets"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty_hub"))
    loaded, checked = [], []
    real = loading.load_pretrained                   # the weights, and a folder's config and tokenizer
    monkeypatch.setattr(loading, "load_pretrained", lambda *a, **k: loaded.append(a) or real(*a, **k))
    real_problem = bm.file_problem
    monkeypatch.setattr(bm, "file_problem", lambda *a: checked.append(len(loaded)) or real_problem(*a))
    out = tmp_path / "r"
    assert run_cli(bm.main, ["--sst2-model", tiny_sst2_dir, "--squad-model", tiny_qa_dir, "--squad2-model", tiny_qa_dir,
                             "--results-dir", str(out), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'rajpurkar/squad' is not in the local datasets cache" in err[0] and "--flow-data" in err[0]
    assert "(section 2 not run)" in err[0] and checked == [0] and loaded
    r = json.loads((out / "part4_math.json").read_text())
    assert list(r["not_run"]) == ["attention"] and {"glue_real", "new_weights", "span_real", "null"} <= set(r)


def test_an_untrained_sst2_classifier_is_said_so(tiny_qa_dir, tmp_path):
    folder = save_tiny(str(tmp_path / "plain_bert"))               # no classifier: from_pretrained makes a random one
    out = tmp_path / "r"
    assert bm.main(["--sst2-model", folder, "--squad-model", tiny_qa_dir, "--squad2-model", tiny_qa_dir,
                    "--flow-questions", "0", "--results-dir", str(out), "--device", "cpu"]) == 0
    log = (out / "part4_math.log").read_text()
    assert "this model has no trained classifier: W and b are new and random" in log
    assert "[article: C W^T = [-4.316, 4.135], logits [-4.316, 4.135]; the article's own random head" not in log
    assert "not expected to match]" in log
    for article in ("[article: 109,483,778 in total, 1,538 new, for BERT-base, H = 768]", "[article: 0.162, over 12 layers]",
                    "[article: 0.190 / 0.107 / 0.306]", "[article: P_start 0.9893, P_end 0.9661, loss 0.0453]",
                    "[article: 5.08 + 5.10 = 10.18]", "[article: no, at tau = +4.00]", "[article: 8.45; from a trained head"):
        assert article in log, article


def test_table_arithmetic_is_the_articles(tmp_path):
    t = bm.table_arithmetic(Log("x", str(tmp_path)))
    assert {k: round(v, 1) for k, v in t["table1_gains"].items()} == {"BERT-base": 4.5, "BERT-large": 7.0}
    assert round(t["table2_margin"], 1) == 1.5 and t["single_beats_top"]


@pytest.mark.slow
def test_tau_is_read_from_a_file_the_squad_script_wrote(tiny_qa_dir, tmp_path):
    """chosen_tau on bert_part4_squad.py's own results: a run cut by --max-dev-examples is not used, a whole one is;
    and a committed results file of an earlier version (its cut recorded as limit) still reads as the whole dev set."""
    from test_squad import squad_file

    import bert_part4_squad
    data = squad_file(tmp_path / "dev-v2.0.json", v2=True)
    argv = ["--only", "v2", "--v2-model", tiny_qa_dir, "--v2-data", str(data), "--device", "cpu", "--max-len", "64",
            "--stride", "16"]
    cut, whole = tmp_path / "cut", tmp_path / "whole"
    assert bert_part4_squad.main([*argv, "--max-dev-examples", "2", "--results-dir", str(cut)]) == 0
    tau, source = bm.chosen_tau(None, str(cut), tiny_qa_dir)
    assert tau == 4.0 and "on only the first 2 questions (--max-dev-examples)" in source
    assert bert_part4_squad.main([*argv, "--results-dir", str(whole)]) == 0
    saved = json.loads((whole / "part4_squad.json").read_text())
    assert bm.chosen_tau(None, str(whole), tiny_qa_dir) == (saved["v2_dev"]["best"]["tau"],
                                                          f"from bert_part4_squad.py, chosen on all {saved['v2_dev']['n']} "
                                                          f"dev questions")
    committed = json.loads(open(os.path.join(ROOT, "results", "minilm_squad_v2", "part4_squad.json")).read())
    assert "limit" in committed["run"]["config"] and "max_dev_examples" not in committed["run"]["config"]
    folder = os.path.join(ROOT, "results", "minilm_squad_v2")
    tau, source = bm.chosen_tau(None, folder, committed["run"]["config"]["v2_model"])
    assert source.startswith("from bert_part4_squad.py, chosen on all ") and tau == committed["v2_dev"]["best"]["tau"]


@pytest.mark.slow
def test_every_section_with_a_model_runs_in_bf16_when_asked(tiny_sst2_dir, tiny_qa_dir, tmp_path):
    """--dtype bf16 reaches each section that runs a model (its numbers move by bf16's rounding, no further), and the
    results record it; the toys are the same numbers."""
    argv = ["--sst2-model", tiny_sst2_dir, "--squad-model", tiny_qa_dir, "--squad2-model", tiny_qa_dir,
            "--flow-data", squad_file(tmp_path / "flow.json"), "--flow-questions", "2", "--device", "cpu", "--tau", "0"]
    runs = {}
    for dtype in ("fp32", "bf16"):
        assert bm.main([*argv, "--dtype", dtype, "--results-dir", str(tmp_path / dtype)]) == 0
        runs[dtype] = json.loads((tmp_path / dtype / "part4_math.json").read_text())
    a, b = runs["fp32"], runs["bf16"]
    assert (a["dtype"], b["dtype"]) == ("fp32", "bf16") and a["glue_toy"] == b["glue_toy"]
    moved = {"glue_real": (a["glue_real"][0]["logits_by_hand"], b["glue_real"][0]["logits_by_hand"]),
             "attention": (a["attention"]["layers"][0]["q_to_p"], b["attention"]["layers"][0]["q_to_p"]),
             "span_real": (a["span_real"][0]["p_start_gold"], b["span_real"][0]["p_start_gold"]),
             "null": (a["null"]["questions"][0]["s_null"], b["null"]["questions"][0]["s_null"])}
    for section, (x, y) in moved.items():
        assert x != y, section                                         # computed in bf16
        assert y == pytest.approx(x, rel=0.05, abs=0.05), section      # and only rounded
