"""Every checkpoint is what it says: other model types run as themselves or are refused, the loading report is checked,
padding-free steps hold only where they re-implement the model (and fall back in one line elsewhere).

Small checkpoints of ELECTRA (embedding_size != hidden_size), DistilBERT (no segments, norms named sa_layer_norm),
RoBERTa (positions start after the padding index, no segments) and BERT are built and saved in-process."""

import copy
import json
import os

import pytest
import torch
from conftest import TEXTS, save_tiny, tiny_config, write_vocab
from safetensors.torch import load_file
from test_finetune import write_sst2
from test_squad import squad_file
from tokenizers import ByteLevelBPETokenizer
from tokenizers.processors import TemplateProcessing
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertTokenizer,
    DistilBertConfig,
    DistilBertForQuestionAnswering,
    DistilBertModel,
    DistilBertTokenizer,
    ElectraConfig,
    ElectraForQuestionAnswering,
    ElectraModel,
    RobertaConfig,
    RobertaForQuestionAnswering,
    RobertaModel,
    RobertaTokenizer,
)

import bert_part4_finetune as ft
import bert_part4_heads as heads
import bert_part4_math as bm
import bert_part4_squad as sq
from part4 import common, packing, runs, tasks
from part4.common import run_cli

CPU = torch.device("cpu")
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37)


