"""Past one process: torchrun on this CPU (gloo, 2 processes, tiny models), and runs that survive interruption."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, save_tiny
from test_finetune import write_sst2
from test_squad import squad_file
from transformers import AutoTokenizer, BertForSequenceClassification

import bert_part4_finetune as ft
from part4.data import readers
from part4.data.batches import collate
from part4.models.loading import Processes, run_cli
from part4.run import run_files, training_run
from part4.run.training_run import TrainingRun
from part4.tasks import families

ENV = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def script(name):
    return os.path.join(ROOT, f"bert_part4_{name}.py")


def torchrun(name, argv, n=2, timeout=600, env=ENV):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}", script(name), *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def alone(name, argv, timeout=600):
    return subprocess.run([sys.executable, script(name), *argv], capture_output=True, text=True, timeout=timeout, env=ENV)


@pytest.fixture(scope="module")
def no_dropout_model(tmp_path_factory):
    """Dropout draws other masks when a batch is split: the exact comparisons run without it."""
    return save_tiny(str(tmp_path_factory.mktemp("nodrop")), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def glue(tmp_path_factory):
    return write_sst2(str(tmp_path_factory.mktemp("glue")), n_train=85, n_dev=40)    # 85 = 5 batches of 16 + 5


def unchanged(r):
    """A run's results without its timings."""
    drop = ("seconds", "run", "device", "process")
    out = {k: v for k, v in r.items() if k not in drop}
    out["curve"] = [{k: v for k, v in c.items() if k != "seconds"} for c in r["curve"]]
    out["settings"] = {k: v for k, v in r["settings"].items() if k != "processes"}
    return out


# --- the weights that make a split batch weigh every example as one process does ---

@pytest.mark.parametrize("world, size", [(2, 16), (2, 5), (3, 7), (2, 1), (4, 3)])
def test_shards_weighted_add_up_to_the_whole_batch_gradient(no_dropout_model, glue, world, size):
    model = BertForSequenceClassification.from_pretrained(no_dropout_model, num_labels=2)
    tok = AutoTokenizer.from_pretrained(no_dropout_model)
    enc = families.encode_glue(tok, readers.read_split(glue, "sst2", "train"), 128)
    idx = list(range(10, 10 + size))
    grads = lambda: [p.grad.clone() for p in model.parameters()]  # noqa: E731
    model.zero_grad()
    families.Classification.loss(model, collate(enc, idx, torch.device("cpu"))).backward()
    whole = grads()
    model.zero_grad()
    rows_seen = []
    for rank in range(world):
        rows, weight = training_run.shard(idx, Processes(rank=rank, world=world))
        rows_seen += rows if weight else []
        (families.Classification.loss(model, collate(enc, rows, torch.device("cpu"))) * weight / world).backward()  # DDP: mean
    assert sorted(rows_seen) == idx
    for a, b in zip(whole, grads()):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


# --- one run, data parallel: the same as one process ---

@pytest.mark.slow
@pytest.mark.parametrize("padding_free", ["off", "on"])
def test_two_processes_train_as_one(no_dropout_model, glue, tmp_path, padding_free):
    """Two processes, padded or padding-free, train as one padded process does (one: the padded run; padding-free
    steps are that run up to rounding, test_packing.py)."""
    common = ["sst2", "3e-4", "--model", no_dropout_model, "--data-dir", glue, "--batch-size", "16", "--epochs", "2",
              "--evals", "4", "--device", "cpu"]
    one = alone("finetune", common + ["--results-dir", str(tmp_path / "one"), "--save-model", str(tmp_path / "m1"),
                                      "--padding-free", "off"])
    assert one.returncode == 0, one.stderr
    two = torchrun("finetune", common + ["--results-dir", str(tmp_path / "two"), "--save-model", str(tmp_path / "m2"),
                                         "--padding-free", padding_free, "--checkpoint-every", "0.001s"])
    assert two.returncode == 0, two.stderr
    a, b = (json.loads((tmp_path / d / "part4_sst2_lr3e-4_bs16_ep2.json").read_text()) for d in ("one", "two"))
    assert a["steps"] == b["steps"] == 2 * 6 and a["warmup_steps"] == b["warmup_steps"]
    for x, y in zip(a["curve"], b["curve"]):
        assert x["step"] == y["step"] and y["train_loss"] == pytest.approx(x["train_loss"], rel=1e-5)
    assert a["final"] == b["final"] and b["computation"]["padding_free_steps"] == (padding_free == "on")
    log = (tmp_path / "two" / "part4_sst2_lr3e-4_bs16_ep2.log").read_text()
    assert "device cpu x 2 processes (each takes 1/2 of every batch)" in log
    assert two.stdout.count("FINAL sst2") == 1                                  # only rank 0 prints
    # a checkpoint due on rank 0's clock at each evaluation before the last (steps 3, 6, 9), saved by both processes
    assert [x.split(":")[0] for x in log.splitlines() if x.startswith("(checkpoint at")] == [
        f"(checkpoint at step {s}/12" for s in (3, 6, 9)]
    assert "work split: 2 processes (gloo), data parallel" in two.stdout
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "m1"))
    dev = [texts[0] for texts, _ in readers.read_split(glue, "sst2", "dev")]
    enc = tok(dev, padding=True, return_tensors="pt")
    with torch.no_grad():
        la, lb = (BertForSequenceClassification.from_pretrained(str(tmp_path / m))(**enc).logits for m in ("m1", "m2"))
    assert torch.equal(la.argmax(-1), lb.argmax(-1)) and torch.allclose(la, lb, atol=1e-4)


