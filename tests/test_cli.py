"""The command line and the recipe's settings: --help and every refused flag answer before torch loads, each setting
has one home, is declared once and set once by keyword, results written before keep their settings, and a cut run
evaluates less often than a full one."""

import dataclasses
import glob
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from conftest import ROOT
from test_finetune import write_sst2

import bert_part4_finetune as ft
from part4.command_line import fine_tune_settings
from part4.command_line.declarations import RUN, TABLE, Fatal, Range, setting
from part4.command_line.fine_tune_settings import Settings, computation_on
from part4.data import readers
from part4.models.loading import ALONE
from part4.paper import recipe
from part4.reproduction import experiments
from part4.run import command, run_files, summaries
from part4.tasks import families

CPU = torch.device("cpu")


def recorded_settings(config, family, job, dtype=None, train_rows=10):
    """What a run of this job records (part4/run/run_files.py RunSettings.recorded), made as the command makes it
    (Command.run_settings) on the CPU, alone, on a task of train_rows rows."""
    where = SimpleNamespace(device=CPU, autocast_dtype=dtype, processes=ALONE)
    data = SimpleNamespace(family=family, train={"input_ids": [[0]] * train_rows}, padding_free_problem=None,
                           n_train=train_rows, n_train_all=train_rows, fingerprint="0123456789ab")
    return command.Command.run_settings(where, config, job, data, ALONE).recorded

SCRIPT_AS_MAIN = ("import runpy, sys\n"
                  "sys.argv = ['bert_part4_finetune.py'] + sys.argv[1:]\n"
                  "try:\n"
                  "    runpy.run_path('bert_part4_finetune.py', run_name='__main__')\n"
                  "except SystemExit as e:\n"
                  "    print('exit', e.code, 'torch' in sys.modules, 'transformers' in sys.modules)\n")


