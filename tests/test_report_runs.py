"""The report on the results files the scripts themselves write: every script run in-process on tiny models (the
heads, the math toys and the math with models, the SQuAD demo, dev sets and tau sweep, the fine-tunes: one run, a
grid, restarts, the GLUE table, SQuAD and SWAG), each file fed to the report alone and in a folder; then a folder of
them all, which leaves only the runs not made; then those files spoiled as a user's files get spoiled; and every
script's --help answered without torch."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, SHARED_DATA
from test_finetune_squad_swag import squad_json, write_swag
from test_glue import write_glue
from test_squad import squad_file
from transformers import BertForQuestionAnswering

import bert_part4_finetune as ft
import bert_part4_heads as heads
import bert_part4_math as bm
import bert_part4_report as report
import bert_part4_squad as sq
from part4.command_line.declarations import Fatal
from part4.paper import article
from part4.reproduction import report as report_text
from part4.reproduction import statuses

SCRIPTS = {"heads": heads, "math": bm, "squad": sq, "finetune": ft}
GLUE = ["--batch-size", "8", "--epochs", "1", "--device", "cpu"]


def dev_file(version, folder):
    """The official dev file from ../shared/data when it is there (the runs take its first questions), else a small
    one in the official layout."""
    shared = os.path.join(SHARED_DATA, "squad", f"dev-v{version}.json")
    return shared if os.path.isfile(shared) else squad_file(os.path.join(folder, f"dev-v{version}.json"), version == "2.0")


def commands(models, data):
    """(folder, script, argv) of every run: each command in a folder of its own, as the scripts name their files
    alike. MRPC at 3e-5 and 4e-5 is left out: the runs not made."""
    bert, qa, sst2 = models
    finetune = ["--model", bert, "--data-dir", data["glue"], *GLUE]
    squad_ft = ["--model", bert, "--train-data", data["squad_train"], "--dev-data", data["squad_dev"], "--max-len", "48",
                "--stride", "16", *GLUE]
    return [("heads", "heads", ["--model", bert, "--device", "cpu"]),
            ("math_toys", "math", ["--only", "toys"]),
            ("math", "math", ["--sst2-model", sst2, "--squad-model", qa, "--squad2-model", qa, "--flow-questions", "0",
                              "--device", "cpu"]),
            ("squad_demo", "squad", ["--only", "demo", "--v1-model", qa, "--v2-model", qa, "--device", "cpu"]),
            ("squad_dev", "squad", ["--only", "v1", "--only", "v2", "--v1-model", qa, "--v2-model", qa, "--v1-data",
                                    data["v1"], "--v2-data", data["v2"], "--max-dev-examples", "3", "--device", "cpu"]),
            ("finetune_one", "finetune", ["mrpc", "5e-5", "--evals", "2", *finetune]),
            ("finetune_grid", "finetune", ["sst2", "--grid", "glue", "--evals", "1", *finetune]),
            ("finetune_seeds", "finetune", ["sst2", "--seeds", "2", "--evals", "3", *finetune]),
            ("finetune_glue", "finetune", ["glue", "2e-5", "--tasks", "sst2,mrpc", "--evals", "1", *finetune]),
            ("finetune_squad", "finetune", ["squad", "3e-4", *squad_ft]),
            ("finetune_swag", "finetune", ["swag", "1e-3", "--model", bert, "--data-dir", data["swag"], *GLUE])]


@pytest.fixture(scope="module")
def made(tiny_bert_dir, tiny_qa_dir, tiny_sst2_dir, tmp_path_factory):
    """The folder of every run, each script's files as it wrote them (its name recorded as the command's first word)."""
    inputs, out = tmp_path_factory.mktemp("inputs"), tmp_path_factory.mktemp("all")
    data = {"glue": write_glue(str(inputs / "glue"), n_train=16, n_dev=8, n_test=4),
            "squad_train": squad_json(inputs / "train.json", 5, False), "squad_dev": squad_json(inputs / "dev.json", 5, False),
            "swag": write_swag(str(inputs / "swag"), n_train=16, n_dev=8),
            "v1": dev_file("1.1", str(inputs)), "v2": dev_file("2.0", str(inputs))}
    for folder, script, argv in commands((tiny_bert_dir, tiny_qa_dir, tiny_sst2_dir), data):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sys, "argv", [f"bert_part4_{script}.py"])
            assert SCRIPTS[script].main(argv + ["--results-dir", str(out / folder)]) == 0, folder
    return out


def results_files(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, files in os.walk(folder) for f in files
                  if f.startswith("part4_") and f.endswith(".json"))


def expected(data):
    """The entries a results file must give, from part4/paper/article.py and the file's own record (not the report's code):
    its script's entries, those of the parts its command ran, those of its task and learning rate."""
    script = os.path.basename(data["run"]["argv"][0])
    only = (data["run"]["config"] or {}).get("only")
    parts = {"demo": ("v1_demo", "v1_head", "v2_demo"), "v1": ("v1_dev",), "v2": ("v2_dev",)}
    keys = set()
    for e in article.ENTRIES:
        if e.script != script or e.kind == "paper":
            continue
        if script == article.MATH and only == "toys" and e.model:
            continue
        if script == article.SQUAD and not e.field.startswith(tuple(b for part in only for b in parts[part])):
            continue
        if script == article.FINETUNE and any(data.get(k) != v for k, v in e.match):
            continue
        keys.add(e.key)
    return keys


