"""bert_part4_reproduce.py, the whole article in one command, run as a user runs it (a subprocess) on a mirror of tiny
models under the article's Hub ids and the data of ../shared/data: the plan lists every experiment the report lists,
each with its time; a quick pass runs them all and leaves no number not run yet; a second invocation runs nothing; a
pass killed in a fine-tune resumes to the same numbers; a missing model fails its experiments alone; a budget runs
the cheapest and names the rest. No timing is asserted: the machine may be busy."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from conftest import ROOT, SHARED_DATA, needs_shared_data, save_tiny
from test_processes import unchanged
from transformers import BertForQuestionAnswering, BertForSequenceClassification, BertModel

import bert_part4_report as report
import bert_part4_reproduce as reproduce
from part4 import article, experiments
from part4.flags import Fatal

SCRIPT = os.path.join(ROOT, "bert_part4_reproduce.py")
ENV = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
# A quick pass: 640 training examples are 20 steps an epoch at batch 32, so that a fine-tune evaluates (and keeps a
# checkpoint) every 10 steps; 20 dev examples and SQuAD questions.
QUICK = ["--max-train-examples", "640", "--limit", "20", "--device", "cpu"]
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

@pytest.mark.parametrize("text, seconds", [("2h", 7200), ("30m", 1800), ("90s", 90), ("1h30m", 5400), ("0.5s", 0.5)])
def test_a_budget_is_read_in_hours_minutes_or_seconds(text, seconds):
    assert reproduce.budget_seconds(text) == seconds


@pytest.mark.parametrize("argv, message", [
    (["--budget", "2x"], "--budget 2x: not a duration; write it as e.g. 2h, 30m, 90s or 1h30m"),
    (["--budget", ""], "--budget : not a duration; write it as e.g. 2h, 30m, 90s or 1h30m"),
    (["--models", "no/such/folder"], "--models no/such/folder: no such folder"),
    (["--limit", "0"], "argument --limit: '0': must be a positive whole number (see --help)"),
])
def test_a_bad_input_is_one_line(argv, message, tmp_path):
    with pytest.raises(Fatal) as e:
        reproduce.main([*argv, "--plan", "--results-dir", str(tmp_path)])
    assert str(e.value) == message


def test_the_report_and_the_plan_read_one_list_of_commands(tmp_path):
    """Every command the report gives for a number not run yet is an experiment of the plan, and back."""
    assert report.main(["--results-dir", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / report.REPORT_JSON).read_text())["rows"]
    plan = {"python " + " ".join(experiments.command(e, experiments.Inputs(results_dir=str(tmp_path))))
            for e in experiments.EXPERIMENTS}
    assert {r["command"] for r in rows} == plan
    assert sum(len(experiments.numbers_of(e)) for e in experiments.EXPERIMENTS) == len(rows)


def test_without_the_hub_the_plan_says_for_each_line_why_it_has_no_estimate(tmp_path):
    """The Hub out of reach: the plan still lists every experiment with its command, each saying why it has no time."""
    done = run(["--plan", "--results-dir", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for e in experiments.EXPERIMENTS:
        line = next(x for x in lines if x[4:].startswith(e.name + " "))
        assert "no estimate: " in line and e.models[0][1] in line, line
        assert f"    python {' '.join(experiments.command(e, experiments.Inputs(results_dir=str(tmp_path))))}" in lines
    assert "Models and data: the Hub" in done.stdout


# --- The whole plan on tiny models ---

@needs_shared_data
def test_the_plan_times_every_experiment_and_a_quick_pass_runs_them_all(quick_pass):
    out, plan, done = quick_pass
    for e in experiments.EXPERIMENTS:
        line = next(x for x in plan.splitlines() if x[4:].startswith(e.name + " "))
        assert " estimate " in line and f"{len(experiments.numbers_of(e))} numbers: " in line, line
        assert any(x.split("] ", 1)[-1].startswith(f"{e.name}: ran in ") for x in done.splitlines()), e.name
    assert "Total: " in plan and "Local folders: 10 of 10 expected found" in plan
    rows = json.loads((out / report.REPORT_JSON).read_text())["rows"]
    assert len(rows) == sum(len(experiments.numbers_of(e)) for e in experiments.EXPERIMENTS)
    assert not [r["key"] for r in rows if r["status"] == "not run yet"]
    assert "cut run" in {r["status"] for r in rows}                        # the report says they were cut
    log = (out / reproduce.LOG).read_text()
    assert log.count("(estimate ") == len(experiments.EXPERIMENTS) and "Estimates: " in log
    assert "8 run, 0 done before, 0 failed, 0 left" in done


@needs_shared_data
def test_a_mirror_of_another_architecture_under_the_hub_ids_is_never_the_articles_model(quick_pass, mirror):
    """The tiny models (H = 32; 2 layers, 12 for the attention flow) under the four Hub ids: every number that needs a
    model is shown as another model's, cut or not, with its architecture beside the article's; none is counted on the
    article's models, none differs for no known reason, none is unusable for a layer the model does not have."""
    saved = json.loads((quick_pass[0] / report.REPORT_JSON).read_text())
    assert saved["reproduced"]["on the article's models"] == 0 and saved["reproduced"][report.UNVERIFIED_COUNT] == 0
    assert ", 0 on the article's models, 0 on its checkpoints by name and architecture" in saved["summary"]
    needs_model = [r for r in saved["rows"] if article.NUMBERS[r["key"]].model]
    assert needs_model and {r["model"] for r in needs_model} == {"other"}
    assert not [r for r in needs_model if r["status"] in ("differs", "unusable") or "no known reason" in r["note"]]
    judged = [r for r in needs_model if r["status"] != "shown"]
    assert all("H 32" in r["note"] and "article: " in r["note"] and "H 768" in r["note"] for r in judged)
    recorded = json.loads((quick_pass[0] / "part4_heads.json").read_text())["weights"]
    assert recorded["architecture"]["hidden"] == 32 and recorded["sha256"]["model.safetensors"] == \
        hashlib.sha256(open(os.path.join(mirror, article.BERT, "model.safetensors"), "rb").read()).hexdigest()


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


@needs_shared_data
def test_a_budget_runs_the_cheapest_and_names_the_rest(quick_pass, mirror, tmp_path):
    """With the calibration cached, the estimates are the same numbers in every invocation: a budget that fits the
    cheapest experiment and half the next runs that one alone."""
    out = copied(quick_pass[0], tmp_path)
    for path in out.glob("part4_*"):
        path.unlink()
    argv = flags(mirror, out)
    args = reproduce.build_parser().parse_args(argv)
    inputs = experiments.Inputs(models=args.models, data=args.data, max_train_examples=args.max_train_examples,
                                limit=args.limit, device=args.device, results_dir=args.results_dir)
    costs, _ = reproduce.estimated(experiments.EXPERIMENTS, inputs, reproduce.Log())
    order = reproduce.in_order(experiments.EXPERIMENTS, costs)
    budget = costs[order[0].name] + costs[order[1].name] / 2
    done = run([*argv, "--budget", f"{budget:.6f}s"])
    assert done.returncode == 0, done.stderr
    assert any(x.split("] ", 1)[-1].startswith(f"{order[0].name}: ran in ") for x in done.stdout.splitlines())
    left = [x for x in done.stdout.splitlines() if x.startswith("left by the budget: ")]
    assert [x.split(": ")[1].split(" (")[0] for x in left] == [e.name for e in order[1:]]
    assert f"1 run, 0 done before, 0 failed, {len(order) - 1} left" in done.stdout