@pytest.mark.slow
def test_grid_on_two_processes_runs_each_run_once(tiny_bert_dir, glue, tmp_path):
    common = ["sst2", "--model", tiny_bert_dir, "--data-dir", glue, "--grid", "glue", "--evals", "1", "--epochs", "1",
              "--max-train-examples", "40", "--device", "cpu"]
    one = alone("finetune", common + ["--results-dir", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr
    two = torchrun("finetune", common + ["--results-dir", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr
    a, b = (json.loads((tmp_path / d / "part4_sst2_grid_glue.json").read_text()) for d in ("one", "two"))
    assert [(r["lr"], r["final"]) for r in a["runs"]] == [(r["lr"], r["final"]) for r in b["runs"]]
    by_lr = {r["lr"]: r["process"] for r in b["runs"]}
    assert [by_lr[lr] for lr in (5e-5, 4e-5, 3e-5, 2e-5)] == [0, 1, 0, 1]    # each run once, alternating
    assert "work split: 2 processes (gloo), whole runs" in (tmp_path / "two" / "part4_sst2_grid_glue.log").read_text()
    again = torchrun("finetune", common + ["--results-dir", str(tmp_path / "two")])
    assert again.returncode == 0 and again.stdout.count("results already exist for the same settings") == 4


@pytest.mark.slow
def test_squad_on_two_processes_writes_the_same_files(tiny_qa_dir, tmp_path):
    v1, v2 = squad_file(tmp_path / "v1.json", False), squad_file(tmp_path / "v2.json", True)
    common = ["--v1-model", tiny_qa_dir, "--v2-model", tiny_qa_dir, "--v1-data", v1, "--v2-data", v2, "--only", "v1",
              "--only", "v2", "--max-len", "40", "--stride", "12", "--batch-size", "3", "--device", "cpu"]
    one = alone("squad", common + ["--results-dir", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr
    two = torchrun("squad", common + ["--results-dir", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr
    for name in ("squad_v1_predictions.json", "squad_v2_predictions.json", "squad_v2_nonnull_predictions.json",
                 "squad_v2_null_odds.json"):
        assert (tmp_path / "one" / name).read_text() == (tmp_path / "two" / name).read_text(), name
    assert json.loads((tmp_path / "two" / "part4_squad.json").read_text())["v1_dev"]["windows"] > 6


@pytest.mark.slow
def test_a_bad_input_on_one_process_ends_every_process(tiny_bert_dir, glue, tmp_path):
    """Rank 1 cannot read the training file (as if its node lacked it): both processes stop, one line each."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import builtins, os\n"
        "if os.environ.get('RANK') == '1':\n"
        "    _open = builtins.open\n"
        "    def _refuse(f, *a, **k):\n"
        "        if str(f).endswith('train.tsv'):\n"
        "            raise PermissionError(13, 'Permission denied', str(f))\n"
        "        return _open(f, *a, **k)\n"
        "    builtins.open = _refuse\n")
    env = dict(ENV, PYTHONPATH=str(hook))
    # Left waiting, rank 0 would hang until the process group's 30-minute timeout: ending within the subprocess
    # timeout (which fails the test) tells the two apart however busy the machine is; a wall clock would not.
    p = torchrun("finetune", ["sst2", "--model", tiny_bert_dir, "--data-dir", glue, "--results-dir", str(tmp_path / "r"),
                              "--device", "cpu"], env=env, timeout=600)
    assert p.returncode != 0
    ours = [line for line in p.stderr.splitlines() if line.startswith("error: ")]
    assert len(ours) == 2 and all("train.tsv: Permission denied" in line for line in ours)
    assert "bert_part4_" not in "".join(x for x in p.stderr.splitlines() if x.strip().startswith("File "))  # torchrun's only
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").glob("*.json"))


@pytest.mark.parametrize("argv, message", [
    (["--batch-size", "15"], "batch 15 cannot be split over 2 processes"),
    (["--backend", "nccl"], "--backend nccl needs CUDA devices, but this run uses --device cpu"),
    (["--parallel", "runs"], "--parallel runs spreads whole runs over the processes: it needs --grid or --seeds"),
])
@pytest.mark.slow
def test_bad_inputs_under_torchrun_are_one_line(tiny_bert_dir, glue, tmp_path, argv, message):
    p = torchrun("finetune", ["sst2", "--model", tiny_bert_dir, "--data-dir", glue, "--results-dir", str(tmp_path),
                              "--device", "cpu", *argv], timeout=600)
    assert p.returncode != 0
    ours = [line for line in p.stderr.splitlines() if line.startswith("error: ")]
    assert ours and all(message in line for line in ours), p.stderr[-2000:]


def test_parallel_without_torchrun_is_refused(tiny_bert_dir, glue, tmp_path, capsys):
    assert run_cli(ft.main, ["sst2", "--model", tiny_bert_dir, "--data-dir", glue, "--results-dir", str(tmp_path),
                             "--device", "cpu", "--parallel", "data"]) == 2
    assert "needs several processes started by torchrun" in capsys.readouterr().err


# --- resume: a killed run, run again, ends with the uninterrupted run's numbers ---

def long_run(model, glue_dir, out):
    return ["sst2", "1e-3", "--model", model, "--data-dir", glue_dir, "--batch-size", "8", "--epochs", "2", "--evals", "10",
            "--results-dir", str(out), "--device", "cpu"]


@pytest.fixture(scope="module")
def big_glue(tmp_path_factory):
    return write_sst2(str(tmp_path_factory.mktemp("big_glue")), n_train=1200, n_dev=40)


@pytest.fixture(scope="module")
def uninterrupted(tiny_bert_dir, big_glue, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    p = alone("finetune", long_run(tiny_bert_dir, big_glue, out))
    assert p.returncode == 0, p.stderr
    return json.loads((out / "part4_sst2_lr1e-3_bs8_ep2.json").read_text())


def start_and_stop(argv, sig, after_evals):
    """Start a run, send sig once it has printed after_evals evaluation lines (and saved their checkpoint)."""
    proc = subprocess.Popen([sys.executable, script("finetune"), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV)
    seen = 0
    for line in proc.stdout:
        seen += line.startswith("step ")
        if seen == after_evals:
            time.sleep(0.3)
            proc.send_signal(sig)
            break
    out, err = proc.communicate(timeout=600)
    return proc.returncode, err


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_stopped_run_resumes_to_the_same_numbers(tiny_bert_dir, big_glue, uninterrupted, tmp_path, sig):
    """SIGTERM: a checkpoint where the run stands, though none is due (the default --checkpoint-every, 10m); SIGKILL:
    the run resumes from the last one it kept (one at each evaluation here)."""
    out = tmp_path / "r"
    argv = long_run(tiny_bert_dir, big_glue, out) + (["--checkpoint-every", "0.001s"] if sig == signal.SIGKILL else [])
    rc, err = start_and_stop(argv, sig, after_evals=2)
    checkpoint = out / "part4_sst2_lr1e-3_bs8_ep2.checkpoint"
    assert checkpoint.exists() and not (out / "part4_sst2_lr1e-3_bs8_ep2.json").exists()
    if sig == signal.SIGTERM:
        assert rc == 143
        lines = [x for x in err.splitlines() if x.startswith("stopped by")]
        assert len(lines) == 1 and "checkpoint saved to" in lines[0] and "run the same command again to resume" in lines[0]
    else:
        assert rc == -signal.SIGKILL
    again = alone("finetune", argv)
    assert again.returncode == 0, again.stderr
    resumed = json.loads((out / "part4_sst2_lr1e-3_bs8_ep2.json").read_text())
    assert unchanged(resumed) == unchanged(uninterrupted)              # bitwise on the CPU
    log = (out / "part4_sst2_lr1e-3_bs8_ep2.log").read_text().splitlines()
    assert any("(resumed from " in x for x in log)
    assert log[-1] == f"written: {out}/part4_sst2_lr1e-3_bs8_ep2.log, .json"   # a resumed run says what it wrote too
    assert not checkpoint.exists()                                    # spent once the results are written


# --- checkpoints on a clock: at most every --checkpoint-every, at an evaluation; a killed run repeats what it lost ---

class Killed(BaseException):
    """The run dies where it stands, as SIGKILL leaves it: nothing catches it, nothing is saved or removed."""


def clocked(monkeypatch, kill_at=None):
    """Every training step takes one second of the clock the checkpoints follow (deterministic: no sleep, no race);
    with kill_at, the run dies during that step (after its update, before anything after it). Returns the steps at
    which a checkpoint was saved, as they come."""
    now, saved = [0.0], []
    monkeypatch.setattr(training_run, "monotonic", lambda: now[0])
    real_step, real_save = TrainingRun.step_done, run_files.Checkpoint.write_checkpoint

    def step_done(training, loss):
        now[0] += 1.0
        if training.step + 1 == kill_at:
            raise Killed
        return real_step(training, loss)

    def save(checkpoint, model, opt, sched, state, *, losses):
        saved.append(state["step"])
        return real_save(checkpoint, model, opt, sched, state, losses=losses)
    monkeypatch.setattr(TrainingRun, "step_done", step_done)
    monkeypatch.setattr(run_files.Checkpoint, "write_checkpoint", save)
    return saved


NAME = "part4_sst2_lr1e-3_bs8_ep2"


def clocked_run(model, glue_dir, out, every):
    """96 rows in batches of 8 for 2 epochs: 24 steps; a dev evaluation every 3 (8 in all)."""
    return ["sst2", "1e-3", "--model", model, "--data-dir", glue_dir, "--batch-size", "8", "--epochs", "2", "--evals",
            "8", "--checkpoint-every", every, "--results-dir", str(out), "--device", "cpu"]


@pytest.fixture(scope="module")
def small_glue(tmp_path_factory):
    return write_sst2(str(tmp_path_factory.mktemp("small_glue")), n_train=96, n_dev=16)


@pytest.fixture(scope="module")
def on_the_clock(tiny_bert_dir, small_glue, tmp_path_factory):
    """The run uninterrupted, one second a step, a checkpoint at most every 7 s: (the steps where it saved one, its
    results, its log, its results folder)."""
    out = tmp_path_factory.mktemp("on_the_clock")
    with pytest.MonkeyPatch.context() as patch:
        saved = clocked(patch)
        assert ft.main(clocked_run(tiny_bert_dir, small_glue, out, "7s")) == 0
    return saved, json.loads((out / f"{NAME}.json").read_text()), (out / f"{NAME}.log").read_text().splitlines(), out


def test_checkpoints_follow_the_clock_not_every_evaluation(on_the_clock):
    saved, result, log, out = on_the_clock
    evaluations = [p["step"] for p in result["curve"]]
    assert evaluations == list(range(3, 25, 3))
    due, last = [], 0                  # an evaluation before the last, 7 steps (7 s) or more after the last checkpoint
    for step in evaluations[:-1]:
        if step - last >= 7:
            due.append(step)
            last = step
    assert saved == due == [9, 18]     # 2 checkpoints, not one at each of the 7 evaluations before the last
    assert [x for x in log if x.startswith("(checkpoint at")] == [
        f"(checkpoint at step {s}/24: {out}/{NAME}.checkpoint; the next after 7s at the earliest)" for s in saved]
    assert sorted(os.listdir(out)) == [f"{NAME}.json", f"{NAME}.log", f"{NAME}_curve.png"]   # checkpoint, .progress spent


@pytest.mark.parametrize("every, kill_at, kept, reached", [("7s", 23, 18, 21), ("1h", 8, None, 6)],
                         ids=["an older checkpoint", "none kept"])
def test_a_killed_run_repeats_the_steps_since_its_last_checkpoint(tiny_bert_dir, small_glue, on_the_clock, tmp_path,
                                                                   every, kill_at, kept, reached):
    """Killed during step kill_at, past its last checkpoint (step 18, or none yet: 1h), with the step of its last
    evaluation kept beside it: run again, it says how many steps it repeats and ends with the uninterrupted run's
    numbers."""
    out = tmp_path / "r"
    with pytest.MonkeyPatch.context() as patch:
        saved = clocked(patch, kill_at=kill_at)
        with pytest.raises(Killed):
            ft.main(clocked_run(tiny_bert_dir, small_glue, out, every))
    assert saved == ([9, 18] if kept else [])
    assert (out / f"{NAME}.checkpoint").exists() == (kept is not None) and not (out / f"{NAME}.json").exists()
    assert json.loads((out / f"{NAME}.progress").read_text())["step"] == reached
    assert ft.main(clocked_run(tiny_bert_dir, small_glue, out, every)) == 0          # the real clock from here
    assert unchanged(json.loads((out / f"{NAME}.json").read_text())) == unchanged(on_the_clock[1])
    log = (out / f"{NAME}.log").read_text()
    if kept:
        assert (f"(resumed from {out}/{NAME}.checkpoint at step {kept}/24: the lines above come from the interrupted "
                f"run; it had reached step {reached}: {reached - kept} steps repeated)") in log
    else:
        assert (f"(no checkpoint kept: the interrupted run had reached step {reached}/24; started over, {reached} steps "
                f"repeated)") in log
    assert not (out / f"{NAME}.progress").exists() and not (out / f"{NAME}.checkpoint").exists()


def test_the_step_reached_by_a_run_of_other_settings_is_not_this_runs(tiny_bert_dir, small_glue, tmp_path):
    """A run of the same name but other settings (--max-len 64), killed before any checkpoint: the step it reached
    says nothing of this run, which starts over without saying it repeats anything."""
    out = tmp_path / "r"
    with pytest.MonkeyPatch.context() as patch:
        clocked(patch, kill_at=8)
        with pytest.raises(Killed):
            ft.main(clocked_run(tiny_bert_dir, small_glue, out, "1h") + ["--max-len", "64"])
    assert json.loads((out / f"{NAME}.progress").read_text())["step"] == 6
    assert ft.main(clocked_run(tiny_bert_dir, small_glue, out, "1h")) == 0
    log = (out / f"{NAME}.log").read_text()
    assert "no checkpoint kept" not in log and "repeated" not in log and "FINAL sst2" in log


def test_a_checkpoint_of_other_settings_is_refused(tiny_bert_dir, big_glue, tmp_path, capsys, monkeypatch):
    out = tmp_path / "r"
    ft_steps = []                                   # another process's signal at step 30: stop, and save

    def stop_or_save(training):
        ft_steps.append(1)
        return (len(ft_steps) >= 30,) * 2
    monkeypatch.setattr(TrainingRun, "stop_or_save", stop_or_save)
    assert run_cli(ft.main, long_run(tiny_bert_dir, big_glue, out)) == 143
    assert "stopped by a signal to another process at step 30/" in capsys.readouterr().err
    monkeypatch.undo()
    other = save_tiny(str(tmp_path / "another_model"), seed=9)
    argv = long_run(other, big_glue, out)
    assert run_cli(ft.main, argv) == 2
    err = capsys.readouterr().err
    assert "a checkpoint from other settings (model " in err and "refusing to resume from it" in err
    assert not (out / "part4_sst2_lr1e-3_bs8_ep2.json").exists()


class Planted:
    """A pickle that runs a command when it is unpickled."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_checkpoint_is_refused_before_it_runs(tiny_bert_dir, big_glue, tmp_path, capsys):
    out = tmp_path / "r"
    out.mkdir()
    marker = tmp_path / "PWNED"
    torch.save({"state": Planted(marker)}, out / "part4_sst2_lr1e-3_bs8_ep2.checkpoint")
    assert run_cli(ft.main, long_run(tiny_bert_dir, big_glue, out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert not marker.exists()                                          # nothing in the file ran
    assert len(err) == 1 and err[0].startswith("error: ") and "not a checkpoint of this script" in err[0]
    assert not (out / "part4_sst2_lr1e-3_bs8_ep2.json").exists()
