"""What a run costs, said before it is paid, and a full disk as a bad input: the fine-tune's cost line (its steps and
time here, timed without changing a number), the free space checked before a run writes, and a write that fails anyway
(no space left, a read-only folder) said in one line naming the file, what is kept and the command that resumes, with
nothing half-written left. Writes are failed by patching them: no small file system is needed."""

import errno
import json
import os
import re
import resource
from collections import namedtuple

import pytest
import torch
from test_finetune import write_sst2

import bert_part4_finetune as ft
from part4.command_line.declarations import Fatal
from part4.output import results_files
from part4.run import run_files, training_run
from part4.run.training_run import TrainingRun

Usage = namedtuple("Usage", "total used free")


def sst2(tiny_bert_dir, tmp_path, out, *extra):
    glue = write_sst2(str(tmp_path / "glue"), n_train=96, n_dev=16)
    return ["sst2", "2e-5", "--model", tiny_bert_dir, "--data-dir", glue, "--results-dir", str(out), "--device", "cpu",
            *extra]


def test_the_cost_line_comes_before_the_first_step_and_changes_no_number(tiny_bert_dir, tmp_path, monkeypatch):
    """The preamble says the steps and the time here before the first step; the step it times (the first batch's loss
    forward and back, the RNG forked, the gradients cleared) leaves every number of the run as it is without it."""
    assert ft.main(sst2(tiny_bert_dir, tmp_path, tmp_path / "timed")) == 0
    monkeypatch.setattr(TrainingRun, "time_and_say_cost", lambda training: training.log.say("(not timed)"))
    assert ft.main(sst2(tiny_bert_dir, tmp_path, tmp_path / "untimed")) == 0
    timed, untimed = (json.loads((tmp_path / f / "part4_sst2_lr2e-5.json").read_text()) for f in ("timed", "untimed"))
    for key in ("before", "final", "best_during_training"):
        assert timed[key] == untimed[key]
    assert [(p["train_loss"], p["dev"]) for p in timed["curve"]] == [(p["train_loss"], p["dev"]) for p in untimed["curve"]]
    log = (tmp_path / "timed" / "part4_sst2_lr2e-5.log").read_text().splitlines()
    cost = next(k for k, line in enumerate(log) if line.startswith("cost here: 9 steps x "))
    assert "dev evaluation" in log[cost] and "timed on cpu" in log[cost]
    assert cost < next(k for k, line in enumerate(log) if line.startswith("step "))


def test_the_cost_line_gives_a_large_runs_memory_as_a_range_from_its_first_step(tiny_bert_dir, tmp_path, monkeypatch):
    """A run whose memory is large (here: any, the threshold patched) says its peak as a range: from what the process
    took by its first step, with AdamW's two moments to come, to the wider batches and the allocator's leftovers of
    the steps after it; a run under the threshold says none."""
    monkeypatch.setattr(training_run, "LARGE_MEMORY", 0)
    assert ft.main(sst2(tiny_bert_dir, tmp_path, tmp_path / "large")) == 0
    log = (tmp_path / "large" / "part4_sst2_lr2e-5.log").read_text()
    low, high = map(float, re.search(r"; memory about ([\d.]+) to ([\d.]+) GB at its peak\)", log).groups())
    taken = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * results_files.RU_MAXRSS_UNIT / 1e9
    assert 0 < low <= taken + 0.1 and high == pytest.approx(1.35 * low, abs=0.1)
    monkeypatch.setattr(training_run, "LARGE_MEMORY", 1e15)
    assert ft.main(sst2(tiny_bert_dir, tmp_path, tmp_path / "small")) == 0
    assert "memory about" not in (tmp_path / "small" / "part4_sst2_lr2e-5.log").read_text()


