"""The benchmarks still run, and our fast paths agree with the slow baselines they are timed against."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, needs_shared_data

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
    squad_speed.main(["--model", tiny_qa_dir, "--data", str(data), "--max-dev-examples", "4", "--batch-size", "3",
                      "--device", "cpu"])
    out = capsys.readouterr().out
    assert "same answer on 100.0% of questions" in out
    assert "article's approach:" in out and "speed-up (windows/s, ours / article's):" in out
    assert "bf16 vs fp32" not in out
    squad_speed.main(["--model", tiny_qa_dir, "--data", str(data), "--max-dev-examples", "4", "--batch-size", "3",
                      "--device", "cpu", "--dtype", "bf16"])
    out = capsys.readouterr().out.splitlines()
    fp32 = next(x for x in out if x.strip().startswith("ours, fp32:"))
    bf16 = next(x for x in out if x.strip().startswith("ours:"))
    rate = {k: float(x.split(" = ")[1].split()[0]) for k, x in (("fp32", fp32), ("bf16", bf16))}
    said = next(x for x in out if x.startswith("bf16 vs fp32 (ours, windows/s): "))
    assert float(said.split(": ")[1].split("x")[0]) == pytest.approx(rate["bf16"] / rate["fp32"], rel=0.05, abs=0.02)
    assert "% of questions" in said


def tokens_per_step(line):
    """'padded:   0.428 steps/s (3 steps in 7.009 s)   27 real tokens/s  (63.1 real tokens a step, ...)' -> 63.1:
    counted, not timed, so that a busy machine's rounding of the rates cannot move it"""
    return float(line.split("real tokens/s  (", 1)[1].split()[0])


def way_figures(line):
    """A way's line read back: steps/s, timed steps, seconds, real tokens/s, real tokens a step, host and device ms a
    step, device busy %."""
    rate = float(line.split(": ", 1)[1].split()[0])
    steps, seconds = line.split(" steps/s (", 1)[1].split(" s)")[0].split(" steps in ")
    tokens_rate = float(line.split(" s)", 1)[1].split()[0])
    host, device = (float(line.split(f"{what} ", 1)[1].split()[0]) for what in ("; host", "device"))
    busy = float(line.split("device busy ", 1)[1].split("%")[0])
    return rate, int(steps), float(seconds), tokens_rate, tokens_per_step(line), host, device, busy


def test_finetune_bench_times_padded_padding_free_and_the_trainer(tiny_bert_dir, tmp_path, capsys):
    glue = write_sst2(str(tmp_path / "glue"), n_train=200, n_dev=10)
    finetune_speed.main(["--model", tiny_bert_dir, "--data-dir", glue, "--steps", "3", "--batch-size", "8",
                         "--device", "cpu"])
    out = capsys.readouterr().out.splitlines()
    padded = next(line for line in out if line.strip().startswith("padded:"))
    free = next(line for line in out if line.strip().startswith("padding-free:"))
    assert int(padded.split("mean batch width ")[1].split()[0]) < 20          # the paper's random batches, dynamic padding
    assert padded.split("real tokens/s  (")[1].split(";")[0] == free.split("real tokens/s  (")[1].split(";")[0]  # same rows
    assert tokens_per_step(padded) == pytest.approx(tokens_per_step(free), rel=1e-2)
    assert out[0].endswith("threads") and "AdamW fused" in out[0] and "best of 1 round(s)" in out[0]
    assert "every way warmed first" in out[0] and "device time: the host's" in out[0]
    assert any(line.startswith("padding-free vs padded: ") and line.endswith("x") for line in out)
    ways = [padded, free]
    if importlib.util.find_spec("accelerate"):
        trainer = next(line for line in out if line.strip().startswith("Trainer (DataCollatorWithPadding):"))
        assert tokens_per_step(trainer) == pytest.approx(tokens_per_step(free), rel=1e-2)   # it saw the same rows
        assert out[-1].startswith("padding-free vs Trainer: ")
        ways.append(trainer)
    else:
        assert out[-1] == "Trainer: not run (accelerate is not installed)"
    for line in ways:             # each figure of a way's line agrees with the steps and seconds it printed
        rate, steps, seconds, tokens_rate, per_step, host, device, busy = way_figures(line)
        assert steps == 3
        # seconds is printed to 3 decimals, so the time was within 5e-4 s of it: each figure lies in the interval
        # that time allows (on a quiet machine 3 steps take about 0.01 s, and the rounding moves a rate by 5%)
        low, high = seconds - 5e-4, seconds + 5e-4
        assert steps / high * (1 - 2e-3) - 1e-3 <= rate <= steps / low * (1 + 2e-3) + 1e-3
        assert (per_step - 0.05) * steps / high * 0.99 - 1 <= tokens_rate <= (per_step + 0.05) * steps / low * 1.01 + 1
        assert 1000 * low / steps * 0.99 - 0.1 <= host <= 1000 * high / steps * 1.01 + 0.1
        assert device == host and busy == 100           # on the CPU the device is the host


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