def folder_rows(folder):
    assert report.main(["--results-dir", str(folder)]) == 0
    return json.loads((folder / report.REPORT_JSON).read_text())["rows"]


def check_files(made, parts, capsys):
    """Each results file of these parts, alone and in its folder: it gives every row it must, none not run yet, none
    unusable, no exception. Returns {file: {entry key: row}}."""
    found = {}
    for part in parts:
        rows = folder_rows(made / part)
        capsys.readouterr()
        for name in results_files(made / part):
            path = made / part / name
            data = json.loads(path.read_text())
            mine = {r["key"]: r for r in rows if r["file"] == name}
            assert set(mine) == expected(data), name
            assert not {r["status"] for r in mine.values()} & {"not run yet", "unusable"}, name
            assert report.main([str(path)]) == 0
            printed = capsys.readouterr()
            assert printed.err == ""                                    # no warning on a file a script wrote
            lines = printed.out.splitlines()
            if mine:
                assert len(lines) == len(mine) + 1 and lines[-1].endswith("; 0 not run yet"), name
                assert "; 0 unusable" in lines[-1]
            else:
                assert lines == [f"{path}: the article prints no number for this run ({data['run']['argv'][0]}); it "
                                 f"fine-tuned SST-2 at lr 2e-5 and MRPC at 5e-5..2e-5, batch 32, 3 epochs"]
            found[f"{part}/{name}"] = mine
    return found


BERT_BASE = "bert, 12 layers, H 768, 12 heads, vocab 30,522"          # the article's checkpoints' architecture


def tiny_words(folder):
    """A tiny model's architecture as the report says it, from its config.json."""
    c = json.loads(open(os.path.join(folder, "config.json")).read())
    return (f"bert, {c['num_hidden_layers']} layers, H {c['hidden_size']}, {c['num_attention_heads']} heads, "
            f"vocab {c['vocab_size']:,}")


@pytest.mark.slow
def test_the_heads_run_gives_every_heads_row(made, tiny_bert_dir, capsys):
    rows = check_files(made, ["heads"], capsys)["heads/part4_heads.json"]
    H = json.loads(open(os.path.join(tiny_bert_dir, "config.json")).read())["hidden_size"]
    assert (rows["heads.C_shape"]["ours"], rows["heads.W_shape"]["ours"]) == (f"1, {H}", f"3, {H}")     # was: log only
    assert rows["heads.new_params"]["ours"] == f"{3 * H + 3:,}"
    assert rows["heads.C_shape"]["status"] == "another model" and "article: bert-base-uncased" in rows["heads.C_shape"]["note"]
    assert {r["status"] for r in rows.values()} == {"another model", "shown"}


