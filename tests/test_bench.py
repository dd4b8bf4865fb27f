"""The benchmarks still run, and our fast paths agree with the slow baselines they are timed against."""

import importlib.util
import json
import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import finetune_speed  # noqa: E402
import squad_speed  # noqa: E402
from test_finetune import write_sst2  # noqa: E402


def test_squad_bench_answers_like_the_articles_loop(tiny_qa_dir, tmp_path, capsys):
    context = ("Ada Lovelace was born in London in 1815. She wrote the first program for the Analytical Engine, "
               "which Charles Babbage designed. ") * 6
    qas = [{"id": str(k), "question": q, "answers": [{"text": "London", "answer_start": 25}]}
           for k, q in enumerate(["Where was Ada born?", "Who designed the engine?", "What did she write?", "When?"])]
    data = tmp_path / "squad.json"
    data.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
    squad_speed.main(["--model", tiny_qa_dir, "--data", str(data), "--limit", "4", "--batch-size", "3", "--device", "cpu"])
    out = capsys.readouterr().out
    assert "same answer on 100.0% of questions" in out
    assert "article's approach:" in out and "speed-up (windows/s, ours / article's):" in out


def tokens_per_step(line):
    """'padded:   0.428 steps/s   27 real tokens/s  (63.1 real tokens a step, ...)' -> 63.1: counted, not timed, so
    that a busy machine's rounding of the rates cannot move it"""
    return float(line.split("real tokens/s  (", 1)[1].split()[0])


def test_finetune_bench_times_padded_padding_free_and_the_trainer(tiny_bert_dir, tmp_path, capsys):
    glue = write_sst2(str(tmp_path / "glue"), n_train=200, n_dev=10)
    finetune_speed.main(["--model", tiny_bert_dir, "--data-dir", glue, "--steps", "3", "--batch-size", "8",
                         "--device", "cpu"])
    out = capsys.readouterr().out.splitlines()
    padded = next(line for line in out if line.strip().startswith("padded:"))
    free = next(line for line in out if line.strip().startswith("padding-free:"))
    assert int(padded.split("mean batch width ")[1].split()[0]) < 20          # the paper's random batches, dynamic padding
    assert padded.split("(")[1] == free.split("(")[1]                          # the same rows
    assert tokens_per_step(padded) == pytest.approx(tokens_per_step(free), rel=1e-2)
    assert out[0].endswith("threads") and "AdamW fused" in out[0]
    assert any(line.startswith("padding-free vs padded: ") and line.endswith("x") for line in out)
    if importlib.util.find_spec("accelerate"):
        trainer = next(line for line in out if line.strip().startswith("Trainer (DataCollatorWithPadding):"))
        assert tokens_per_step(trainer) == pytest.approx(tokens_per_step(free), rel=1e-2)   # it saw the same rows
        assert out[-1].startswith("padding-free vs Trainer: ")
    else:
        assert out[-1] == "Trainer: not run (accelerate is not installed)"


def test_finetune_bench_on_squad_windows_times_grouped_batches_too(tiny_bert_dir, tmp_path, capsys):
    from test_squad import squad_file
    data = squad_file(tmp_path / "squad.json", False)
    finetune_speed.main(["--model", tiny_bert_dir, "--task", "squad", "--squad-data", data, "--steps", "1",
                         "--batch-size", "1", "--device", "cpu", "--no-trainer"])
    out = capsys.readouterr().out.splitlines()
    grouped = next(line for line in out if line.strip().startswith("padding-free, grouped by length:"))
    assert int(grouped.split("mean batch width ")[1].split()[0]) < 384
    assert out[-2] == "Trainer: not run (--no-trainer)"
    assert out[-1].startswith("padding-free on random batches vs padded grouped by length: ")


def test_processes_bench_runs_one_and_two_processes(tiny_bert_dir, tmp_path):
    import subprocess
    glue = write_sst2(str(tmp_path / "glue"), n_train=200, n_dev=10)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "processes_speed.py"), "--model", tiny_bert_dir,
                        "--task", "sst2", "--data-dir", glue, "--steps", "3", "--batch-size", "8", "--device", "cpu"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "backend none" in lines[1] and "torchrun, 2 processes" in lines[2] and "backend gloo" in lines[2]
    assert lines[-1].startswith("ratio (2 processes / one): ")