def test_a_run_short_of_disk_space_is_refused_before_it_starts(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    """Less free space than a checkpoint (the model and AdamW's two moments) needs: one line, before the first step,
    naming what it needs and where; nothing written."""
    monkeypatch.setattr(results_files.shutil, "disk_usage", lambda path: Usage(10**9, 10**9 - 1000, 1000))
    out = tmp_path / "r"
    with pytest.raises(Fatal) as refused:
        ft.main(sst2(tiny_bert_dir, tmp_path, out))
    said = str(refused.value)
    assert said.startswith("not enough free space: a resume checkpoint (the model, AdamW's two moments) "
                           f"{out / 'part4_sst2_lr2e-5.checkpoint'} about ") and "\n" not in said
    assert said.endswith(" has 1 kB free on its disk: free some space or write elsewhere")
    assert not list(out.glob("*.json")) and "cost here" not in capsys.readouterr().out


@pytest.mark.parametrize("failure", ["no space", "torch.save's RuntimeError on a full disk", "read-only"])
def test_a_checkpoint_that_cannot_be_written_is_one_line_and_leaves_nothing_half_written(failure, tiny_bert_dir,
                                                                                        tmp_path, monkeypatch, capsys):
    """The second checkpoint fails as it is written: one line naming the file, why, that nothing half-written is left,
    the checkpoint kept (the first, at its step) and the command that resumes; the first checkpoint is as it was, no
    temp file is left, and the command given resumes from it to the end."""
    argv = sst2(tiny_bert_dir, tmp_path, tmp_path / "r", "--checkpoint-every", "0.001s", "--evals", "3")
    saved, real_save = [], torch.save

    def save(obj, path):
        saved.append(obj["state"]["step"])
        if len(saved) < 2:
            return real_save(obj, path)
        with open(path, "wb") as f:
            f.write(b"half a checkpoint")                 # what a full disk leaves in the temp file
        if failure == "no space":
            raise OSError(errno.ENOSPC, "No space left on device")
        if failure == "read-only":
            raise OSError(errno.EROFS, "Read-only file system")
        monkeypatch.setattr(results_files.shutil, "disk_usage", lambda path: Usage(10**9, 10**9, 0))
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(run_files.torch, "save", save)
    with pytest.raises(Fatal) as refused:
        ft.main(argv)
    err = str(refused.value).splitlines()
    why = {"no space": "No space left on device", "read-only": "Read-only file system",
           "torch.save's RuntimeError on a full disk": "no space left: 0 kB free on the disk of "}[failure]
    checkpoint = tmp_path / "r" / "part4_sst2_lr2e-5.checkpoint"
    assert len(err) == 1 and err[0].startswith(f"{checkpoint}: not written ({why}"), err
    assert (f"; nothing half-written is left; the checkpoint at step {saved[0]} is kept; to resume once there is room: "
            f"python bert_part4_finetune.py {' '.join(argv)}") in err[0]
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [checkpoint.name, "part4_sst2_lr2e-5.progress"]
    monkeypatch.undo()
    assert torch.load(checkpoint, weights_only=True)["state"]["step"] == saved[0]
    assert ft.main(argv) == 0
    assert f"(resumed from {checkpoint} at step {saved[0]}/9" in capsys.readouterr().out


def test_a_model_folder_that_cannot_be_written_is_one_line_and_none_is_left(tmp_path):
    """--save-model's folder on a full disk: one line naming it, the temporary folder removed, the old one kept."""
    target = tmp_path / "model"
    target.mkdir()
    (target / "config.json").write_text("{}")

    def write(tmp):
        (tmp_path / "seen").write_text(tmp)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(Fatal) as refused:
        results_files.write_atomic(str(target), write, "; kept: nothing else", folder=True)
    assert str(refused.value) == (f"{target}: not written (No space left on device); nothing "
                                  f"half-written is left; kept: nothing else")
    assert not os.path.exists((tmp_path / "seen").read_text()) and os.listdir(target) == ["config.json"]


def test_a_model_folder_that_cannot_take_the_old_ones_place_leaves_the_old_one_as_it_was(tmp_path, monkeypatch):
    """The old folder moved aside, the new one refused its place (a rename that fails): one line, the old folder back
    where it was with its files, and nothing else left beside it (no temporary folder, no folder moved aside)."""
    target = tmp_path / "model"
    target.mkdir()
    (target / "config.json").write_text('{"old": true}')

    def refused(src, dst):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(results_files.os, "replace", refused)
    with pytest.raises(Fatal, match=r"model: not written \(Permission denied\); nothing half-written is left"):
        results_files.write_atomic(str(target), lambda tmp: (tmp_path / "seen").write_text(tmp), folder=True)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["model", "seen"] and os.listdir(target) == ["config.json"]
    assert (target / "config.json").read_text() == '{"old": true}'


def test_a_file_whose_folder_is_gone_is_one_line_whatever_writes_it(tmp_path):
    """The results folder removed under a run: torch.save, which says so as a RuntimeError of its own, never reaches
    it; the file cannot be made where it goes, and that is one line."""
    with pytest.raises(Fatal, match=r"x\.pt: not written \(No such file or directory\); nothing half-written is left$"):
        results_files.write_atomic(str(tmp_path / "gone" / "x.pt"), lambda tmp: torch.save({"a": 1}, tmp))
    assert os.listdir(tmp_path) == []


def test_free_space_adds_up_on_one_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(results_files.shutil, "disk_usage", lambda path: Usage(10**10, 0, 3 * 10**9))
    results_files.check_room([(str(tmp_path / "a"), 2 * 10**9, "one"), (str(tmp_path / "b" / "c"), 10**9, "two")])
    with pytest.raises(Fatal, match=r"^not enough free space: one .* about 2.0 GB; two .* about 1.0 GB, and .* has "
                                    r"3.0 GB free on its disk"):
        results_files.check_room([(str(tmp_path / "a"), 2 * 10**9, "one"), (str(tmp_path / "b"), 10**9 + 1, "two")])


def test_an_error_that_is_not_a_failed_write_is_raised_as_it_is(tmp_path):
    def write(tmp):
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        results_files.write_atomic(str(tmp_path / "x.json"), write)
    assert not os.listdir(tmp_path)


def test_a_line_said_while_a_progress_bar_runs_clears_the_bar_first_and_draws_it_again_after(tmp_path, capsys):
    """A log line printed while a run's bar (tqdm, on stderr) is on the terminal: the bar cleared before the line and
    drawn again after it, so that on a terminal the line starts on its own line, not at the end of the bar."""
    import sys

    from tqdm import tqdm
    bar = tqdm(total=3, desc="part4_x", file=sys.stderr, leave=False)
    bar.update()
    capsys.readouterr()
    results_files.Log("x", str(tmp_path)).say("step 1/3")
    out, err = capsys.readouterr()
    bar.close()
    cleared, drawn = err.split("\r", 2)[1:]                  # '\r' + blanks + '\r', then the bar again
    assert out == "step 1/3\n" and cleared.strip() == "" and drawn.lstrip("\r").startswith("part4_x:  33%")