@pytest.mark.slow
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


def test_step_profile_splits_a_warm_step_into_host_and_device_time(tiny_bert_dir, tmp_path, capsys):
    import step_profile
    glue = write_sst2(str(tmp_path / "glue"), n_train=200, n_dev=10)
    step_profile.main(["--model", tiny_bert_dir, "--data-dir", glue, "--steps", "3", "--warm-steps", "2",
                       "--batch-size", "8", "--device", "cpu", "--top", "3"])
    out = capsys.readouterr().out.splitlines()
    assert "2 warm steps, then 5 profiled" in out[0] and "padding-free on" in out[0]
    wall, host, device = (float(out[1].split(f"{what} ", 1)[1].split()[0]) for what in ("wall", "time)", "device"))
    assert device == host and 0 < host                                    # on the CPU the device is the host
    busy = 100 * device / wall        # from the printed ms (0.05 ms of rounding each) against the printed whole %
    rounding = 0.5 + busy * (0.05 / wall + 0.05 / device)
    assert float(out[1].split("device busy ")[1].split("%")[0]) == pytest.approx(busy, abs=rounding)
    top = out[2].split(": ", 1)[1].split("; ")
    assert len(top) == 3 and all(x.split()[0].startswith(("aten::", "autograd::", "Optimizer.")) for x in top), top
    mss = [float(x.split(" ms x")[0].split()[-1]) for x in top]
    assert mss == sorted(mss, reverse=True) and sum(mss) <= host + 0.1    # the top ones, a part of the host's time


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "..", "shared", "data", "glue_data", "MRPC")),
                    reason="needs ../shared/data (MRPC)")
@pytest.mark.slow
def test_side_by_side_bench_times_the_mrpc_grid_both_ways(tiny_bert_dir, capsys, monkeypatch):
    import side_by_side_speed
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    side_by_side_speed.main(["--model", tiny_bert_dir, "--max-train-examples", "32", "--max-dev-examples", "8",
                             "--side-by-side", "2", "--device", "cpu"])
    out = capsys.readouterr().out.splitlines()
    assert out[-4].startswith("MRPC grid (4 runs)") and "warm-up run" in out[-4]
    together, alone = (float(line.split(": ", 1)[1].split()[0]) for line in out[-3:-1])
    assert "side by side (2 at a time)" in out[-3] and out[-3].count(" s,") == 3      # each of the four runs' time
    assert "one after another" in out[-2]
    ratio = float(out[-1].split("one after another / side by side: ", 1)[1].rstrip("x"))
    assert ratio == pytest.approx(alone / together, rel=0.01, abs=0.006)    # the times it is read from are rounded
    runs = [float(x.split()[-2]) for x in out[-2].split("(", 1)[1].rstrip(")").split(", ")]
    assert sum(runs) <= alone + 0.25               # one after another: their times add up (each printed to 0.1 s)