def test_the_math_runs_give_every_math_row(made, capsys):
    rows = check_files(made, ["math_toys", "math"], capsys)
    toys, full = rows["math_toys/part4_math.json"], rows["math/part4_math.json"]
    assert {r["status"] for r in toys.values()} == {"same"} and toys["toy.span.max_any"]["ours"] == "5.8"
    saved = json.loads((made / "math" / "part4_math.json").read_text())
    for k, q in enumerate(saved["null"]["questions"]):                    # s_null = S.C + E.C, s_hat = S.T_i + E.T_j
        assert q["S_C"] + q["E_C"] == pytest.approx(q["s_null"], abs=1e-5)
        assert q["S_T_i"] + q["E_T_j"] == pytest.approx(q["s_hat"], abs=1e-5)
        assert full[f"null.{k}.S.C"]["ours"] == f"{q['S_C']:.2f}" and full[f"null.{k}.S.C"]["status"] == "another model"
    bias = [[z - cw for z, cw in zip(s["logits_by_hand"], s["CW"])] for s in saved["glue_real"]]
    assert bias[0] == pytest.approx(bias[1], abs=1e-5)                    # C W^T + b: one b for both sentences
    layers = len(saved["attention"]["layers"])
    assert full[f"flow.{layers + 1}.q_to_p"]["status"] == "another model"     # a model of fewer layers says so
    assert f"no attention.layers.{layers}.q_to_p in this run" in full[f"flow.{layers + 1}.q_to_p"]["note"]


def test_the_squad_runs_give_every_squad_row(made, tiny_qa_dir, capsys):
    rows = check_files(made, ["squad_demo", "squad_dev"], capsys)
    demo, dev = rows["squad_demo/part4_squad.json"], rows["squad_dev/part4_squad.json"]
    b = BertForQuestionAnswering.from_pretrained(tiny_qa_dir).qa_outputs.bias.tolist()
    assert demo["v1.bias"]["ours"] == f"{b[0]:.4f}, {b[1]:.4f}" and demo["v1.bias"]["status"] == "another model"
    assert dev["v2.dev.tau"]["status"] == dev["v1.dev.em"]["status"] == "cut run"      # the first 3 questions
    assert dev["v1.dev.n"]["ours"] == "3" and dev["v2.dev.noans"]["note"] == "--max-dev-examples 3"     # a count: no model
    assert dev["v1.dev.em"]["note"] == (f"--max-dev-examples 3; on another model too (ours: {os.path.basename(tiny_qa_dir)}, "
                                        f"{tiny_words(tiny_qa_dir)}; article: {article.SQUAD_V1}, {BERT_BASE})")  # the model


def test_the_fine_tunes_give_every_row_of_their_task_and_learning_rate(made, tiny_bert_dir, capsys):
    parts = ["finetune_one", "finetune_grid", "finetune_seeds", "finetune_glue", "finetune_squad", "finetune_swag"]
    rows = check_files(made, parts, capsys)
    assert {name for name, mine in rows.items() if not mine} == {       # summaries and other tasks: no row, no error
        "finetune_grid/part4_sst2_grid_glue.json", "finetune_seeds/part4_sst2_lr2e-5_bs8_ep1_seeds2.json",
        "finetune_grid/part4_sst2_lr3e-5_bs8_ep1.json", "finetune_grid/part4_sst2_lr4e-5_bs8_ep1.json",
        "finetune_grid/part4_sst2_lr5e-5_bs8_ep1.json", "finetune_glue/part4_glue_table_lr2e-5_bs8_ep1.json",
        "finetune_squad/part4_squad_lr3e-4_bs8_ep1.json", "finetune_swag/part4_swag_lr1e-3_bs8_ep1.json"}
    one = rows["finetune_one/part4_mrpc_lr5e-5_bs8_ep1.json"]
    assert one["mrpc.lr5e-05.accuracy"]["status"] == "another split"       # 8 dev examples, not MRPC's 408
    assert one["mrpc.lr5e-05.accuracy"]["note"].endswith("8 of the article's 408 dev examples; on another model too "
                                                         f"(ours: {os.path.basename(tiny_bert_dir)}, "
                                                         f"{tiny_words(tiny_bert_dir)}; article: {article.BERT}, {BERT_BASE})")
    assert one["mrpc.lr5e-05.n"]["note"].endswith("8 of the article's 408 dev examples")      # a count: no model
    seed1 = rows["finetune_seeds/part4_sst2_lr2e-5_bs8_ep1_seed1.json"]
    curve = json.loads((made / "finetune_seeds" / "part4_sst2_lr2e-5_bs8_ep1_seed1.json").read_text())["curve"]
    assert [seed1[f"sst2.curve.{step}.step"]["ours"] for step in (210, 6300, 6315)] == [
        str(curve[k]["step"]) for k in (0, -2, -1)]                       # the first, last but one and last evaluation


