"""Every checkpoint is what it says: other model types run as themselves or are refused, the loading report is checked,
padding-free steps hold only where they re-implement the model (and fall back in one line elsewhere).

Small checkpoints of ELECTRA (embedding_size != hidden_size), DistilBERT (no segments, norms named sa_layer_norm),
RoBERTa (positions start after the padding index, no segments) and BERT are built and saved in-process."""

import copy
import hashlib
import json
import os
import sys

import pytest
import torch
import transformers
from conftest import SHARED_DATA, TEXTS, needs_shared_data, save_tiny, tiny_config, tiny_vocab_words, write_vocab
from huggingface_hub import constants
from safetensors.torch import load_file
from test_finetune import sst2_rows, write_sst2
from test_finetune_squad_swag import squad_json, write_swag
from test_squad import squad_file
from tokenizers import ByteLevelBPETokenizer
from tokenizers.processors import TemplateProcessing
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertForMultipleChoice,
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
from part4.data import batches, readers
from part4.data.batches import collate
from part4.models import loading
from part4.models.loading import run_cli
from part4.output.results_files import fingerprint, weight_files
from part4.tasks import families

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
    family = families.FAMILIES["sst2"]("sst2", 128)
    model = ft.new_model(family, folder, "pretrained", "new")
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
    enc = families.encode_glue(tok, examples, 128)
    assert ("token_type_ids" in enc) == (model_type == "electra")
    with torch.no_grad():
        alone = [model(**tok(text, return_tensors="pt")).logits[0] for (text,), _ in examples]
    batched = families.predict_logits(model, enc, CPU, dtype=None, batch_size=8)
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
    assert r["computation"]["padding_free_steps"] is False and r["final"]["dev"]["n"] == 16


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
        examples = readers.read_squad(data, "2.0" if data == v2 else "1.1", "--data")
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
    assert "refusing to run the model on weights that are not the checkpoint's (a fine-tune's --init random is" in err
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
    monkeypatch.setattr(loading, "hub_reachable", lambda timeout=3.0: False)
    err = fails_in_one_line(ft.main, sst2_argv("models/all-MiniLM-L6", glue, out), capsys, out)
    assert err.startswith("error: --model models/all-MiniLM-L6: no such folder here, and as a Hub id: the Hugging Face "
                          "Hub cannot be reached and 'models/all-MiniLM-L6' is not in the local cache")


def test_the_route_without_the_hub_fits_the_flag():
    """A model out of the Hub's reach is refused naming the route without it: the stand-in, or this script alone on a
    local folder, the base BERT itself for --model, a fine-tuned one for a flag that reads a fine-tuned checkpoint
    (passing the base there would be refused for its missing head)."""
    base = "--model models/all-MiniLM-L6-v2"
    line = loading.unreachable_model("bert-base-uncased", "--model")
    assert line.startswith("--model bert-base-uncased: the Hugging Face Hub cannot be reached and ") and base in line
    for flag in ("--sst2-model", "--squad-model", "--squad2-model", "--v1-model", "--v2-model"):
        line = loading.unreachable_model("x/y", flag)
        assert f"fine-tuned here on the task {flag} reads" in line and line.endswith(f"passed as {flag} DIR")
        assert "models/all-MiniLM-L6-v2" in line and f"{flag} models/" not in line and "--stand-in" in line


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
    if script is bm:                          # several sections: those of that model left out, the rest written
        err, results = left_out_in_one_line(argv + ["--flow-questions", "0"], capsys, out)
        assert set(results["not_run"]) == {"--sst2-model": {"glue_real", "new_weights"},
                                           "--squad-model": {"attention", "span_real"}}[flag]
    else:
        err = fails_in_one_line(script.main, argv, capsys, out)
    assert err.startswith(f"error: {flag} {electra}: model type electra; this script needs a BERT (")
    assert "so it runs on model_type bert only" in err


# --- padding-free steps: where they hold, the same run; elsewhere padded steps, said in one line ---