@needs_shared_data
@pytest.mark.slow
def test_one_mrpc_run_walks_a_handful_of_rooms():
    """bench/trace_run.py, in a process of its own (so that what the imports run counts too): `bert_part4_finetune.py
    mrpc 2e-5` on a tiny BERT calls into at most 12 files and 149 distinct functions of part4/ (the package's reading
    budget for one run); what it counts is what ran: the recipe's cadence and the GLUE family's evaluation, never
    SQuAD's rooms or the stand-in's. Following fine_tune's parameters (--follow), the trail returns up the layout's
    order at most 10 times and enters run/ at most 8 times each."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "trace_run.py")], capture_output=True,
                         text=True, timeout=600).stdout.splitlines()
    total = next(line for line in out if " files of part4/, " in line)
    files, functions = int(total.split(": ")[1].split()[0]), int(total.split(", ")[-1].split()[0])
    counted = {line.split()[1]: int(line.split()[0]) for line in out if line.startswith("  ") and "part4/" in line}
    assert len(counted) == files and sum(counted.values()) == functions          # the total is its files' counts
    assert counted["part4/paper/recipe.py"] >= 2 and counted["part4/tasks/families.py"] >= 10    # eval_every, evaluate
    assert not any("squad" in path or "reproduction/" in path for path in counted)
    assert files <= 12 and functions <= 149, total
    follow = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "trace_run.py"), "--follow", "--quiet"],
                            capture_output=True, text=True, timeout=600).stdout.splitlines()
    trails = [line for line in follow if line.startswith("fine_tune's ")]
    assert [line.split(":")[0] for line in trails] == ["fine_tune's run", "fine_tune's data"]
    for line in trails:
        up, entered = int(line.split("; ")[1].split()[0]), int(line.split("run/ entered ")[1].split()[0])
        assert up <= 10 and entered <= 8, line


@pytest.mark.slow
def test_finetune_bench_times_every_way_in_fp32_and_bf16_side_by_side(tiny_bert_dir, tmp_path, capsys):
    glue = write_sst2(str(tmp_path / "glue"), n_train=200, n_dev=10)
    finetune_speed.main(["--model", tiny_bert_dir, "--data-dir", glue, "--steps", "3", "--batch-size", "8",
                         "--device", "cpu", "--dtype", "bf16", "--no-trainer"])
    out = capsys.readouterr().out.splitlines()
    assert "fp32 and bf16 autocast" in out[0] and "native bf16: " in out[0]
    rates = {}
    for way in ("padded", "padding-free"):
        for dtype in ("fp32", "bf16"):
            line = next(x for x in out if x.strip().startswith(f"{way}, {dtype}:"))
            rates[way, dtype], steps, *_ = way_figures(line)
            assert steps == 3
    ratios = next(x for x in out if x.startswith("bf16 vs fp32, each way: "))
    for way in ("padded", "padding-free"):       # each ratio is the one its two lines give (to the 3 decimals printed)
        said = float(ratios.split(f"{way} ", 1)[1].split("x")[0])
        assert said == pytest.approx(rates[way, "bf16"] / rates[way, "fp32"], rel=0.02, abs=0.02)
    assert sum(x.startswith("padding-free vs padded, ") for x in out) == 2


@pytest.mark.slow
def test_the_profile_of_a_bf16_step_draws_15_bit_masks_and_of_an_fp32_step_the_padded_runs(tiny_bert_dir, tmp_path,
                                                                                             capsys):
    import step_profile
    glue = write_sst2(str(tmp_path / "glue"), n_train=200, n_dev=10)
    ops = {}
    for dtype in ("fp32", "bf16"):
        step_profile.main(["--model", tiny_bert_dir, "--data-dir", glue, "--steps", "2", "--warm-steps", "1",
                           "--batch-size", "8", "--device", "cpu", "--top", "200", "--dtype", dtype])
        out = capsys.readouterr().out.splitlines()
        assert ("bf16 autocast" if dtype == "bf16" else "; fp32;") in out[0]
        ops[dtype] = {x.split()[0]: int(x.split(" ms x")[1]) for x in out[2].split(": ", 1)[1].split("; ")}
    # fp32: every mask drawn by bernoulli_, at the padded shape (the embeddings', each layer's two hidden ones and its
    # attention's, the classifier's on C); bf16: all of the encoder's by keep_mask (random_), the classifier's its own
    assert "aten::random_" not in ops["fp32"] and ops["fp32"]["aten::bernoulli_"] == 1 + 3 * 2 + 1
    assert ops["bf16"]["aten::random_"] == ops["fp32"]["aten::bernoulli_"] - 1 and ops["bf16"]["aten::bernoulli_"] == 1