@pytest.mark.slow
@pytest.mark.parametrize("argv, code, err", [
    (["--help"], 0, ""),
    (["mrpc", "--stride", "3"], 2, "error: --stride: mrpc does not take it (--data-dir does)"),
    (["squad", "--stride", "384"], 2, "error: --stride 384: must be below the window length --max-len 384 (and at least 0)"),
    (["glue", "--tasks", "cola,xyz"], 2, "error: --tasks cola,xyz: unknown GLUE task(s) xyz; choose from cola, sst2, mrpc, "
                                         "stsb, qqp, mnli, qnli, rte, wnli"),
    (["mrpc", "abc"], 2, "error: lr abc: not a number: a learning rate must be positive and below 1, e.g. 2e-5 (the "
                         "paper's grid: 5e-5, 4e-5, 3e-5, 2e-5)"),
    *((["mrpc", lr], 2, f"error: lr {shown}: a learning rate must be positive and below 1, e.g. 2e-5 (the paper's grid: "
                        f"5e-5, 4e-5, 3e-5, 2e-5)") for lr, shown in (("2e5", "200000.0"), ("0", "0.0"), ("-1", "-1.0"),
                                                                       ("nan", "nan"))),
    (["rte", "--batch-size", "0"], 2, "error: --batch-size 0: must be positive"),
    (["rte", "--dtype", "foo"], 2, "error: argument --dtype: invalid choice: 'foo' (choose from 'auto', 'fp32', 'bf16', "
                                   "'fp16') (see --help)"),
    (["rte", "--dtype", "fp16"], 2, "error: --dtype fp16: training in fp16 needs loss scaling, which this script does not "
                                    "do; use bf16 or fp32"),
    (["rte", "--warmup", "1"], 2, "error: --warmup 1.0: must be in [0, 1)"),
    (["rte", "--group-by-length", "yes"], 2, "error: argument --group-by-length: invalid choice: 'yes' (choose from "
                                             "'auto', 'on', 'off') (see --help)"),
    (["2e-5", "rte"], 2, "error: unknown task '2e-5': choose one of cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, "
                         "squad, squad_v2, swag, or glue"),
    (["rte", "--checkpoint-every", "0"], 2, "error: --checkpoint-every 0s: must be positive"),
    (["rte", "--checkpoint-every", "-1"], 2, "error: --checkpoint-every -1s: must be positive"),
    (["rte", "--checkpoint-every", "-5m"], 2, "error: --checkpoint-every -5m: must be positive"),
    (["rte", "--checkpoint-every", "ten"], 2, "error: argument --checkpoint-every: 'ten' is not a duration (e.g. 90s, "
                                              "10m, 1h, 1h30m) (see --help)"),
    (["rte", "--pad-to-multiple-of", "0"], 2, "error: --pad-to-multiple-of 0: must be positive"),
    (["rte", "--cudnn-attention", "yes"], 2, "error: argument --cudnn-attention: invalid choice: 'yes' (choose from "
                                             "'auto', 'on', 'off') (see --help)"),
])
def test_help_and_refusals_come_before_torch_is_imported(argv, code, err):
    """The script run as a script: the answer comes with torch and transformers not yet in sys.modules."""
    out = subprocess.run([sys.executable, "-c", SCRIPT_AS_MAIN, *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.strip().splitlines()[-1] == f"exit {code} False False", out.stdout + out.stderr
    assert out.stderr.strip() == err
    if code == 0:
        assert out.stdout.startswith("usage: bert_part4_finetune.py") and "--padding-free" in out.stdout


@pytest.mark.parametrize("given, seconds", [("90s", 90), ("10m", 600), ("1.5h", 5400), ("45", 45), ("0.5s", 0.5),
                                            ("2M", 120), ("1h30m", 5400)])
def test_a_checkpoint_cadence_is_a_duration(given, seconds):
    assert fine_tune_settings.parse(["rte", "--checkpoint-every", given]).checkpoint_every == seconds
    assert fine_tune_settings.parse(["rte", f"--checkpoint-every={given}"]).checkpoint_every == seconds


def test_a_value_that_starts_with_a_dash_is_the_flags_value_unless_it_is_a_flag():
    assert fine_tune_settings.parse(["rte", "--results-dir", "-odd-folder"]).results_dir == "-odd-folder"
    with pytest.raises(Fatal, match="argument --results-dir: expected one argument"):
        fine_tune_settings.parse(["rte", "--results-dir", "--device", "cpu"])


def test_how_the_steps_are_computed_is_the_devices_unless_given():
    """--pad-to-multiple-of and --cudnn-attention left to the device (auto): on CUDA batches rounded up to multiples
    of 8 and attention without cuDNN's kernels; elsewhere each batch its own width and no cuDNN to use."""
    auto = fine_tune_settings.parse(["rte"])
    assert (auto.pad_to_multiple_of, auto.cudnn_attention) == (None, None)
    assert computation_on(auto, "cpu") == computation_on(auto, "mps") == {"pad_to_multiple_of": 1, "cudnn_attention": False}
    assert computation_on(auto, "cuda") == {"pad_to_multiple_of": 8, "cudnn_attention": False}
    given = fine_tune_settings.parse(["rte", "--pad-to-multiple-of", "16", "--cudnn-attention", "on"])
    assert computation_on(given, "cuda") == {"pad_to_multiple_of": 16, "cudnn_attention": True}
    assert computation_on(given, "cpu") == {"pad_to_multiple_of": 16, "cudnn_attention": False}


@pytest.mark.slow
def test_the_command_line_room_imports_no_torch():
    out = subprocess.run([sys.executable, "-c", "import sys; from part4.command_line import fine_tune_settings; "
                          "fine_tune_settings.parse(['glue']); "
                          "print(sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "[]", out.stderr


def test_the_recipes_task_names_are_the_tasks_rooms():
    assert recipe.GLUE_TASKS == tuple(readers.GLUE)
    assert set(recipe.RECIPES) == set(families.FAMILIES)
    assert recipe.MAX_LEN == recipe.RECIPES["squad"].max_len == 384
    assert recipe.STRIDE == fine_tune_settings.parse(["squad"]).stride == 128


def test_settings_are_made_by_keyword_once_and_a_tasks_for_that_task():
    """Every field of Settings comes from the command line (or the recipe where it is not given); a task's TaskConfig
    holds the command's Settings itself (no copy of its values) and what is the task's own."""
    settings = fine_tune_settings.parse(["glue", "--tasks", "mnli,rte", "--seeds", "2", "--warmup", "0.2",
                                       "--group-by-length", "on"])
    assert settings.grid == "glue" and settings.seeds == 2 and settings.many and settings.reuse
    assert (settings.batch_size, settings.epochs, settings.warmup) == (recipe.GLUE_BATCH_SIZE, recipe.GLUE_EPOCHS, 0.2)
    mnli, _, _ = command.task_inputs(settings, "mnli", ("mnli",))
    rte, _, sources = command.task_inputs(settings, "rte", ("mnli",))
    assert mnli.settings is settings and rte.settings is settings
    assert [job.dev_evaluations for job in ft.planned_jobs(mnli)] == [recipe.GLUE_EPOCHS] * 8      # once per epoch (mnli here)
    assert [job.dev_evaluations for job in ft.planned_jobs(rte)] == [recipe.RECIPES["rte"].evals] * 8 and rte.grouped is True
    assert sources == readers.Sources(task="rte", data_dir=None, train_data=None, dev_data=None)
    assert {f.name for f in dataclasses.fields(run_files.TaskConfig)} == {"task", "settings", "recipe", "grouped",
                                                                          "test_dir"}
    defaults = fine_tune_settings.parse(["mrpc"])
    assert (defaults.warmup, defaults.weight_decay, defaults.clip) == (recipe.WARMUP, recipe.WEIGHT_DECAY, recipe.CLIP)


def test_the_grids_are_the_papers_and_glue_varies_the_lr_only():
    assert recipe.grid_points("glue", 32, 3) == [(32, lr, 3) for lr in (5e-5, 4e-5, 3e-5, 2e-5)]
    assert recipe.grid_points("glue", 16, 2) == [(16, lr, 2) for lr in (5e-5, 4e-5, 3e-5, 2e-5)]
    a3 = recipe.grid_points("a3", 32, 3)
    assert a3 == [(b, lr, e) for b in (16, 32) for lr in (5e-5, 3e-5, 2e-5) for e in (2, 3, 4)] and len(a3) == 18
    settings = fine_tune_settings.parse(["rte", "--grid", "glue", "--seeds", "2", "--batch-size", "8"])
    jobs = ft.planned_jobs(command.task_inputs(settings, "rte")[0])
    assert [(j.batch_size, j.lr, j.seed) for j in jobs[:3]] == [(8, 5e-5, 0), (8, 5e-5, 1), (8, 4e-5, 0)]
    assert recipe.grid_description("a3", 32, 3) == ("grid a3 (paper A.3): batch {16, 32} x lr {5e-5, 3e-5, 2e-5} x epochs "
                                             "{2, 3, 4} = 2 x 3 x 3 = 18 runs")


@pytest.mark.parametrize("steps, evals", [(30, 30), (9, 30), (345, 30), (6315, 30), (100, 4), (3, 3), (234, 30)])
def test_a_cut_run_evaluates_at_most_every_few_steps_a_full_run_as_the_recipe(steps, evals):
    """Brute force: the steps at which a run evaluates, full (steps // evaluations apart) and cut (never closer than
    CUT_EVAL_EVERY steps, unless the run is shorter: then once, at its end)."""
    full = recipe.eval_every(evals, steps, cut=False)
    assert full == max(1, steps // evals)
    cut = recipe.eval_every(evals, steps, cut=True)
    points = [s for s in range(1, steps + 1) if s % cut == 0 or s == steps]
    assert all(b - a >= min(recipe.CUT_EVAL_EVERY, steps) for a, b in zip(points, points[1:-1]))
    assert len(points) <= max(1, -(-steps // recipe.CUT_EVAL_EVERY)) and cut >= full
    assert recipe.evaluations_made(steps, cut) == len(points)        # what the preamble and the cost line say
    for cut_run, every in ((False, full), (True, cut)):              # the reproduce script's estimate: one more, before
        made = sum(1 for s in range(1, steps + 1) if s % every == 0 or s == steps)    # fine_tune's condition, step by step
        assert experiments.estimated_evaluations(steps, cut_run, evals) == made + 1


def test_a_cut_run_says_how_often_it_evaluates(tiny_bert_dir, tmp_path):
    """SST-2 cut to 80 of 96 examples, batch 8: 30 steps; the recipe's 30 evaluations would be one a step, the cut run
    makes 3 and says so. The same 30 steps uncut (all 80 examples of the file) keep the recipe's 30."""
    cut_dir, full_dir = write_sst2(str(tmp_path / "cut"), n_train=96), write_sst2(str(tmp_path / "full"), n_train=80)
    common = ["sst2", "1e-3", "--model", tiny_bert_dir, "--batch-size", "8", "--device", "cpu", "--padding-free", "off"]
    assert ft.main(common + ["--data-dir", cut_dir, "--max-train-examples", "80", "--results-dir", str(tmp_path / "a")]) == 0
    assert ft.main(common + ["--data-dir", full_dir, "--results-dir", str(tmp_path / "b")]) == 0
    cut = json.loads((tmp_path / "a" / "part4_sst2_lr1e-3_bs8.json").read_text())
    full = json.loads((tmp_path / "b" / "part4_sst2_lr1e-3_bs8.json").read_text())
    assert cut["steps"] == full["steps"] == 30
    assert [c["step"] for c in cut["curve"]] == [10, 20, 30] and len(full["curve"]) == 30
    assert cut["final"] == full["final"]                          # the same examples, the same run: only the curve differs
    log = (tmp_path / "a" / "part4_sst2_lr1e-3_bs8.log").read_text()
    assert "  (a cut run: a dev evaluation every 10 steps, 3 in all, not the recipe's 30, which are for full runs; " \
           "--evals sets them)" in log
    given = ft.main(common + ["--data-dir", cut_dir, "--max-train-examples", "80", "--evals", "30", "--results-dir",
                              str(tmp_path / "c")])
    assert given == 0 and len(json.loads((tmp_path / "c" / "part4_sst2_lr1e-3_bs8.json").read_text())["curve"]) == 30
    assert ft.main(common + ["--data-dir", cut_dir, "--max-train-examples", "88", "--results-dir", str(tmp_path / "d")]) == 0
    uneven = json.loads((tmp_path / "d" / "part4_sst2_lr1e-3_bs8.json").read_text())   # 33 steps: every 10, and the last
    assert [c["step"] for c in uneven["curve"]] == [10, 20, 30, 33]
    assert "a dev evaluation every 10 steps, 4 in all," in (tmp_path / "d" / "part4_sst2_lr1e-3_bs8.log").read_text()


def test_the_recorded_command_line_says_what_happened(tiny_bert_dir, tmp_path):
    """Under a grid no single learning rate was given: the recorded lr is null, each run's own is in its file."""
    data = write_sst2(str(tmp_path / "d"), n_train=16)
    argv = ["sst2", "--grid", "glue", "--model", tiny_bert_dir, "--data-dir", data, "--batch-size", "8", "--epochs", "1",
            "--device", "cpu", "--results-dir", str(tmp_path / "r"), "--evals", "1"]
    assert ft.main(argv) == 0
    summary = json.loads((tmp_path / "r" / "part4_sst2_grid_glue.json").read_text())
    assert summary["run"]["config"]["lr"] is None and summary["run"]["config"]["grid"] == "glue"
    run = json.loads((tmp_path / "r" / "part4_sst2_lr5e-5_bs8_ep1.json").read_text())
    assert run["run"]["config"]["task"] == "sst2" and run["run"]["config"]["evals"] == 1 and run["lr"] == 5e-5
    assert run["run"]["config"]["padding_free"] is True and run["run"]["config"]["group_by_length"] is None


def test_the_dtype_is_recorded_as_computed_and_earlier_results_stay_valid(tmp_path):
    """A run records "fp32" (no autocast) or "bf16"; a result of an earlier version, which wrote the string "None" for
    fp32, is still the same settings (reused, never refused as other settings)."""
    import torch
    settings = fine_tune_settings.parse(["rte", "--model", "m", "--results-dir", str(tmp_path)])
    config, family, _ = command.task_inputs(settings, "rte")
    job = ft.planned_jobs(config)[0]
    ours = recorded_settings(config, family, job, dtype=None, train_rows=10)
    assert ours["dtype"] == "fp32" and recorded_settings(config, family, job, dtype=torch.bfloat16)["dtype"] == "bf16"
    path = tmp_path / "earlier.json"
    path.write_text(json.dumps({"settings": {**ours, "dtype": "None"}, "final": {}}))
    assert run_files.existing_result(str(path), ours) is not None
    run_files.check_not_replaced(str(path), ours, "holds a result of other settings")          # no refusal
    path.write_text(json.dumps({"settings": {**ours, "dtype": "torch.bfloat16"}, "final": {}}))
    assert run_files.existing_result(str(path), ours) is None


def test_settings_recorded_before_the_datas_fingerprint_are_compared_without_it(tmp_path):
    """A run's data fingerprint is compared only where both sides record it: an earlier result (none) beside ours, or
    ours made from an earlier result beside a new one, is the same run; two prints that differ are other settings."""
    settings = fine_tune_settings.parse(["rte", "--model", "m", "--results-dir", str(tmp_path)])
    config, family, _ = command.task_inputs(settings, "rte")
    ours = recorded_settings(config, family, ft.planned_jobs(config)[0])
    earlier = {k: v for k, v in ours.items() if k != "data"}
    path = tmp_path / "run.json"
    for saved, given in ((earlier, ours), (ours, earlier)):
        path.write_text(json.dumps({"settings": saved, "final": {}}))
        assert run_files.existing_result(str(path), given) is not None
        run_files.check_not_replaced(str(path), given, "holds a result of other settings")         # no refusal
    path.write_text(json.dumps({"settings": {**ours, "data": "ba9876543210"}, "final": {}}))
    assert run_files.existing_result(str(path), ours) is None
    with pytest.raises(Fatal, match="data 'ba9876543210' -> '0123456789ab'"):
        run_files.check_not_replaced(str(path), ours, "holds a result of other settings")


def test_a_glue_table_of_another_model_or_data_is_not_replaced(tmp_path):
    """The table's recorded settings name its model and data folder: a table of another model stops the command."""
    from part4.run import summaries
    settings = fine_tune_settings.parse(["glue", "--tasks", "rte", "--model", "model-a", "--results-dir", str(tmp_path)])
    recorded = summaries.table_settings(settings)
    assert recorded["model"] == "model-a" and recorded["data_dir"] is None and recorded["group_by_length"] == "auto"
    other = {"settings": {"tasks": ["rte"], **recorded, "model": "model-b"}}
    (tmp_path / f"{summaries.table_name(settings)}.json").write_text(json.dumps(other))
    with pytest.raises(Fatal, match="a table of other settings .*model 'model-b' -> 'model-a'"):
        summaries.table_started(settings, ["rte"], {}, ALONE)


# --- A setting declared once: parsed, checked, recorded and in --help from its one declaration ---

@dataclasses.dataclass(frozen=True, kw_only=True)
class WithDummy(Settings):
    """The command's Settings and one more setting, declared as a new one would be."""
    dummy_share: float = setting(0.25, check=Range(0, 1), record=(RUN, TABLE),
                                 help="a setting only the tests declare (default 0.25)")


def test_a_setting_is_one_declaration_parsed_checked_recorded_and_in_help(monkeypatch, tiny_bert_dir, tmp_path):
    """Declared once, a setting is a flag in --help, parsed (its default when not given) and checked by its range,
    kept in Settings, recorded with the command line, and (declared so) with each run's settings and each table's;
    results written before it existed read as its default: the same run at the default, another at any other
    value."""
    monkeypatch.setattr(fine_tune_settings, "Settings", WithDummy)   # the parser's, the checks' and the defaults recorded
    shown = fine_tune_settings.finetune_parser().format_help()
    assert "--dummy-share DUMMY_SHARE" in shown
    assert "a setting only the tests declare (default 0.25)" in " ".join(shown.split())
    given, default = fine_tune_settings.parse(["rte", "--dummy-share", "0.5"]), fine_tune_settings.parse(["rte"])
    assert isinstance(given, WithDummy) and (given.dummy_share, default.dummy_share) == (0.5, 0.25)
    with pytest.raises(Fatal, match=r"^--dummy-share 1.5: must be in \[0, 1\)$"):
        fine_tune_settings.parse(["rte", "--dummy-share", "1.5"])
    assert run_files.recorded_command(given)["config"]["dummy_share"] == 0.5
    assert summaries.table_settings(fine_tune_settings.parse(["glue", "--dummy-share", "0.5"]))["dummy_share"] == 0.5
    ours = {}
    for name, settings in (("given", given), ("default", default)):
        config, family, _ = command.task_inputs(settings, "rte")
        ours[name] = recorded_settings(config, family, ft.planned_jobs(config)[0], dtype=None, train_rows=10)
    assert (ours["given"]["dummy_share"], ours["default"]["dummy_share"]) == (0.5, 0.25)
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"settings": {k: v for k, v in ours["default"].items() if k != "dummy_share"}}))
    assert run_files.existing_result(str(earlier), ours["default"]) is not None
    assert run_files.existing_result(str(earlier), ours["given"]) is None
    data = write_sst2(str(tmp_path / "d"), n_train=16, n_dev=8)
    assert ft.main(["sst2", "1e-3", "--model", tiny_bert_dir, "--data-dir", data, "--batch-size", "8", "--epochs", "1",
                    "--device", "cpu", "--results-dir", str(tmp_path / "r"), "--dummy-share", "0.5"]) == 0
    written = json.loads((tmp_path / "r" / "part4_sst2_lr1e-3_bs8_ep1.json").read_text())
    assert written["settings"]["dummy_share"] == written["run"]["config"]["dummy_share"] == 0.5


# --- evals: the flag as given, one count per run, recorded under its own name ---

def test_the_flag_as_given_and_the_count_of_evaluations_have_two_names(tiny_bert_dir, tmp_path):
    """--evals as given (None: the recipe's) is recorded with the command line; each run's count, resolved once
    (GLUE: the article's 30; SQuAD and SWAG: once per epoch), is recorded with its settings as dev_evaluations; no
    flag that cuts nothing is said to cut the run."""
    assert "--evals" not in fine_tune_settings.parse(["glue", "--evals", "3"]).cuts
    assert list(fine_tune_settings.parse(["glue"]).cuts) == ["--max-train-examples", "--max-dev-examples"]
    for argv, count in ((["squad"], 3), (["squad_v2"], 2), (["swag", "--epochs", "4"], 4), (["sst2"], 30),
                        (["squad", "--evals", "7"], 7)):
        settings = fine_tune_settings.parse(argv)
        config, family, _ = command.task_inputs(settings, settings.task)
        job = ft.planned_jobs(config)[0]
        assert job.dev_evaluations == count and type(job.dev_evaluations) is int
        recorded = recorded_settings(config, family, job, dtype=None, train_rows=10)
        assert recorded["dev_evaluations"] == count and "evals" not in recorded
    data = write_sst2(str(tmp_path / "d"), n_train=16, n_dev=8)
    assert ft.main(["sst2", "1e-3", "--model", tiny_bert_dir, "--data-dir", data, "--batch-size", "8", "--epochs", "1",
                    "--device", "cpu", "--results-dir", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "part4_sst2_lr1e-3_bs8_ep1.json").read_text())
    assert written["run"]["config"]["evals"] is None and written["settings"]["dev_evaluations"] == 30


# --- Results written before: the same settings for the same command line, so reused, never refused ---

EARLIER_RUNS = sorted(p for p in glob.glob(os.path.join(ROOT, "results", "part4_*_lr*.json"))
                      + glob.glob(os.path.join(ROOT, "tests", "data", "earlier_results", "part4_*_lr*.json"))
                      if "glue_table" not in p and json.load(open(p)).get("settings"))
EARLIER_TABLES = sorted(glob.glob(os.path.join(ROOT, "results", "part4_glue_table*.json"))
                        + glob.glob(os.path.join(ROOT, "tests", "data", "earlier_results", "part4_glue_table*.json")))


@pytest.mark.parametrize("path", EARLIER_RUNS, ids=lambda p: os.path.relpath(p, ROOT))
def test_a_run_written_before_has_the_settings_its_command_has_now(path, monkeypatch):
    """Each run results file written by an earlier version (the committed results/, and tests/data/earlier_results/
    from tiny runs: they still record evals for the count and no init for a pre-trained run) holds the settings this
    version records for the command line it records: the same run, found done, never refused as other settings."""
    monkeypatch.chdir(ROOT)                            # its paths are recorded as seen from the checkout
    with open(path) as f:
        saved = json.load(f)
    settings = fine_tune_settings.parse(saved["run"]["argv"][1:])
    once = recipe.ONCE_PER_EPOCH if settings.task == "glue" else ()
    config, family, _ = command.task_inputs(settings, saved["task"], once)
    job = next(j for j in ft.planned_jobs(config) if run_files.run_name(config, j) == saved["name"])
    assert saved["device"] == "cpu"                                              # fp32: no autocast
    ours = recorded_settings(config, family, job, dtype=None, train_rows=saved["settings"]["train_rows"])
    assert run_files.existing_result(path, ours) is not None
    run_files.check_not_replaced(path, ours, "holds a result of other settings")
    assert run_files.job_of(saved) == job


@pytest.mark.parametrize("path", EARLIER_TABLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_a_glue_table_written_before_has_the_settings_its_command_has_now(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with open(path) as f:
        saved = json.load(f)
    ours = {"tasks": saved["settings"]["tasks"], **summaries.table_settings(fine_tune_settings.parse(saved["run"]["argv"][1:]))}
    assert summaries.saved_table_settings(saved) == ours
    run_files.check_not_replaced(path, ours, "a table of other settings", held=summaries.saved_table_settings)


def test_ctrl_c_before_main_is_one_line_and_main_gets_it_back(capsys):
    """A script run as one answers its command line first (answer_now), then imports torch: Ctrl-C there is one line
    and exit 130, no traceback; once main runs (run_main), Ctrl-C is a KeyboardInterrupt again, for main's own
    handling (the training loop's checkpoint and stop), and ends as one line too."""
    import signal

    from part4.command_line import declarations
    before = signal.getsignal(signal.SIGINT)
    try:
        declarations.answer_now(fine_tune_settings.parse, ["mrpc"])
        with pytest.raises(SystemExit) as stopped:
            signal.raise_signal(signal.SIGINT)
        assert stopped.value.code == 130 and capsys.readouterr().err == "interrupted: no results were written\n"

        def main(argv):
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            signal.raise_signal(signal.SIGINT)

        assert declarations.run_main(main) == 130
        assert capsys.readouterr().err == "interrupted: no results were written\n"
        signal.signal(signal.SIGINT, signal.SIG_IGN)      # a script started with Ctrl-C ignored (cmd & in a shell script)
        declarations.answer_now(fine_tune_settings.parse, ["mrpc"])
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_an_error_line_starts_its_own_line_beside_a_progress_bar(capsys):
    """Stopped inside a loop whose progress bar is still drawn on stderr (Ctrl-C in SQuAD's scoring), the one line is
    written after the bar is cleared ('\\r', the bar's width of spaces, '\\r'), never on from the bar."""
    from tqdm import tqdm

    from part4.command_line import declarations

    bar = tqdm(total=10, file=sys.stderr, desc="windows")
    bar.update(3)
    capsys.readouterr()

    def main(argv):
        raise KeyboardInterrupt

    assert declarations.run_main(main) == 130
    err = capsys.readouterr().err
    bar.close()
    said = err.index("interrupted: no results were written\n")
    assert err[:said].endswith("\r") and err[:said].strip() == "", repr(err)   # the bar cleared: nothing left before it