def batch_of(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(5, 90, (n,), generator=g).tolist() for n in lengths]
    enc = {"input_ids": ids, "token_type_ids": [[0] * (n // 2) + [1] * (n - n // 2) for n in lengths],
           "labels": [n % 2 for n in lengths], "targets": ("labels",)}
    return collate(enc, range(len(lengths)), CPU)


def packed(model):
    """Does the model's BERT run packed_bert's forward (make_padding_free applied, and it held)?"""
    forward = model.base_model.forward
    return getattr(forward, "func", None) is batches.packed_or_padded


def test_an_eager_bert_trains_padding_free_as_the_padded_one():
    """A BERT with eager attention: softmax(Q K^T * scaling + mask) V with its dropout at (B, h, M, M), as SDPA's."""
    torch.manual_seed(1)
    padded = BertForSequenceClassification(tiny_config(100, num_labels=2, attn_implementation="eager")).train()
    free = batches.make_padding_free(copy.deepcopy(padded)).train()
    assert padded.config._attn_implementation == "eager" and packed(free)
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
    assert got["on"]["computation"]["padding_free_steps"] is True and got["off"]["computation"]["padding_free_steps"] is False
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
    assert batches.padding_free_problem(model) == f"its configuration is not the one padding-free steps re-implement {reason}"
    assert not packed(batches.make_padding_free(model))


@pytest.mark.parametrize("model_type", list(TYPES))
def test_other_types_keep_their_own_forward(checkpoints, model_type):
    model = AutoModelForQuestionAnswering.from_pretrained(checkpoints[model_type][1])
    forward = model.base_model.forward
    assert batches.make_padding_free(model) is model and model.base_model.forward == forward
    assert batches.padding_free_problem(model).startswith(f"model type {model_type} (")


@pytest.mark.parametrize("inputs", [{"output_attentions": True}, {"output_hidden_states": True},
                                    {"position_ids": "reversed"}])
def test_inputs_the_packing_does_not_compute_take_the_padded_forward(inputs):
    """In training, an input the packed forward does not compute gives the padded model's outputs, never drops it."""
    torch.manual_seed(1)
    padded = BertForQuestionAnswering(tiny_config(100, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                  attn_implementation="eager")).train()
    free = batches.make_padding_free(copy.deepcopy(padded)).train()
    batch = batch_of([3, 7, 5])
    batch.pop("labels")
    if inputs.get("position_ids") == "reversed":
        inputs = {"position_ids": torch.arange(7).flip(0).expand(3, 7)}
    a, b = padded(**batch, **inputs), free(**batch, **inputs)
    assert torch.equal(a.start_logits, b.start_logits) and torch.equal(a.end_logits, b.end_logits)
    for key in ("attentions", "hidden_states"):
        if getattr(a, key) is not None:
            assert getattr(b, key) is not None and all(torch.equal(x, y) for x, y in zip(getattr(a, key), getattr(b, key)))


def test_the_packed_forward_takes_only_the_inputs_it_computes(monkeypatch):
    """A training batch with its attention mask takes the packed forward when every other input is return_dict=True
    or empty; any input with a value that the packing does not compute takes the padded one."""
    monkeypatch.setattr(batches, "packed_bert", lambda *args, **kwargs: "packed")
    ids = torch.ones(2, 3, dtype=torch.long)

    class Training:                                     # a BertModel in training, whose own forward is the padded one
        training = True

        def forward(self, *args, **kwargs):
            return "padded"

    def forward(**inputs):
        return batches.packed_or_padded(Training(), batches.MASKS_PADDED, ids, ids, **inputs)
    assert forward(return_dict=True, output_attentions=False, use_cache=None, position_ids=None) == "packed"
    for extra in ({"output_attentions": True}, {"output_hidden_states": True}, {"head_mask": torch.ones(2)},
                  {"encoder_hidden_states": torch.ones(1)}, {"return_dict": False}):
        assert forward(**{"return_dict": True, **extra}) == "padded"
    assert forward(position_ids=torch.zeros(1)) == "padded" and forward(inputs_embeds=torch.zeros(1)) == "padded"


@pytest.mark.parametrize("pair, problem", [("$A [SEP] $B:1 [SEP]:1 [CLS]:1", "does not put its [CLS] token first"),
                                           ("[CLS] $B:1 [SEP]:1 $A [SEP]", "does not put the passage after the question")])
def test_a_tokenizer_laid_out_otherwise_is_refused(tiny_qa_dir, tmp_path, pair, problem, capsys, monkeypatch):
    """The span search reads s_null at the window's first token and the passage after the question."""
    folder = tiny_qa_dir
    tok = AutoTokenizer.from_pretrained(folder)
    assert loading.layout_problem(tok) is None
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair=pair, special_tokens=[("[CLS]", tok.cls_token_id), ("[SEP]", tok.sep_token_id)])
    assert loading.layout_problem(tok).startswith(problem)
    load = loading.load_pretrained              # the folder's tokenizer, laid out otherwise
    monkeypatch.setattr(loading, "load_pretrained",
                        lambda loader, *a, **kw: tok if loader is AutoTokenizer else load(loader, *a, **kw))
    out = tmp_path / "r"
    err = fails_in_one_line(sq.main, ["--v1-model", folder, "--v1-data", squad_file(tmp_path / "v1.json", False),
                                      "--only", "v1", "--results-dir", str(out), "--device", "cpu"], capsys, out)
    assert err.startswith(f"error: --v1-model {folder}: model type bert, whose tokenizer {problem}")


# --- a model folder is read for what it holds before any work: its tokenizer, its files whole, its config ---

def cut(path, keep=0.5):
    """A weight file cut short, as an interrupted download leaves it."""
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:int(len(data) * keep)])


def as_bin(folder):
    """The folder's weights as a pytorch_model.bin only (torch.save of its state dict), as older checkpoints hold them."""
    path = os.path.join(folder, "model.safetensors")
    torch.save(load_file(path), os.path.join(folder, "pytorch_model.bin"))
    os.remove(path)
    return folder


def edit_json(path, **changes):
    with open(path) as f:
        value = json.load(f)
    with open(path, "w") as f:
        json.dump({**value, **changes}, f)