def roberta_tokenizer():
    """A byte-level BPE trained on the test texts, as RoBERTa's tokenizer (<s> q </s></s> p </s>, no segments)."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TEXTS, vocab_size=600, min_frequency=1, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split()) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return RobertaTokenizer(vocab=model["vocab"], merges=merges)


# (base model class, QA model class, config of the vocabulary size, tokenizer of a folder)
TYPES = {
    "electra": (ElectraModel, ElectraForQuestionAnswering,
                lambda n: ElectraConfig(vocab_size=n, embedding_size=16, **SMALL),
                lambda folder: BertTokenizer(vocab=write_vocab(folder))),
    "distilbert": (DistilBertModel, DistilBertForQuestionAnswering,
                   lambda n: DistilBertConfig(vocab_size=n, dim=32, n_layers=2, n_heads=2, hidden_dim=37),
                   lambda folder: DistilBertTokenizer(vocab=write_vocab(folder))),
    "roberta": (RobertaModel, RobertaForQuestionAnswering,
                lambda n: RobertaConfig(vocab_size=n, max_position_embeddings=514, pad_token_id=1, **SMALL),
                lambda folder: roberta_tokenizer()),
}


def save_other(folder, model_type, qa=False, seed=0):
    """A tiny checkpoint of another model type and its tokenizer, saved with save_pretrained."""
    base, span, config, tokenizer = TYPES[model_type]
    os.makedirs(folder, exist_ok=True)
    tok = tokenizer(folder)
    torch.manual_seed(seed)
    (span if qa else base)(config(len(tok))).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory):
    """{type: (pre-trained-style folder, question-answering folder)} for each other model type."""
    root = tmp_path_factory.mktemp("checkpoints")
    return {t: (save_other(str(root / t), t), save_other(str(root / f"{t}_qa"), t, qa=True, seed=3)) for t in TYPES}


def fails_in_one_line(main, argv, capsys, out):
    """Run a script's main as the command line does: exit 2, one line on stderr, nothing written."""
    assert run_cli(main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert not os.path.exists(out) or not [f for f in os.listdir(out) if not f.startswith(".")]
    return err


# --- the model that runs is the checkpoint's own, of its own type ---

@pytest.mark.parametrize("model_type", list(TYPES))
def test_the_model_is_the_checkpoints_own_architecture_and_weights(checkpoints, model_type):
    folder = checkpoints[model_type][0]
    family = tasks.FAMILIES["sst2"]("sst2", 128)
    model = ft.new_model(family, folder, "pretrained")
    assert model.config.model_type == model_type and type(model).__name__.endswith("ForSequenceClassification")
    saved = load_file(os.path.join(folder, "model.safetensors"))
    ours = model.base_model.state_dict()
    left_out = set(saved) - set(ours)           # RoBERTa's classifier reads <s> through its own head, not the pooler
    assert left_out == ({"pooler.dense.weight", "pooler.dense.bias"} if model_type == "roberta" else set())
    for key in set(saved) & set(ours):
        assert torch.equal(ours[key], saved[key]), key


@pytest.mark.parametrize("model_type", list(TYPES))
def test_padded_batches_give_each_inputs_own_logits(checkpoints, model_type):
    """Batches padded to their longest row, with the tokenizer's own columns (no segments for DistilBERT and RoBERTa,
    whose positions count from the padding index): each row's logits are those of the input alone."""
    folder = checkpoints[model_type][0]
    tok = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    examples = [((text,), 0) for text in ("a gorgeous, witty, seductive movie.", "dull", "the plot is dull and the "
                                          "acting is worse. good bad film great")]
    enc = tasks.encode(tok, examples, 128)
    assert ("token_type_ids" in enc) == (model_type == "electra")
    with torch.no_grad():
        alone = [model(**tok(text, return_tensors="pt")).logits[0] for (text,), _ in examples]
    batched = tasks.predict_logits(model, enc, CPU, None, 8)
    assert torch.allclose(torch.tensor(batched, dtype=torch.float32), torch.stack(alone), atol=1e-5)


@pytest.mark.parametrize("model_type", list(TYPES))
def test_fine_tuning_runs_as_itself_and_says_which_type(checkpoints, model_type, tmp_path):
    glue = write_sst2(str(tmp_path / "glue"), n_train=24, n_dev=16)
    out = tmp_path / "r"
    assert ft.main(["sst2", "1e-3", "--model", checkpoints[model_type][0], "--data-dir", glue, "--batch-size", "8",
                    "--epochs", "1", "--evals", "1", "--results-dir", str(out), "--device", "cpu"]) == 0
    r = json.loads((out / "part4_sst2_lr1e-3_bs8_ep1.json").read_text())
    log = (out / "part4_sst2_lr1e-3_bs8_ep1.log").read_text()
    cls = {"electra": "ElectraForSequenceClassification", "distilbert": "DistilBertForSequenceClassification",
           "roberta": "RobertaForSequenceClassification"}[model_type]
    assert f"(model type {model_type}: {cls})" in log and "FINAL sst2 dev accuracy" in log
    base = {"electra": "ElectraModel", "distilbert": "DistilBertModel", "roberta": "RobertaModel"}[model_type]
    assert (f"padded steps, not padding-free: model type {model_type} ({base}), and padding-free steps re-implement "
            f"BertModel's forward") in log
    assert r["computation"]["padding_free"] is False and r["final"]["dev"]["n"] == 16


def test_no_decay_on_biases_and_norms_of_any_name(checkpoints, tiny_bert_dir):
    """DistilBERT names its norms sa_layer_norm and output_layer_norm; an RMSNorm is a norm too; BERT's groups are
    those of the LayerNorm rule the recipe always had."""
    model = AutoModelForSequenceClassification.from_pretrained(checkpoints["distilbert"][0], num_labels=2)
    model.extra = torch.nn.RMSNorm(4)
    decay, no_decay = ft.decay_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    expected = {n for n in names.values() if n.endswith("bias") or "layer_norm" in n or "LayerNorm" in n or n == "extra.weight"}
    assert any("sa_layer_norm" in n for n in expected)
    assert {names[id(p)] for p in no_decay["params"]} == expected
    assert len(decay["params"]) + len(no_decay["params"]) == len(names)
    bert = BertForSequenceClassification.from_pretrained(tiny_bert_dir, num_labels=2)
    old = [p for m in bert.modules() for n, p in m.named_parameters(recurse=False)
           if n == "bias" or isinstance(m, torch.nn.LayerNorm)]
    assert [id(p) for p in ft.decay_groups(bert, 0.01)[1]["params"]] == [id(p) for p in old]


def brute_force_answers(model, tok, examples, max_len, stride, max_answer=30):
    """Each question's best span over all its windows, every (i, j) of the passage with i <= j < i + max_answer tried,
    each window run alone; and min over its windows of s_null = start[0] + end[0] (the [CLS] / <s> token)."""
    enc = tok([ex["question"] for ex in examples], [ex["context"] for ex in examples], truncation="only_second",
              max_length=max_len, stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True)
    best = [(float("-inf"), "", float("inf")) for _ in examples]
    for w in range(len(enc["input_ids"])):
        q, offsets = enc["overflow_to_sample_mapping"][w], enc["offset_mapping"][w]
        passage = [k for k, s in enumerate(enc.sequence_ids(w)) if s == 1]
        inputs = {k: torch.tensor([enc[k][w]]) for k in tok.model_input_names if k in enc}
        with torch.no_grad():
            out = model(**inputs)
        S, E = out.start_logits[0].tolist(), out.end_logits[0].tolist()
        score, text, null = best[q]
        for i in passage:
            for j in passage:
                if i <= j < i + max_answer and S[i] + E[j] > score:
                    score, text = S[i] + E[j], examples[q]["context"][offsets[i][0]:offsets[j][1]]
        best[q] = (score, text, min(null, S[0] + E[0]))
    return best


@pytest.mark.parametrize("model_type", list(TYPES))
def test_the_span_search_on_other_question_answering_models(checkpoints, model_type, tmp_path):
    """bert_part4_squad.py on any AutoModelForQuestionAnswering: its answers and no-answer odds are those of a brute
    force over every window and span, each window run alone with its tokenizer's own inputs."""
    folder, out = checkpoints[model_type][1], tmp_path / "r"
    v1, v2 = squad_file(tmp_path / "v1.json", False), squad_file(tmp_path / "v2.json", True)
    assert sq.main(["--v1-model", folder, "--v2-model", folder, "--v1-data", v1, "--v2-data", v2, "--only", "v1",
                    "--only", "v2", "--max-len", "48", "--stride", "16", "--n-best", "48", "--results-dir", str(out),
                    "--device", "cpu"]) == 0
    log = (out / "part4_squad.log").read_text()
    assert f"SQuAD v1.1 model: {os.path.basename(folder)}@" in log and f"(model type {model_type}: " in log
    model = AutoModelForQuestionAnswering.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    for data, file in ((v1, "squad_v1_predictions.json"), (v2, "squad_v2_nonnull_predictions.json")):
        examples = sq.read_squad(data, "2.0" if data == v2 else "1.1", "--data")
        expected = brute_force_answers(model, tok, examples, 48, 16)
        predicted = json.loads((out / file).read_text())
        assert [predicted[ex["id"]] for ex in examples] == [text for _, text, _ in expected]
    odds = json.loads((out / "squad_v2_null_odds.json").read_text())
    assert [odds[ex["id"]] for ex in examples] == pytest.approx([null - score for score, _, null in expected], abs=1e-5)


# --- what is refused: one line, exit 2, nothing written ---

def edited_config(folder, target, **changes):
    """A copy of a model folder whose config.json says something else than its weights."""
    os.makedirs(target, exist_ok=True)
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as src, open(os.path.join(target, name), "wb") as dst:
            dst.write(src.read())
    config = json.loads(open(os.path.join(target, "config.json")).read())
    config.update(changes)
    with open(os.path.join(target, "config.json"), "w") as f:
        json.dump(config, f)
    return target


def sst2_argv(model, glue, out, extra=()):
    return ["sst2", "--model", model, "--data-dir", glue, "--results-dir", str(out), "--device", "cpu", *extra]


def test_weights_that_are_not_the_checkpoints_are_refused(tiny_bert_dir, tmp_path, capsys):
    glue, out = write_sst2(str(tmp_path / "glue"), n_train=16, n_dev=8), tmp_path / "r"
    deeper = edited_config(tiny_bert_dir, str(tmp_path / "deeper"), num_hidden_layers=3)
    err = fails_in_one_line(ft.main, sst2_argv(deeper, glue, out), capsys, out)
    assert "16 encoder weights are not in the checkpoint and would be initialised at random (bert.encoder.layer.2." in err
    assert "refusing to run the model on weights that are not the checkpoint's (--init random is the way" in err
    shallower = edited_config(tiny_bert_dir, str(tmp_path / "shallower"), num_hidden_layers=1)
    err = fails_in_one_line(ft.main, sst2_argv(shallower, glue, out), capsys, out)
    assert "16 weights of the checkpoint's encoder would not be used (encoder.layer.1." in err
    narrower = edited_config(save_tiny(str(tmp_path / "wide"), hidden_size=64, intermediate_size=40),
                             str(tmp_path / "narrow"), hidden_size=32, intermediate_size=37)
    err = fails_in_one_line(ft.main, sst2_argv(narrower, glue, out), capsys, out)
    assert "weights of the checkpoint have another shape than its config.json gives (the encoder's" in err
    assert "(64,) in the file, (32,) by the config" in err


def test_unknown_type_missing_weights_and_misspelled_folders(tiny_bert_dir, tmp_path, capsys, monkeypatch):
    glue, out = write_sst2(str(tmp_path / "glue"), n_train=16, n_dev=8), tmp_path / "r"
    unknown = edited_config(tiny_bert_dir, str(tmp_path / "unknown"), model_type="no-such-type")
    err = fails_in_one_line(ft.main, sst2_argv(unknown, glue, out), capsys, out)
    assert "its config.json names model_type 'no-such-type', which transformers" in err and "does not know" in err
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((tmp_path / "unknown" / "config.json").read_text().replace("no-such-type", "bert"))
    for name in os.listdir(tiny_bert_dir):
        if name.startswith(("vocab", "tokenizer")):
            (bare / name).write_bytes(open(os.path.join(tiny_bert_dir, name), "rb").read())
    err = fails_in_one_line(ft.main, sst2_argv(str(bare), glue, out), capsys, out)
    assert "a config.json without weights (no model.safetensors or pytorch_model.bin beside it)" in err
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(common, "hub_reachable", lambda timeout=3.0: False)
    err = fails_in_one_line(ft.main, sst2_argv("models/all-MiniLM-L6", glue, out), capsys, out)
    assert err.startswith("error: --model models/all-MiniLM-L6: no such folder here, and as a Hub id: the Hugging Face "
                          "Hub cannot be reached and 'models/all-MiniLM-L6' is not in the local cache")


def test_init_random_builds_the_configs_own_architecture(checkpoints, tmp_path):
    """--init random reads only the config: a config.json alone is enough, and the log names what it built."""
    glue, out = write_sst2(str(tmp_path / "glue"), n_train=16, n_dev=8), tmp_path / "r"
    assert ft.main(sst2_argv(checkpoints["electra"][0], glue, out, ["--init", "random", "--batch-size", "8",
                             "--epochs", "1", "--evals", "1"])) == 0
    (log,) = [(out / n).read_text() for n in os.listdir(out) if n.endswith(".log")]
    assert "(model type electra: ElectraForSequenceClassification), random weights (--init random)" in log


@pytest.mark.parametrize("script, flag", [(heads, "--model"), (bm, "--sst2-model"), (bm, "--squad-model")])
def test_scripts_that_read_berts_modules_refuse_other_types(checkpoints, tiny_sst2_dir, tiny_qa_dir, script, flag,
                                                            tmp_path, capsys):
    electra, out = checkpoints["electra"][0], tmp_path / "r"
    models = {"--model": {}, "--sst2-model": {"--squad-model": tiny_qa_dir, "--squad2-model": tiny_qa_dir},
              "--squad-model": {"--sst2-model": tiny_sst2_dir, "--squad2-model": tiny_qa_dir}}[flag]
    argv = [flag, electra, *[x for kv in models.items() for x in kv], "--results-dir", str(out), "--device", "cpu"]
    err = fails_in_one_line(script.main, argv + (["--flow-questions", "0"] if script is bm else []), capsys, out)
    assert err.startswith(f"error: {flag} {electra}: model type electra; this script needs a BERT (")
    assert err.endswith("so it runs on model_type bert only")


# --- padding-free steps: where they hold, the same run; elsewhere padded steps, said in one line ---

def batch_of(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(5, 90, (n,), generator=g).tolist() for n in lengths]
    enc = {"input_ids": ids, "token_type_ids": [[0] * (n // 2) + [1] * (n - n // 2) for n in lengths],
           "labels": [n % 2 for n in lengths], "targets": ("labels",)}
    return runs.collate(enc, range(len(lengths)), CPU)


def test_an_eager_bert_trains_padding_free_as_the_padded_one():
    """A BERT with eager attention: softmax(Q K^T * scaling + mask) V with its dropout at (B, h, M, M), as SDPA's."""
    torch.manual_seed(1)
    padded = BertForSequenceClassification(tiny_config(100, num_labels=2, attn_implementation="eager")).train()
    free = packing.padding_free(copy.deepcopy(padded)).train()
    assert padded.config._attn_implementation == "eager" and packing.is_padding_free(free)
    batch = batch_of([1, 13, 4, 9, 2, 13])
    losses = []
    for model in (padded, free):
        torch.manual_seed(7)
        loss = model(**batch).loss
        loss.backward()
        losses.append((loss.item(), [p.grad.clone() for p in model.parameters()]))
    (a, ga), (b, gb) = losses
    assert b == pytest.approx(a, rel=1e-5)
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(ga, gb, strict=True))


def test_an_eager_bert_folder_trains_padding_free_as_the_same_run(tmp_path):
    folder = save_tiny(str(tmp_path / "eager"), BertForSequenceClassification, num_labels=2, attn_implementation="eager")
    glue = write_sst2(str(tmp_path / "glue"), n_train=24, n_dev=16)
    got = {}
    for way in ("on", "off"):
        out = tmp_path / way
        assert ft.main(sst2_argv(folder, glue, out, ["1e-3", "--batch-size", "8", "--epochs", "1", "--evals", "3",
                                 "--padding-free", way, "--fused-adamw", "off"])) == 0
        got[way] = json.loads((out / "part4_sst2_lr1e-3_bs8_ep1.json").read_text())
    assert got["on"]["computation"]["padding_free"] is True and got["off"]["computation"]["padding_free"] is False
    for x, y in zip(got["off"]["curve"], got["on"]["curve"], strict=True):
        assert y["train_loss"] == pytest.approx(x["train_loss"], rel=1e-4) and y["dev"] == x["dev"]


@pytest.mark.parametrize("change, reason", [
    ({"attn_implementation": "flex_attention"}, "(attention flex_attention)"),
    ({"is_decoder": True}, "(is_decoder)"),
])
def test_a_bert_configured_otherwise_keeps_padded_steps(change, reason):
    config = tiny_config(100, num_labels=2)
    model = BertForSequenceClassification(config)
    for key, value in change.items():
        setattr(model.config, "_attn_implementation" if key == "attn_implementation" else key, value)
    assert packing.padding_free_problem(model) == f"its configuration is not the one padding-free steps re-implement {reason}"
    assert not packing.is_padding_free(packing.padding_free(model))


@pytest.mark.parametrize("model_type", list(TYPES))
def test_other_types_keep_their_own_forward(checkpoints, model_type):
    model = AutoModelForQuestionAnswering.from_pretrained(checkpoints[model_type][1])
    forward = model.base_model.forward
    assert packing.padding_free(model) is model and model.base_model.forward == forward
    assert packing.padding_free_problem(model).startswith(f"model type {model_type} (")


@pytest.mark.parametrize("inputs", [{"output_attentions": True}, {"output_hidden_states": True},
                                    {"position_ids": "reversed"}])
def test_inputs_the_packing_does_not_compute_take_the_padded_forward(inputs):
    """In training, an input the packed forward does not compute gives the padded model's outputs, never drops it."""
    torch.manual_seed(1)
    padded = BertForQuestionAnswering(tiny_config(100, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                  attn_implementation="eager")).train()
    free = packing.padding_free(copy.deepcopy(padded)).train()
    batch = batch_of([3, 7, 5])
    batch.pop("labels")
    if inputs.get("position_ids") == "reversed":
        inputs = {"position_ids": torch.arange(7).flip(0).expand(3, 7)}
    a, b = padded(**batch, **inputs), free(**batch, **inputs)
    assert torch.equal(a.start_logits, b.start_logits) and torch.equal(a.end_logits, b.end_logits)
    for key in ("attentions", "hidden_states"):
        if getattr(a, key) is not None:
            assert getattr(b, key) is not None and all(torch.equal(x, y) for x, y in zip(getattr(a, key), getattr(b, key)))


def test_the_packed_forward_takes_only_the_inputs_it_computes():
    assert packing.packs(None, None, {"return_dict": True, "output_attentions": False, "use_cache": None})
    for extra in ({"output_attentions": True}, {"output_hidden_states": True}, {"head_mask": torch.ones(2)},
                  {"encoder_hidden_states": torch.ones(1)}, {"return_dict": False}):
        assert not packing.packs(None, None, {"return_dict": True, **extra})
    assert not packing.packs(torch.zeros(1), None, {}) and not packing.packs(None, torch.zeros(1), {})


@pytest.mark.parametrize("pair, problem", [("$A [SEP] $B:1 [SEP]:1 [CLS]:1", "does not put its [CLS] token first"),
                                           ("[CLS] $B:1 [SEP]:1 $A [SEP]", "does not put the passage after the question")])
def test_a_tokenizer_laid_out_otherwise_is_refused(tiny_qa_dir, tmp_path, pair, problem, capsys, monkeypatch):
    """The span search reads s_null at the window's first token and the passage after the question."""
    folder = tiny_qa_dir
    tok = AutoTokenizer.from_pretrained(folder)
    assert sq.layout_problem(tok) is None
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair=pair, special_tokens=[("[CLS]", tok.cls_token_id), ("[SEP]", tok.sep_token_id)])
    assert sq.layout_problem(tok).startswith(problem)
    load = sq.load_pretrained                  # the folder's tokenizer, laid out otherwise
    monkeypatch.setattr(sq, "load_pretrained",
                        lambda loader, *a, **kw: tok if loader is AutoTokenizer else load(loader, *a, **kw))
    out = tmp_path / "r"
    err = fails_in_one_line(sq.main, ["--v1-model", folder, "--v1-data", squad_file(tmp_path / "v1.json", False),
                                      "--only", "v1", "--results-dir", str(out), "--device", "cpu"], capsys, out)
    assert err.startswith(f"error: --v1-model {folder}: model type bert, whose tokenizer {problem}")
