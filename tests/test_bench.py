"""The benchmarks still run, and our fast paths agree with the slow baselines they are timed against."""

import json
import os
import sys

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


def test_finetune_bench_pads_less_than_the_plain_loop(tiny_bert_dir, tmp_path, capsys):
    glue = write_sst2(str(tmp_path / "glue"), n_train=200, n_dev=10)
    finetune_speed.main(["--model", tiny_bert_dir, "--data-dir", glue, "--steps", "3", "--batch-size", "8",
                         "--device", "cpu"])
    out = capsys.readouterr().out.splitlines()
    plain = next(line for line in out if line.strip().startswith("plain"))
    ours = next(line for line in out if line.strip().startswith("ours"))
    assert "(mean batch width 128 tokens)" in plain
    assert int(ours.split("mean batch width ")[1].split()[0]) < 20
    assert out[-1].startswith("speed-up (steps/s, ours / plain): ")


def test_finetune_bench_on_squad_windows_pads_less_than_384(tiny_bert_dir, tmp_path, capsys):
    from test_squad import squad_file
    data = squad_file(tmp_path / "squad.json", False)
    finetune_speed.main(["--model", tiny_bert_dir, "--task", "squad", "--squad-data", data, "--steps", "1",
                         "--batch-size", "1", "--device", "cpu"])
    out = capsys.readouterr().out.splitlines()
    plain = next(line for line in out if line.strip().startswith("plain"))
    ours = next(line for line in out if line.strip().startswith("ours (dynamic padding, grouped by length)"))
    assert "(mean batch width 384 tokens)" in plain
    assert int(ours.split("mean batch width ")[1].split()[0]) < 384
    assert out[-1].startswith("speed-up (steps/s, ours / plain): ")


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