def broken(folder, model_class, case):
    """A tiny checkpoint of model_class, broken as `case` says (one of BROKEN)."""
    if case == "one segment embedding row":                   # an XLM-R-like config under a BERT tokenizer
        return save_tiny(folder, model_class, type_vocab_size=1)
    save_tiny(folder, model_class)
    if case == "a vocabulary over fewer embedding rows":
        torch.manual_seed(0)
        model_class(tiny_config(100)).save_pretrained(folder)
    elif case == "no tokenizer files":
        for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            if os.path.exists(os.path.join(folder, name)):
                os.remove(os.path.join(folder, name))
    elif case == "an empty vocab.txt":                        # the tokenizer made from it has no [UNK]
        os.remove(os.path.join(folder, "tokenizer.json"))
        open(os.path.join(folder, "vocab.txt"), "w").close()
    elif case == "a truncated model.safetensors":
        cut(os.path.join(folder, "model.safetensors"))
    elif case == "a truncated pytorch_model.bin":
        cut(os.path.join(as_bin(folder), "pytorch_model.bin"))
    elif case == "relative positions":
        edit_json(os.path.join(folder, "config.json"), position_embedding_type="relative_key")
    elif case == "a tokenizer that does not lower-case an uncased vocabulary":
        BertTokenizer(vocab=write_vocab(folder), do_lower_case=False).save_pretrained(folder)
    return folder


BROKEN = {
    "no tokenizer files": "no tokenizer files: transformers would make a tokenizer of its 5 special tokens alone ([PAD] "
                          "[UNK] [CLS] [SEP] [MASK]), every word [UNK]; put the model's tokenizer files",
    "a vocabulary over fewer embedding rows": f"its tokenizer has {len(tiny_vocab_words())} token ids but the model 100 "
                                              f"embedding rows (vocab_size in config.json)",
    "one segment embedding row": "its tokenizer gives the second text of a pair segment id 1, but the model has 1 segment "
                                 "embedding row (type_vocab_size 1 in config.json)",
    "an empty vocab.txt": "no tokenizer files: transformers would make a tokenizer of its 5 special tokens alone",
    "a truncated model.safetensors": "model.safetensors is truncated or corrupt (Error while deserializing header: ",
    "a truncated pytorch_model.bin": "pytorch_model.bin is truncated or corrupt (PytorchStreamReader failed reading zip",
    "relative positions": f"its config.json sets position_embedding_type 'relative_key', which transformers "
                          f"{transformers.__version__} does not implement for model type bert: the model would run with "
                          f"position_embedding_type 'absolute'",
    "a tokenizer that does not lower-case an uncased vocabulary": "its tokenizer does not lower-case, but its vocabulary "
                                                                  "is uncased (no capital letters): 5 of the 8 words of the "
                                                                  "probe sentence",
}


@pytest.fixture(scope="session")
def broken_folders(tmp_path_factory):
    """{(case, kind): folder}: each broken checkpoint as a pre-trained-style BERT and as a SQuAD model."""
    root = tmp_path_factory.mktemp("broken")
    kinds = {"bert": transformers.BertModel, "qa": BertForQuestionAnswering}
    return {(case, kind): broken(str(root / f"{kind}_{k}"), cls, case)
            for k, case in enumerate(BROKEN) for kind, cls in kinds.items()}


def refused_before_any_line(main, argv, capsys, out):
    """Run a script's main as the command line does: exit 2, one line on stderr, not a line of the log printed, and
    nothing written. Returns the line."""
    capsys.readouterr()                                 # what making the test's folders printed
    assert run_cli(main, argv) == 2
    printed = capsys.readouterr()
    err = printed.err.strip()
    assert printed.out == "" and err.startswith("error: ") and "\n" not in err
    assert not os.path.exists(out) or not [f for f in os.listdir(out) if not f.startswith(".")]
    return err


