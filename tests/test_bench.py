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
