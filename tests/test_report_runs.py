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
from part4 import article
from part4.flags import Fatal

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
                                    data["v1"], "--v2-data", data["v2"], "--limit", "3", "--device", "cpu"]),
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
    """The entries a results file must give, from part4/article.py and the file's own record (not the report's code):
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
                                 f"fine-tuned SST-2 at lr 2e-5 and MRPC at 5e-5, 4e-5, 3e-5 and 2e-5"]
            found[f"{part}/{name}"] = mine
    return found


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
    assert dev["v1.dev.n"]["ours"] == "3" and dev["v2.dev.noans"]["note"] == "--limit 3"     # a count: no model
    assert dev["v1.dev.em"]["note"] == (f"--limit 3; on another model too (ours: {os.path.basename(tiny_qa_dir)}; "
                                        f"article: {article.SQUAD_V1})")                   # a score: the model said


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
                                                         f"(ours: {os.path.basename(tiny_bert_dir)}; article: {article.BERT})")
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
    empty = tmp_path / "empty"
    empty.mkdir()
    assert report.main(["--results-dir", str(empty)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{empty}: {report.NO_RESULTS}"
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
    summary = json.loads((folder / report.REPORT_JSON).read_text())["summary"]
    assert summary == json.loads((made / report.REPORT_JSON).read_text())["summary"]