def left_out_in_one_line(argv, capsys, out):
    """Run the math script as the command line does, with a model that is refused: exit 2, one line on stderr; the
    toys and the sections the other models give written, the refused model's sections marked not run. Returns the
    line and the results."""
    capsys.readouterr()                                 # what making the test's folders printed
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["bert_part4_math.py"])
        assert run_cli(bm.main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    results = json.loads((out / "part4_math.json").read_text())
    assert {"glue_toy", "span_toy", "f1_examples", "swag_toy", "tables"} <= set(results) and results["not_run"]
    return err, results


def every_script(folders, case, tmp_path, others):
    """(main, argv, flag, folder) of each script run on the broken checkpoint: finetune, squad, heads, and math with it
    as its SQuAD v2.0 model (the one it loads last). others: (an SST-2 classifier, a SQuAD model) that are fine."""
    out, bert, qa = tmp_path / "r", folders[(case, "bert")], folders[(case, "qa")]
    glue = write_sst2(str(tmp_path / "glue"), n_train=16, n_dev=8)
    common_flags = ["--results-dir", str(out), "--device", "cpu"]
    return out, [
        (ft.main, ["sst2", "--model", bert, "--data-dir", glue, *common_flags], "--model", bert),
        (sq.main, ["--v1-model", qa, "--v1-data", squad_file(tmp_path / "v1.json", False), "--only", "v1",
                   *common_flags], "--v1-model", qa),
        (heads.main, ["--model", bert, *common_flags], "--model", bert),
        (bm.main, ["--sst2-model", others[0], "--squad-model", others[1], "--squad2-model", qa, "--flow-questions", "0",
                   *common_flags], "--squad2-model", qa)]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_folder_is_refused_in_one_line_before_any_work(broken_folders, case, tiny_sst2_dir, tiny_qa_dir,
                                                                 tmp_path, capsys):
    """Each fault of a model folder, in each script: exit 2, one line naming the model and what is wrong with it, not a
    line of the log printed (the heads script's model line included), nothing written; the math script, which runs
    several sections, leaves out those of that model alone (section 4), and says so in the same one line."""
    out, runs_of_scripts = every_script(broken_folders, case, tmp_path, (tiny_sst2_dir, tiny_qa_dir))
    for main, argv, flag, folder in runs_of_scripts:
        if main is bm.main:
            err, results = left_out_in_one_line(argv, capsys, out)
            assert list(results["not_run"]) == ["null"] and BROKEN[case] in results["not_run"]["null"]
            assert err.endswith(" (section 4 not run); part4_math.json holds the toys and every section that ran, and "
                                "marks the others (not_run)")
        else:
            err = refused_before_any_line(main, argv, capsys, out)
        assert err.startswith(f"error: {flag} {folder}: ") and BROKEN[case] in err, (main.__module__, err)


def test_the_math_script_names_every_refused_model(broken_folders, tiny_qa_dir, tmp_path, capsys):
    out = tmp_path / "r"
    sst2, qa2 = broken_folders[("no tokenizer files", "bert")], broken_folders[("a truncated model.safetensors", "qa")]
    err, results = left_out_in_one_line(["--sst2-model", sst2, "--squad-model", tiny_qa_dir, "--squad2-model", qa2,
                                         "--flow-questions", "0", "--results-dir", str(out), "--device", "cpu"], capsys, out)
    assert err.startswith(f"error: 2 inputs cannot be used: --sst2-model {sst2}: no tokenizer files")
    assert f" (sections 1b, 7 not run); --squad2-model {qa2}: model.safetensors is truncated or corrupt" in err
    assert set(results["not_run"]) == {"glue_real", "new_weights", "null"} and "span_real" in results


@needs_shared_data
def test_the_real_vocabulary_over_fewer_rows_names_both_numbers(tmp_path, capsys):
    """bert-base-uncased's 30,522-token vocabulary over a model of 2,000 embedding rows."""
    folder, out = str(tmp_path / "small"), tmp_path / "r"
    torch.manual_seed(0)
    transformers.BertModel(tiny_config(2000)).save_pretrained(folder)
    BertTokenizer(vocab=os.path.join(SHARED_DATA, "bert-base-uncased", "vocab.txt")).save_pretrained(folder)
    err = refused_before_any_line(heads.main, ["--model", folder, "--results-dir", str(out), "--device", "cpu"], capsys,
                                  out)
    assert "its tokenizer has 30,522 token ids but the model 2,000 embedding rows" in err


def test_a_truncated_shard_is_named(tiny_bert_dir, tmp_path):
    folder = str(tmp_path / "sharded")
    transformers.BertModel.from_pretrained(tiny_bert_dir).save_pretrained(folder, max_shard_size="60KB")
    files = weight_files(folder)
    assert files[0] == "model.safetensors.index.json" and len(files) >= 3
    assert loading.weights_problem(folder) is None
    cut(os.path.join(folder, files[-1]))
    assert loading.weights_problem(folder).startswith(f"{files[-1]} is truncated or corrupt (")
    os.remove(os.path.join(folder, files[-1]))
    assert loading.weights_problem(folder) == f"{files[-1]}, named by its shard index, is missing: download it again"


def test_the_probe_counts_the_words_a_tokenizer_makes_unknown(tmp_path):
    """The casing check against a hand count: an uncased vocabulary, with and without lower-casing, and a cased one."""
    vocab = write_vocab(str(tmp_path))
    lowering, keeping = BertTokenizer(vocab=vocab), BertTokenizer(vocab=vocab, do_lower_case=False)
    assert loading.casing_problem(lowering) == (None, None)
    capitalised = [w for w in loading.PROBE.split() if w[0].isupper()]            # BERT, Bidirectional, ..., Transformers.
    problem, note = loading.casing_problem(keeping)
    assert note is None and f"{len(capitalised)} of the {len(loading.PROBE.split())} words" in problem
    with open(vocab, "a") as f:                                                 # a cased vocabulary
        f.write("".join(w.capitalize() + "\n" for w in tiny_vocab_words() if w.isalpha() and len(w) > 3))
    problem, note = loading.casing_problem(BertTokenizer(vocab=vocab))
    assert problem is None and note == (f"warning: the tokenizer lower-cases every text, but its vocabulary is cased: 0 of "
                                        f"the 8 words of the probe sentence \"{loading.PROBE}\" become [UNK] (0%)")


def test_a_tokenizer_that_reaches_far_fewer_rows_than_the_model_has_is_a_warning(tmp_path):
    """A vocabulary cut short (or another model's) beside a model of many more embedding rows: a warning with the
    counts, among the notes every script's log prints; a model padded by a few rows past its tokenizer: nothing."""
    for extra in (10, 1000):
        folder = str(tmp_path / f"rows{extra}")
        os.makedirs(folder)
        tok = BertTokenizer(vocab=write_vocab(folder))
        ids = len(tok)
        transformers.BertModel(tiny_config(ids + extra)).save_pretrained(folder)
        tok.save_pretrained(folder)
        notes = loading.read_model_folder(folder).notes
        if extra < loading.SPARE_ROWS:
            assert notes == ()
        else:
            assert notes == (f"warning: the tokenizer has {ids:,} token ids but the model {ids + extra:,} embedding rows: "
                             f"{extra:,} rows no text reaches (a vocabulary file cut short, or another model's?)",)


# --- the dtype: loaded in fp32 whatever the file was saved in, said in one line, recorded as computed ---

def saved_as(source, folder, model_class, dtype):
    """source's model saved in another dtype, with its tokenizer."""
    model_class.from_pretrained(source, dtype=dtype).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def numbers(r):
    """What a fine-tuning run computed (its curve without the timings, its scores before and after)."""
    return {"before": r["before"], "final": r["final"], "curve": [{k: v for k, v in p.items() if k != "seconds"}
                                                                   for p in r["curve"]]}


def test_a_bf16_checkpoint_trains_in_fp32_as_its_fp32_twin(tiny_bert_dir, tmp_path):
    """A checkpoint saved in bf16 fine-tunes exactly as the same weights saved in fp32 (bf16 weights would lose most
    updates to rounding); the log says the file's dtype in one line, the results record it."""
    bf16 = saved_as(tiny_bert_dir, str(tmp_path / "bf16"), transformers.BertModel, torch.bfloat16)
    twin = saved_as(bf16, str(tmp_path / "twin"), transformers.BertModel, torch.float32)
    assert {t.dtype for t in load_file(os.path.join(bf16, "model.safetensors")).values()} == {torch.bfloat16}
    glue, got = write_sst2(str(tmp_path / "glue"), n_train=24, n_dev=16), {}
    for name, folder in (("bf16", bf16), ("twin", twin)):
        out = tmp_path / name
        assert ft.main(sst2_argv(folder, glue, out, ["1e-3", "--batch-size", "8", "--epochs", "1", "--evals", "3"])) == 0
        got[name] = (json.loads((out / "part4_sst2_lr1e-3_bs8_ep1.json").read_text()),
                     (out / "part4_sst2_lr1e-3_bs8_ep1.log").read_text())
    assert numbers(got["bf16"][0]) == numbers(got["twin"][0])
    assert "model weights: model.safetensors, saved in bf16: loaded in fp32; a new classifier layer\n" in got["bf16"][1]
    assert "model weights: model.safetensors (fp32); a new classifier layer\n" in got["twin"][1]
    recorded = got["bf16"][0]["weights"]
    assert {k: recorded[k] for k in ("weight_files", "saved_in", "loaded_in", "head")} == {
        "weight_files": ["model.safetensors"], "saved_in": "bf16", "loaded_in": "fp32", "head": "new"}
    assert got["bf16"][0]["settings"]["dtype"] == "fp32"
    model = ft.new_model(families.FAMILIES["sst2"]("sst2", 128), bf16, "random", "new")   # --init random: fp32 too
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_a_bf16_squad_model_scores_as_its_fp32_twin_and_the_dtype_is_recorded(tiny_qa_dir, tmp_path):
    bf16 = saved_as(tiny_qa_dir, str(tmp_path / "bf16"), BertForQuestionAnswering, torch.bfloat16)
    twin = saved_as(bf16, str(tmp_path / "twin"), BertForQuestionAnswering, torch.float32)
    v1, got = squad_file(tmp_path / "v1.json", False), {}
    for name, folder in (("bf16", bf16), ("twin", twin)):
        out = tmp_path / name
        assert sq.main(["--v1-model", folder, "--v1-data", v1, "--only", "v1", "--max-len", "48", "--stride", "16",
                        "--results-dir", str(out), "--device", "cpu"]) == 0
        got[name] = [(out / f).read_text() for f in ("squad_v1_predictions.json", "part4_squad.json", "part4_squad.log")]
    assert got["bf16"][0] == got["twin"][0]
    r = json.loads(got["bf16"][1])
    assert r["config"]["dtype"] == "fp32" and r["models"]["v1"]["saved_in"] == "bf16"
    assert "   model weights: model.safetensors, saved in bf16: loaded in fp32; the checkpoint's start and end vectors S, " \
           "E, kept\n" in got["bf16"][2]


# --- the head: a fine-tune starts from a new output layer, unless asked to keep the checkpoint's ---

def with_head(source, folder, model_class, set_head, **kw):
    """source's encoder under a head of model_class whose weights set_head(model) gives, saved with its tokenizer."""
    model = model_class.from_pretrained(source, **kw)
    with torch.no_grad():
        set_head(model)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def always_negative(model):
    """An SST-2 classifier biased to say label 0 whatever the input, named as SST-2's labels."""
    model.classifier.weight.zero_()
    model.classifier.bias.copy_(torch.tensor([5.0, -5.0]))
    model.config.id2label, model.config.label2id = {0: "negative", 1: "positive"}, {"negative": 0, "positive": 1}


def write_mrpc(folder, n_train=24, n_dev=16):
    os.makedirs(os.path.join(folder, "MRPC"), exist_ok=True)
    for split, n, seed in (("train", n_train, 0), ("dev", n_dev, 1)):
        pairs = zip(sst2_rows(n, seed), sst2_rows(n, seed + 7))
        rows = [f"{y}\t{k}\t{k}\t{a}\t{b}\n" for k, ((a, y), (b, _)) in enumerate(pairs)]
        with open(os.path.join(folder, "MRPC", f"{split}.tsv"), "w") as f:
            f.write("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(rows))
    return folder


def mrpc_run(model, glue, out, extra=()):
    argv = ["mrpc", "1e-3", "--model", model, "--data-dir", glue, "--batch-size", "8", "--epochs", "1", "--evals", "3",
            "--results-dir", str(out), "--device", "cpu", *extra]
    assert ft.main(argv) == 0
    return json.loads((out / "part4_mrpc_lr1e-3_bs8_ep1.json").read_text()), (out / "part4_mrpc_lr1e-3_bs8_ep1.log").read_text()


def test_an_sst2_head_reused_for_mrpc_is_a_new_layer_unless_kept(tiny_bert_dir, tmp_path):
    """The paper adds a new output layer: fine-tuning an SST-2 classifier on MRPC gives exactly the run of its encoder
    alone (the same new layer, drawn the same), and the saved model has MRPC's label names; --head checkpoint keeps the
    SST-2 layer, and the score before fine-tuning is that layer's (always label 0: the share of 0s in dev)."""
    sst2 = with_head(tiny_bert_dir, str(tmp_path / "sst2"), BertForSequenceClassification, always_negative, num_labels=2)
    glue = write_mrpc(str(tmp_path / "glue"))
    plain, _ = mrpc_run(tiny_bert_dir, glue, tmp_path / "plain")
    new, log = mrpc_run(sst2, glue, tmp_path / "new", ["--save-model", str(tmp_path / "saved")])
    assert numbers(new) == numbers(plain)
    assert "; a new classifier layer (the checkpoint's own left out; --head checkpoint keeps it)\n" in log
    assert "before fine-tuning (random classifier layer): " in log and new["weights"]["head"] == "new"
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert saved["id2label"] == {"0": "not_equivalent", "1": "equivalent"}
    kept, log = mrpc_run(sst2, glue, tmp_path / "kept", ["--head", "checkpoint"])
    zeros = [y for _, y in readers.read_split(glue, "mrpc", "dev")].count(0) / 16
    assert kept["before"]["dev"]["accuracy"] == zeros and kept["before"]["dev"]["f1"] == 0.0
    assert f"before fine-tuning (the checkpoint's classifier layer, kept): dev accuracy {zeros:.4f}  dev F1 0.0000" in log
    assert "not expected to match" not in log.split("before fine-tuning")[1].splitlines()[0]
    assert kept["settings"]["head"] == "checkpoint" and "head" not in new["settings"] and kept["weights"]["head"] == \
        "the checkpoint's"


def test_a_head_that_cannot_be_kept_is_refused_with_what_it_is(tiny_bert_dir, tmp_path, capsys):
    """--head checkpoint on a checkpoint without a head, or with one of another size than the task's: one line saying
    what the file has and what the task needs, and the flag that starts a new layer; without it, a new layer."""
    glue, out = write_mrpc(str(tmp_path / "glue")), tmp_path / "r"
    argv = ["mrpc", "--data-dir", glue, "--head", "checkpoint", "--results-dir", str(out), "--device", "cpu"]
    err = refused_before_any_line(ft.main, [*argv, "--model", tiny_bert_dir], capsys, out)
    assert err == (f"error: --model {tiny_bert_dir}: the checkpoint has no task head to keep (classifier.bias, "
                   f"classifier.weight are not in it); --head new starts a new one, as the paper does")
    (tmp_path / "no_mrpc").mkdir()                  # refused before any work: before the data is read (it has none here)
    no_data = [*argv[:2], str(tmp_path / "no_mrpc"), *argv[3:], "--model", tiny_bert_dir]
    assert refused_before_any_line(ft.main, no_data, capsys, out) == err
    five = with_head(tiny_bert_dir, str(tmp_path / "five"), BertForSequenceClassification, lambda m: None, num_labels=5)
    err = refused_before_any_line(ft.main, [*argv, "--model", five], capsys, out)
    assert err == (f"error: --model {five}: the checkpoint's task head has another shape (classifier.weight: (5, 32) in "
                   f"the file, (2, 32) for the task); --head new starts a new one, as the paper does")
    _, log = mrpc_run(five, glue, tmp_path / "new")
    assert ("; a new classifier layer (the checkpoint's task head has another shape (classifier.weight: (5, 32) in the "
            "file, (2, 32) for the task))\n") in log


@pytest.mark.slow
@pytest.mark.parametrize("task", ["squad", "swag"])
def test_squad_and_swag_start_from_new_layers_too(task, tiny_bert_dir, tmp_path):
    """A SQuAD or SWAG checkpoint fine-tuned again gives exactly the run of its encoder with new layers: S, E and w."""
    if task == "squad":
        trained = with_head(tiny_bert_dir, str(tmp_path / "ckpt"), BertForQuestionAnswering,
                            lambda m: m.qa_outputs.weight.fill_(0.3))
        train, dev = squad_json(tmp_path / "train.json", 10, False), squad_json(tmp_path / "dev.json", 5, False, seed=1)
        data = ["--train-data", train, "--dev-data", dev, "--max-len", "48", "--stride", "16"]
    else:
        trained = with_head(tiny_bert_dir, str(tmp_path / "ckpt"), BertForMultipleChoice,
                            lambda m: m.classifier.weight.fill_(0.3))
        data = ["--data-dir", write_swag(str(tmp_path / "swag"), n_train=16, n_dev=8)]
    got = {}
    for name, folder in (("plain", tiny_bert_dir), ("trained", trained)):
        out = tmp_path / name
        assert ft.main([task, "1e-3", "--model", folder, *data, "--batch-size", "8", "--epochs", "1",
                        "--results-dir", str(out), "--device", "cpu"]) == 0
        (name_json,) = [n for n in os.listdir(out) if n.endswith(".json")]
        got[name] = json.loads((out / name_json).read_text()), (out / name_json.replace(".json", ".log")).read_text()
    assert numbers(got["trained"][0]) == numbers(got["plain"][0])
    layer = "new start and end vectors S, E" if task == "squad" else "a new vector w"
    assert f"; {layer} (the checkpoint's own left out; --head checkpoint keeps it)\n" in got["trained"][1]


def test_the_heads_script_takes_a_new_layer_where_the_checkpoints_has_another_size(tiny_sst2_dir, tmp_path):
    """A 2-label classifier under the article's K = 3: a new, seeded layer, said with the file's shape and the one the
    check needs (SWAG's w and the span head, which an SST-2 classifier lacks, are new too); the checks hold."""
    out = str(tmp_path / "r")
    assert heads.main(["--model", tiny_sst2_dir, "--results-dir", out, "--device", "cpu"]) == 0
    r = json.loads(open(os.path.join(out, "part4_heads.json")).read())
    log = open(os.path.join(out, "part4_heads.log")).read()
    assert r["glue"]["fresh_head"] and r["glue"]["K"] == 3 and r["glue"]["max_logit_gap"] < 1e-4
    assert ("W is a new, random layer (seed 0; the checkpoint's task head has another shape (classifier.weight: (2, 32) "
            "in the file, (3, 32) for the task)); its bias is a seeded draw too") in log
    assert log.splitlines()[1] == "model weights: model.safetensors (fp32)"


# --- the weight file loaded: named in the log and the results, the only one the fingerprint covers ---

def test_the_weight_file_loaded_is_named_and_alone_fingerprinted(tiny_bert_dir, tmp_path, monkeypatch):
    """A pytorch_model.bin beside the model.safetensors that transformers loads changes neither the numbers nor the
    fingerprint; a folder with the .bin alone gives the same numbers, and says so."""
    both = edited_config(tiny_bert_dir, str(tmp_path / "both"))
    alone = fingerprint(both)
    torch.manual_seed(9)
    torch.save(transformers.BertModel(transformers.BertConfig.from_pretrained(both)).state_dict(),
               os.path.join(both, "pytorch_model.bin"))              # other weights, not loaded
    only_bin = as_bin(edited_config(tiny_bert_dir, str(tmp_path / "bin")))
    monkeypatch.chdir(tmp_path / "bin")                               # the folders lie outside it: recorded by fingerprint
    before = fingerprint(both)
    cut(os.path.join(both, "pytorch_model.bin"), keep=0.9)
    assert fingerprint(both) == before == alone
    got = {}
    for name, folder in (("both", both), ("bin", only_bin)):
        out = str(tmp_path / f"r_{name}")
        assert heads.main(["--model", folder, "--results-dir", out, "--device", "cpu"]) == 0
        got[name] = json.loads(open(os.path.join(out, "part4_heads.json")).read()), \
            open(os.path.join(out, "part4_heads.log")).read().splitlines()
    assert got["both"][0]["glue"]["logits_library"] == got["bin"][0]["glue"]["logits_library"]
    assert got["both"][1][1] == "model weights: model.safetensors (fp32)" and got["both"][0]["model"] == f"both@{before}"
    assert got["bin"][1][1] == "model weights: pytorch_model.bin (fp32)"
    recorded = got["bin"][0]["weights"]
    assert {k: recorded[k] for k in ("weight_files", "saved_in", "loaded_in")} == {
        "weight_files": ["pytorch_model.bin"], "saved_in": "fp32", "loaded_in": "fp32"}
    assert recorded["sha256"] == {"pytorch_model.bin": hashlib.sha256(
        open(os.path.join(only_bin, "pytorch_model.bin"), "rb").read()).hexdigest()}     # the file it loaded, read whole
    state = torch.load(os.path.join(only_bin, "pytorch_model.bin"), weights_only=True)
    assert recorded["architecture"]["parameters"] == sum(t.numel() for t in state.values())


def short_run(script, folder, tmp_path, out):
    """(main, argv, results name, what it computed) of a short run of one script on a model folder."""
    flags = ["--results-dir", str(out), "--device", "cpu"]
    if script == "finetune":
        glue = write_sst2(str(tmp_path / "glue"), n_train=16, n_dev=8)
        return (ft.main, sst2_argv(folder, glue, out, ["1e-3", "--batch-size", "8", "--epochs", "1", "--evals", "1"]),
                "part4_sst2_lr1e-3_bs8_ep1", numbers)
    if script == "squad":
        return (sq.main, ["--v1-model", folder, "--v1-data", squad_file(tmp_path / "v1.json", False), "--only", "v1",
                          "--max-len", "48", "--stride", "16", *flags], "part4_squad",
                lambda r: (r["v1_dev"]["em"], r["v1_dev"]["f1"], r["v1_dev"]["windows"]))
    return heads.main, ["--model", folder, *flags], "part4_heads", lambda r: (r["glue"], r["swag"], r["span"])


@pytest.mark.parametrize("script", ["finetune", "squad", "heads"])
def test_each_script_loads_a_bf16_file_in_fp32_and_names_the_one_file_it_loaded(script, tiny_bert_dir, tiny_qa_dir,
                                                                                 tmp_path, monkeypatch):
    """A checkpoint saved in bf16, with other weights in a pytorch_model.bin beside the model.safetensors transformers
    loads: each script computes what it computes on the same weights saved in fp32, says in one line the file it loaded
    and the dtype that file holds, records both, and its fingerprint covers that file alone."""
    source, model_class = (tiny_qa_dir, BertForQuestionAnswering) if script == "squad" else (tiny_bert_dir,
                                                                                          transformers.BertModel)
    bf16 = saved_as(source, str(tmp_path / "bf16"), model_class, torch.bfloat16)
    twin = saved_as(bf16, str(tmp_path / "twin"), model_class, torch.float32)
    loaded_alone = fingerprint(bf16)
    torch.manual_seed(9)
    torch.save(model_class(transformers.BertConfig.from_pretrained(bf16)).state_dict(),
               os.path.join(bf16, "pytorch_model.bin"))             # other weights, not loaded
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")                       # the folders lie outside it: recorded by fingerprint
    got = {}
    for name, folder in (("bf16", bf16), ("twin", twin)):
        out = tmp_path / f"r_{name}"
        main, argv, results, computed = short_run(script, folder, tmp_path, out)
        assert main(argv) == 0
        r = json.loads((out / f"{results}.json").read_text())
        got[name] = computed(r), r, (out / f"{results}.log").read_text()
    assert got["bf16"][0] == got["twin"][0]
    r, log = got["bf16"][1:]
    assert "model weights: model.safetensors, saved in bf16: loaded in fp32" in log and "pytorch_model.bin" not in log
    weights = r["models"]["v1"] if script == "squad" else r["weights"]
    assert (weights["weight_files"], weights["saved_in"], weights["loaded_in"]) == (["model.safetensors"], "bf16", "fp32")
    recorded = r["run"]["config"]["v1_model"] if script == "squad" else r["model"]
    assert recorded == f"bf16@{loaded_alone}"


def test_a_tokenizer_that_lower_cases_a_cased_vocabulary_is_a_warning_line(tiny_bert_dir, tmp_path):
    folder = edited_config(tiny_bert_dir, str(tmp_path / "cased"))
    vocab = write_vocab(folder)
    with open(vocab, "a") as f:
        f.write("".join(w.capitalize() + "\n" for w in tiny_vocab_words() if w.isalpha() and len(w) > 3))
    BertTokenizer(vocab=vocab).save_pretrained(folder)
    edit_json(os.path.join(folder, "config.json"), vocab_size=len(open(vocab).read().split()))
    model = transformers.BertModel(transformers.BertConfig.from_pretrained(folder))
    model.save_pretrained(folder)
    out = str(tmp_path / "r")
    assert heads.main(["--model", folder, "--results-dir", out, "--device", "cpu"]) == 0
    assert open(os.path.join(out, "part4_heads.log")).read().splitlines()[2] == (
        f"warning: the tokenizer lower-cases every text, but its vocabulary is cased: 0 of the 8 words of the probe "
        f"sentence \"{loading.PROBE}\" become [UNK] (0%)")


def test_a_hub_id_in_the_local_cache_is_read_as_a_folder_is(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    """A Hub id is read where the Hub's cache keeps it (its snapshot): the weight file named, a cut one refused."""
    repo, commit = tmp_path / "hub" / "models--someone--tiny-bert", "a" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = edited_config(tiny_bert_dir, str(repo / "snapshots" / commit))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(loading, "hub_reachable", lambda timeout=3.0: False)
    assert loading.local_folder("someone/tiny-bert") == snapshot
    line = loading.weights_line(loading.read_model_folder("someone/tiny-bert"))
    assert line == "model weights: model.safetensors (fp32)"
    cut(os.path.join(snapshot, "model.safetensors"))
    out = tmp_path / "r"
    err = refused_before_any_line(heads.main, ["--model", "someone/tiny-bert", "--results-dir", str(out), "--device",
                                               "cpu"], capsys, out)
    assert err.startswith("error: --model someone/tiny-bert: model.safetensors is truncated or corrupt (")