def test_a_folder_of_every_run_leaves_only_the_runs_not_made(made):
    rows = folder_rows(made)
    by_key = {}
    for r in rows:
        by_key.setdefault(r["key"], []).append(r)
    not_made = {e.key for e in article.ENTRIES if e.match in ((("task", "mrpc"), ("lr", 3e-5)), (("task", "mrpc"), ("lr", 4e-5)))}
    assert {k for k, rs in by_key.items() if [r["status"] for r in rs] == ["not run yet"]} == not_made
    assert {r["command"] for r in rows if r["status"] == "not run yet"} == {
        f"python bert_part4_finetune.py mrpc {lr} --results-dir {made}" for lr in ("3e-5", "4e-5")}
    assert len(by_key) == len([e for e in article.ENTRIES if e.kind != "paper"])
    assert "unusable" not in {r["status"] for r in rows}
    assert not (made / report.REPORT_MD).read_text().count("no results files found")


# --- A results file spoiled as a user's files get spoiled: named, in both modes, never dropped, no traceback ---

def spoil(made, tmp_path, part, name, change):
    """A copy of one results file a script wrote, changed; returns (the folder of it alone, its path)."""
    folder = tmp_path / part
    folder.mkdir(parents=True)
    data = json.loads((made / part / name).read_text())
    change(data)
    (folder / name).write_text(json.dumps(data))
    return folder, folder / name


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("final"), "no final block, which bert_part4_finetune.py writes for a run"),
    (lambda d: d.clear() or d.update(hello=1), "not a results file of these scripts (no run block"),
    (lambda d: d.clear() or d.update(run={}), "not a results file of these scripts (no run block"),
    (lambda d: d.update(curve={"step": 2}), 'curve is {"step": 2}, not a list'),
    (lambda d: d["run"].update(argv=["my_notebook.py"]), "written by my_notebook.py, not by one of the scripts"),
])
def test_a_file_that_cannot_be_a_run_is_named_in_both_modes(made, tmp_path, change, message, capsys):
    folder, path = spoil(made, tmp_path, "finetune_one", "part4_mrpc_lr5e-5_bs8_ep1.json", change)
    with pytest.raises(Fatal, match="^" + re.escape(f"{path}: ")) as alone:
        report.main([str(path)])
    assert message in str(alone.value)
    with pytest.raises(Fatal) as in_folder:
        report.main(["--results-dir", str(folder)])
    assert str(in_folder.value).startswith(str(alone.value)) and "no report written" in str(in_folder.value)
    assert not (folder / report.REPORT_JSON).exists()


@pytest.mark.parametrize("value, said", [("abc", '"abc"'), (None, "null"), (float("nan"), "NaN"), (float("inf"), "Infinity"),
                                         (10 ** 400, "1" + "0" * 36 + "...")])        # too long for a float
def test_a_value_that_is_no_number_is_a_warning_and_its_rows_are_marked(made, tmp_path, value, said, capsys):
    folder, path = spoil(made, tmp_path, "finetune_one", "part4_mrpc_lr5e-5_bs8_ep1.json",
                         lambda d: d["final"]["dev"].update(accuracy=value))
    assert report.main([str(path)]) == 0
    printed = capsys.readouterr()
    assert printed.err == (f"warning: {path}: final.dev.accuracy is {said}, where a number should be; its rows are "
                           f"marked unusable\n")
    assert "dev accuracy at the end, lr 5e-05: article 0.8701   ours    unusable (final.dev.accuracy is" in printed.out
    assert report.main(["--results-dir", str(folder)]) == 0
    assert capsys.readouterr().err == printed.err.replace(str(path), str(folder / path.name))
    rows = json.loads((folder / report.REPORT_JSON).read_text())["rows"]
    marked = {r["key"] for r in rows if r["status"] == "unusable"}
    assert marked == {"mrpc.lr5e-05.accuracy", "mrpc.lr5e-05.accuracy_text"}     # the rows that read it, no other


def test_a_count_that_is_not_whole_is_not_the_articles_count(made, tmp_path, capsys):
    folder, path = spoil(made, tmp_path, "finetune_one", "part4_mrpc_lr5e-5_bs8_ep1.json",
                         lambda d: d["final"]["dev"].update(n=408.4))
    assert report.main(["--results-dir", str(folder)]) == 0
    assert "final.dev.n is 408.4, where a count (a whole number) should be" in capsys.readouterr().err
    assert {r["status"] for r in folder_rows(folder) if r["key"] == "mrpc.lr5e-05.n"} == {"unusable"}


def test_a_file_that_is_not_json_is_named_whole_and_as_given(made, tmp_path, monkeypatch):
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "part4_heads.json").write_text((made / "heads" / "part4_heads.json").read_text()[:100])
    (folder / "squad_v1_predictions.json").write_text('{"q1": "London"}')       # the scripts' other JSON: not a run
    monkeypatch.chdir(tmp_path)
    for argv, given in ((["r/part4_heads.json"], "r"), (["--results-dir", "r"], "r"),
                        (["--results-dir", str(folder)], str(folder))):
        with pytest.raises(Fatal) as e:
            report.main(argv)
        assert str(e.value).startswith(f"{given}/part4_heads.json: not a results file (not JSON: Unterminated string "
                                       f"starting at: line ")                   # whole: where it stops, as JSON says
        assert "(char " in str(e.value) and str(e.value).count("part4_") == 1


def test_a_folder_that_is_not_one_and_an_empty_one_are_said(tmp_path, capsys):
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(Fatal, match=f"^--results-dir {tmp_path / 'a_file'}: not a directory$"):
        report.main(["--results-dir", str(tmp_path / "a_file")])
    with pytest.raises(Fatal, match="no such directory"):
        report.main(["--results-dir", str(tmp_path / "none")])
    with pytest.raises(Fatal, match="a folder, not a results file"):
        report.main([str(tmp_path)])
    (tmp_path / "part4_x.json").write_text("{}")
    (tmp_path / "part4_x.log").write_text("FINAL x\n")
    with pytest.raises(Fatal) as given_its_log:          # told which file to give, not to move the log away
        report.main([str(tmp_path / "part4_x.log")])
    assert str(given_its_log.value) == (f"{tmp_path / 'part4_x.log'}: a run's log, not its results file: give "
                                        f"{tmp_path / 'part4_x.json'}")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert report.main(["--results-dir", str(empty)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{empty}: {report_text.NO_RESULTS}"
    assert "No results files found" in (empty / report.REPORT_MD).read_text()


def test_a_folder_or_a_broken_link_named_like_a_results_file_is_named(tmp_path):
    (tmp_path / "r" / "part4_heads.json").mkdir(parents=True)
    (tmp_path / "r" / "part4_squad.json").symlink_to(tmp_path / "gone.json")
    (tmp_path / "r" / "notes.json").symlink_to(tmp_path / "gone.json")          # not named like one: not a run
    with pytest.raises(Fatal) as e:
        report.main(["--results-dir", str(tmp_path / "r")])
    assert str(e.value) == (f"2 results files cannot be read as runs: {tmp_path}/r/part4_heads.json: a folder, not a "
                            f"results file; {tmp_path}/r/part4_squad.json: a link to no file, not a results file; no "
                            f"report written")


# --- --help at once: no script loads torch to answer it, and the report never loads it ---

@pytest.mark.slow
@pytest.mark.parametrize("name", ["heads", "math", "squad", "finetune", "report", "reproduce"])
def test_help_is_answered_before_torch_loads(name):
    code = ("import runpy, sys\n"
            f"sys.argv = ['bert_part4_{name}.py', '--help']\n"
            "try:\n"
            f"    runpy.run_path('bert_part4_{name}.py', run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    assert e.code in (0, None), e.code\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage: bert_part4_" in done.stdout and done.stdout.splitlines()[-1] == "[]"


@pytest.mark.slow
def test_output_into_a_closed_pipe_ends_without_a_traceback():
    """`python bert_part4_report.py FILE | head`: the reader goes away before the report has printed its lines."""
    read, write = os.pipe()
    os.close(read)                                         # no reader: the first line written meets a closed pipe
    try:
        done = subprocess.run([sys.executable, "bert_part4_report.py", "results/part4_mrpc_lr5e-5_all-MiniLM-L6-v2.json"],
                              cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.slow
def test_the_report_reads_a_folder_without_torch(made, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(made, folder)
    code = ("import sys\n"
            "import bert_part4_report as report\n"
            f"assert report.main(['--results-dir', {str(folder)!r}]) == 0\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
    reference = tmp_path / "reference"                   # the same runs reported in this process, whatever ran before
    shutil.copytree(made, reference)
    assert report.main(["--results-dir", str(reference)]) == 0
    summary = json.loads((folder / report.REPORT_JSON).read_text())["summary"]
    assert summary == json.loads((reference / report.REPORT_JSON).read_text())["summary"]


# --- A model judged by what it is: its weights' sha256 and its architecture, never its folder's name ---

def heads_run(folder, out, monkeypatch):
    """The heads script's results file for a model folder, as the script writes it."""
    monkeypatch.setattr(sys, "argv", ["bert_part4_heads.py"])
    assert heads.main(["--model", str(folder), "--results-dir", str(out), "--device", "cpu"]) == 0
    return json.loads((out / "part4_heads.json").read_text())


def named(source, folder):
    """A copy of a model folder under another name."""
    shutil.copytree(source, folder)
    return folder


def summary(runs):
    """(counts, the reproduced split, the line) of the report on these runs."""
    return report_text.status_summary(statuses.rows(runs), runs)


def model_rows(data, name="part4_heads.json"):
    """The rows of a results file's numbers that need a model."""
    return [r for r in statuses.rows({name: data}) if r["file"] and article.NUMBERS[r["key"]].model]


def tiny_architecture(folder):
    config = json.loads((folder / "config.json").read_text())
    return {"model_type": "bert", "layers": config["num_hidden_layers"], "hidden": config["hidden_size"],
            "heads": config["num_attention_heads"], "vocab": config["vocab_size"]}


@pytest.fixture
def under_the_articles_name(tiny_bert_dir, tmp_path, monkeypatch):
    """A tiny model in a folder named bert-base-uncased, and its heads run: (the folder, the results)."""
    folder = named(tiny_bert_dir, tmp_path / "models" / article.BERT)
    return folder, heads_run(folder, tmp_path / "r", monkeypatch)


def test_a_run_records_its_weights_sha256_and_architecture(under_the_articles_name):
    """The record, against the file itself: hashlib over its bytes, the config's sizes, safetensors' tensors."""
    import hashlib

    from safetensors.torch import load_file
    folder, data = under_the_articles_name
    weights = folder / "model.safetensors"
    assert data["weights"]["sha256"] == {"model.safetensors": hashlib.sha256(weights.read_bytes()).hexdigest()}
    assert data["weights"]["architecture"] == tiny_architecture(folder) | {
        "parameters": sum(t.numel() for t in load_file(str(weights)).values())}


def test_another_architecture_under_the_articles_name_is_another_model(under_the_articles_name):
    """A 2-layer, H = 32 model in a folder named bert-base-uncased: every number that needs a model is another
    model (none differs for no known reason, none is the article's), its architecture said beside the article's."""
    _, data = under_the_articles_name
    rows = model_rows(data)
    assert {r["status"] for r in rows} == {"another model", "shown"} and {r["model"] for r in rows} == {"other"}
    shape = next(r for r in rows if r["key"] == "heads.C_shape")
    assert shape["note"] == (f"ours: {article.BERT}, bert, 2 layers, H 32, 2 heads, vocab "
                             f"{data['weights']['architecture']['vocab']:,}; article: {article.BERT}, bert, 12 layers, "
                             f"H 768, 12 heads, vocab 30,522")
    assert "0 on the article's models" in summary({"part4_heads.json": data})[2]


def test_the_articles_architecture_with_other_weights_is_not_the_articles_model(under_the_articles_name, monkeypatch):
    """The article's architecture (patched to the tiny model's) with weights whose sha256 is not the published one
    (random weights): another model, weights not verified; never the article's."""
    folder, data = under_the_articles_name
    monkeypatch.setattr(article, "ARCHITECTURE", tiny_architecture(folder))
    rows = model_rows(data)
    judged = [r for r in rows if r["status"] != "shown"]
    assert judged and {r["status"] for r in judged} == {"another model"} and {r["model"] for r in rows} == {"other"}
    assert all("the article's architecture but weights not verified" in r["note"] for r in judged)
    assert article.PUBLISHED[article.BERT].sha256[:12] in judged[0]["note"]


def test_a_weight_file_whose_sha256_is_the_published_one_is_the_articles_model(under_the_articles_name, tmp_path,
                                                                                monkeypatch):
    """The tiny file's own sha256 (hashlib) put in the table of published checkpoints, and the article's architecture
    patched to its: its numbers are judged as the article's model's, under any folder name; with no published
    sha256, by name and architecture, said so, and under another name another model."""
    import hashlib
    folder, data = under_the_articles_name
    sha = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    monkeypatch.setattr(article, "ARCHITECTURE", tiny_architecture(folder))
    published = dict(article.PUBLISHED)
    monkeypatch.setattr(article, "PUBLISHED", published)
    published[article.BERT] = article.Published("model.safetensors", sha, None, "a test: the tiny model's own file")
    elsewhere = heads_run(named(folder, tmp_path / "my-model"), tmp_path / "r2", monkeypatch)
    for results in (data, elsewhere):
        rows = model_rows(results)
        assert {r["model"] for r in rows} == {"article"} and "another model" not in {r["status"] for r in rows}
        assert not [r for r in rows if "weights not verified" in r["note"]]
    reproduced = summary({"part4_heads.json": data})[1]["on the article's models"]
    assert reproduced == sum(r["status"] in statuses.REPRODUCED for r in model_rows(data))
    published[article.BERT] = article.Published("model.safetensors", None, None, "a test: not known")
    judged = [r for r in model_rows(data) if r["status"] != "shown"]
    assert {r["model"] for r in judged} == {"unverified"}
    split = summary({"part4_heads.json": data})[1]
    assert (split["on the article's models"], split[report_text.UNVERIFIED_COUNT]) == (0, reproduced)
    assert all(r["note"].endswith("by name and architecture; weights not verified") for r in judged)
    assert {r["status"] for r in model_rows(elsewhere) if r["status"] != "shown"} == {"another model"}


def test_a_results_file_without_the_record_of_its_weights_is_never_the_articles(under_the_articles_name, monkeypatch):
    """A file written before runs recorded their weights (the record taken out of one the script wrote): another
    model, said so, even with the article's name and the table patched to its weights."""
    import hashlib
    folder, data = under_the_articles_name
    monkeypatch.setattr(article, "ARCHITECTURE", tiny_architecture(folder))
    published = dict(article.PUBLISHED)
    monkeypatch.setattr(article, "PUBLISHED", published)
    published[article.BERT] = article.Published(
        "model.safetensors", hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest(), None, "a test")
    assert {r["model"] for r in model_rows(data)} == {"article"}
    del data["weights"]
    judged = [r for r in model_rows(data) if r["status"] != "shown"]
    assert {r["status"] for r in judged} == {"another model"}
    assert all("weights not recorded" in r["note"] and "not counted as the article's" in r["note"] for r in judged)


def test_a_stand_in_says_so_on_every_number_that_needs_a_model(tiny_qa_dir, tmp_path, monkeypatch, capsys):
    """A folder with part4_stand_in.json under the SQuAD v1.1 id: the run records what it is, and the report shows every
    number of its runs that needs a model as another model (stand-in), with that line; a count needs none."""
    from part4.output.results_files import STAND_IN
    folder = named(tiny_qa_dir, tmp_path / "mirror" / article.SQUAD_V1)
    what = "stand-in: all-MiniLM-L6-v2 fine-tuned here on SQuAD v1.1"
    (folder / STAND_IN).write_text(json.dumps({"stand_in_for": article.SQUAD_V1, "what": what}))
    monkeypatch.setattr(sys, "argv", ["bert_part4_squad.py"])
    out = tmp_path / "r"
    assert sq.main(["--only", "demo", "--only", "v1", "--v1-model", str(folder), "--v2-model", tiny_qa_dir, "--v1-data",
                    dev_file("1.1", str(tmp_path)), "--max-dev-examples", "3", "--results-dir", str(out), "--device", "cpu"]) == 0
    data = json.loads((out / "part4_squad.json").read_text())
    assert data["models"]["v1"]["stand_in"] == {"stand_in_for": article.SQUAD_V1, "what": what}
    rows = [r for r in statuses.rows({"part4_squad.json": data}) if r["file"]]
    v1 = [r for r in rows if article.NUMBERS[r["key"]].model == article.SQUAD_V1]
    assert v1 and {(r["status"], r["model"]) for r in v1} == {("another model", "stand-in")}
    assert all(r["note"].startswith(f"all-MiniLM-L6-v2 fine-tuned here on SQuAD v1.1, in the place of {article.SQUAD_V1}")
               for r in v1)
    assert next(r for r in v1 if r["key"] == "v1.dev.em")["note"].endswith("; --max-dev-examples 3")    # the cut said too
    assert {r["status"] for r in rows if r["key"] == "v1.dev.n"} == {"cut run"}                # a count: no model
    assert report.main(["--results-dir", str(out)]) == 0
    md = (out / report.REPORT_MD).read_text()
    assert "| another model (stand-in): all-MiniLM-L6-v2 fine-tuned here on SQuAD v1.1, in the place of " in md
    (folder / STAND_IN).write_text(json.dumps({"what": what}))
    with pytest.raises(Fatal, match=re.escape(f"{folder / STAND_IN}: not a stand-in's record")):
        sq.main(["--only", "demo", "--v1-model", str(folder), "--v2-model", tiny_qa_dir, "--results-dir", str(out),
                 "--device", "cpu"])


def test_a_model_of_fewer_layers_under_the_articles_name_is_another_model_on_the_layers_it_lacks(
        tiny_sst2_dir, tiny_qa_dir, tmp_path, monkeypatch):
    """The math script on a 2-layer SQuAD model in a folder named as the article's checkpoint: the attention flow's
    rows of layers 3 to 12, which it cannot have, are another model, not unusable."""
    folder = named(tiny_qa_dir, tmp_path / "mirror" / article.SQUAD_V1)
    monkeypatch.setattr(sys, "argv", ["bert_part4_math.py"])
    out = tmp_path / "r"
    assert bm.main(["--sst2-model", tiny_sst2_dir, "--squad-model", str(folder), "--squad2-model", tiny_qa_dir,
                    "--flow-questions", "0", "--results-dir", str(out), "--device", "cpu"]) == 0
    rows = [r for r in folder_rows(out) if r["key"].startswith("flow.")]
    assert {r["status"] for r in rows} == {"another model"} and len(rows) == 37
    assert not [r for r in folder_rows(out) if r["status"] in ("unusable", "differs") and
                article.NUMBERS[r["key"]].model]


@pytest.mark.slow
def test_a_run_in_bf16_is_judged_as_any_and_says_its_precision(tiny_bert_dir, tiny_qa_dir, tmp_path, monkeypatch):
    """The heads and the SQuAD script run with --dtype bf16 record it; each of their rows that needs a model says it
    was computed in bf16, and a row of the same script in fp32 says nothing of its precision."""
    from part4.models import loading
    monkeypatch.setattr(loading, "native_bf16", lambda device: True)     # no line about an emulated bf16 here
    for dtype in ("fp32", "bf16"):
        monkeypatch.setattr(sys, "argv", ["bert_part4_heads.py"])           # the script's name, as its results record it
        assert heads.main(["--model", tiny_bert_dir, "--device", "cpu", "--dtype", dtype,
                           "--results-dir", str(tmp_path / dtype)]) == 0
        monkeypatch.setattr(sys, "argv", ["bert_part4_squad.py"])
        assert sq.main(["--only", "demo", "--v1-model", tiny_qa_dir, "--v2-model", tiny_qa_dir, "--device", "cpu",
                        "--dtype", dtype, "--results-dir", str(tmp_path / dtype)]) == 0
    saved = {d: json.loads((tmp_path / d / "part4_heads.json").read_text()) for d in ("fp32", "bf16")}
    assert saved["bf16"]["dtype"] == "bf16" and saved["bf16"]["tolerance"] == heads.TOLERANCE["bf16"]
    assert saved["fp32"]["tolerance"] == heads.TOLERANCE["fp32"]
    assert saved["bf16"]["glue"]["logits_library"] != saved["fp32"]["glue"]["logits_library"]      # bf16 did run
    for d in ("fp32", "bf16"):
        rows = [r for r in folder_rows(tmp_path / d) if r["status"] != "not run yet"]
        needs = {r["key"] for r in rows if next(e for e in article.ENTRIES if e.key == r["key"]).model}
        said = {r["key"] for r in rows if "computed in bf16 (--dtype bf16)" in r["note"]}
        assert needs and {r["file"] for r in rows} >= {"part4_heads.json", "part4_squad.json"}
        assert said == (needs if d == "bf16" else set())
