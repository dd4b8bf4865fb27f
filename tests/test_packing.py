"""Padding-free steps (part4/packing.py): packed against padded on tiny models, every head family, then main()."""

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config
from test_finetune import write_sst2
from transformers import BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification

import bert_part4_finetune as ft
from part4 import families, packing
from part4.batches import collate
from part4.devices import has_fused_adamw

CPU = torch.device("cpu")
LENGTHS = [1, 13, 4, 9, 2, 13, 6, 3]       # a length-1 input, two at the batch's longest
FUSED_CPU = tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 4)   # AdamW(fused=True) on the CPU
needs_fused_cpu_adamw = pytest.mark.skipif(
    not FUSED_CPU, reason=f"torch {torch.__version__} has no fused AdamW on the CPU (torch 2.4 has); the code falls back")


def encoded(lengths, seed, targets):
    """An encoded set as the tasks make one: token ids, two segments, and the targets of the head family."""
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(5, 90, (n,), generator=g).tolist() for n in lengths]
    enc = {"input_ids": ids, "token_type_ids": [[0] * (n // 2) + [1] * (n - n // 2) for n in lengths], "targets": targets}
    for key in targets:             # SQuAD's start and end: a token of the window's own (the length-1 one: [CLS])
        enc[key] = [int(torch.randint(0, 4 if key == "labels" else n, (1,), generator=g)) for n in lengths]
    return enc


def family_batch(kind, labels=2):
    """A padded batch of LENGTHS for a head family (SWAG: two examples of four choices), and its model and loss."""
    if kind == "multiple_choice":
        enc = encoded(LENGTHS, 0, ("labels",))
        enc = {"input_ids": [enc["input_ids"][:4], enc["input_ids"][4:]], "targets": ("labels",), "labels": [1, 3],
               "token_type_ids": [enc["token_type_ids"][:4], enc["token_type_ids"][4:]]}
        return collate(enc, [0, 1], CPU), BertForMultipleChoice, {}, families.MultipleChoice.loss
    if kind == "span":
        enc = encoded(LENGTHS, 0, ("start_positions", "end_positions"))
        return collate(enc, range(len(LENGTHS)), CPU), BertForQuestionAnswering, {}, families.SpanExtraction.loss
    enc = encoded(LENGTHS, 0, ("labels",))
    enc["labels"] = [y % 2 for y in enc["labels"]] if labels > 1 else [y * 1.25 for y in enc["labels"]]   # STS-B: 1
    return (collate(enc, range(len(LENGTHS)), CPU), BertForSequenceClassification, {"num_labels": labels},
            families.Classification.loss)


FAMILIES = [("classification", 2), ("classification", 1), ("multiple_choice", 2), ("span", 2)]


def pair(model_class, kwargs, dropout):
    torch.manual_seed(1)
    padded = model_class(tiny_config(100, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, **kwargs))
    return padded.train(), packing.padding_free(copy.deepcopy(padded)).train()


def outputs(out):
    return out.logits if hasattr(out, "logits") else torch.stack([out.start_logits, out.end_logits])


@pytest.mark.parametrize("kind, labels", FAMILIES)
def test_packed_outputs_loss_and_gradients_equal_the_padded(kind, labels):
    batch, model_class, kwargs, loss_fn = family_batch(kind, labels)
    padded, packed = pair(model_class, kwargs, 0.0)       # no dropout: what eval mode computes, through the packed path
    a, b = (model(**{k: v for k, v in batch.items() if k not in ("start_positions", "end_positions")})
            for model in (padded, packed))
    real = batch["attention_mask"].bool().view(-1, batch["attention_mask"].shape[-1])
    if kind == "span":       # S.T_i, E.T_j at the real tokens; padding's scores are never used (masked in SpanExtraction.loss)
        assert (outputs(a) - outputs(b)).abs()[:, real].max() < 1e-5
        assert (outputs(a) - outputs(b)).abs()[:, ~real].min() > 0       # they do differ there: the check means something
    else:
        assert (outputs(a) - outputs(b)).abs().max() < 1e-5
    la, lb = loss_fn(padded, batch), loss_fn(packed, batch)
    assert abs(la.item() - lb.item()) < 1e-5
    la.backward(), lb.backward()
    worst = max((p.grad - q.grad).abs().max().item() for p, q in zip(padded.parameters(), packed.parameters()))
    assert worst < 1e-5
    assert all(p.grad is not None for p in packed.parameters())        # every weight is trained, as DDP needs


def recipe_step(model, batch, *, opt, sched, loss_fn):
    """The step of bert_part4_finetune.py's loop: forward, loss, backward, clip at 1.0, AdamW, schedule."""
    loss = loss_fn(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad()
    return loss.item()


@pytest.mark.parametrize("kind, labels", FAMILIES)
def test_five_training_steps_with_dropout_are_the_padded_steps(kind, labels):
    batch, model_class, kwargs, loss_fn = family_batch(kind, labels)
    padded, packed = pair(model_class, kwargs, 0.1)
    losses = {}
    for name, model in (("padded", padded), ("packed", packed)):
        opt = torch.optim.AdamW(ft.decay_groups(model, 0.01), lr=1e-3, weight_decay=0.01, fused=FUSED_CPU)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        torch.manual_seed(5)
        losses[name] = [recipe_step(model, batch, opt=opt, sched=sched, loss_fn=loss_fn) for _ in range(5)]
        losses[name + " rng"] = torch.get_rng_state()
    assert max(abs(x - y) for x, y in zip(losses["padded"], losses["packed"])) < 1e-5
    assert len(set(losses["padded"])) == 5                                       # dropout changes every step's loss
    assert torch.equal(losses["padded rng"], losses["packed rng"])               # the same draws, in the same number


def test_a_packed_model_in_eval_mode_is_the_padded_model():
    batch, model_class, kwargs, _ = family_batch("classification")
    padded, packed = pair(model_class, kwargs, 0.1)
    padded.eval(), packed.eval()
    assert torch.equal(padded(**batch).logits, packed(**batch).logits)         # evaluation stays padded
    bert = packed.bert                                                         # the packed forward itself, in eval mode
    T = packing.packed_bert(bert, batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    ref = padded.bert(**{k: v for k, v in batch.items() if k != "labels"})
    real = batch["attention_mask"].bool()
    assert (T.last_hidden_state - ref.last_hidden_state)[real].abs().max() < 1e-5
    assert (T.last_hidden_state[~real] == 0).all()
    assert (T.pooler_output - ref.pooler_output).abs().max() < 1e-5
    assert packed.state_dict().keys() == padded.state_dict().keys()


def test_the_hidden_dropout_keeps_the_padded_masks_rows():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    pack = packing.Packing.of(mask)
    x = torch.randn(3, 4, 6)
    torch.manual_seed(3)
    padded = F.dropout(x, 0.3, True)
    torch.manual_seed(3)
    packed = pack.dropout(pack.pack(x), 0.3, True)
    assert pack.index.tolist() == [0, 1, 2, 4, 8, 9, 10, 11]
    assert torch.equal(packed, padded.flatten(0, 1)[pack.index])
    assert torch.equal(pack.unpack(packed)[mask.bool()], packed) and (pack.unpack(packed)[~mask.bool()] == 0).all()
    assert torch.equal(pack.dropout(x, 0.3, False), x)


def test_has_fused_adamw_says_whether_torch_has_the_kernel():
    assert has_fused_adamw(torch.device("cuda")) and not has_fused_adamw(torch.device("meta"))
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    try:                        # torch before 2.4 refuses a CPU tensor: "fused=True requires ... devices: ['cuda']"
        torch.optim.AdamW([p], fused=True).step()
        works = True
    except RuntimeError:
        works = False
    assert has_fused_adamw(CPU) == works == FUSED_CPU


@needs_fused_cpu_adamw
def test_fused_adamw_is_adamw_up_to_rounding():
    torch.manual_seed(0)
    weights = [torch.randn(40, 30), torch.randn(30)]
    steps = {}
    for fused in (False, True):
        params = [torch.nn.Parameter(w.clone()) for w in weights]
        opt = torch.optim.AdamW([{"params": params[:1], "weight_decay": 0.01}, {"params": params[1:], "weight_decay": 0.0}],
                                lr=1e-2, fused=fused)
        for k in range(5):
            for p in params:
                p.grad = torch.sin(p.detach() * (k + 1))
            opt.step()
        steps[fused] = params
    (a, b), (c, d) = steps.values()
    assert 0 < (a - c).abs().max() + (b - d).abs().max() < 1e-5


# --- main(): the same run with or without padding, with or without the fused kernel ---

def run_twice(tmp_path, argv, name):
    """The same command padded with the unfused AdamW (today's computation), then with the defaults in the same
    results folder: a result of either computation is a result of the same settings, rewritten, never refused."""
    out = {}
    for way, extra in (("padded", ["--padding-free", "off", "--fused-adamw", "off"]), ("free", [])):
        assert ft.main([*argv, "--results-dir", str(tmp_path), "--device", "cpu", *extra]) == 0
        out[way] = json.loads((tmp_path / f"{name}.json").read_text())
        out[way + " log"] = (tmp_path / f"{name}.log").read_text()
    return out


def test_a_padding_free_run_is_the_padded_run(tiny_bert_dir, tmp_path):
    glue = write_sst2(str(tmp_path / "glue"), n_train=40, n_dev=24)
    out = run_twice(tmp_path / "r", ["sst2", "1e-3", "--model", tiny_bert_dir, "--data-dir", glue, "--batch-size", "8",
                                     "--epochs", "1", "--evals", "5"], "part4_sst2_lr1e-3_bs8_ep1")
    a, b = out["padded"], out["free"]
    assert a["settings"] == b["settings"] and "padding_free" not in a["settings"]
    assert len(a["curve"]) == 5 and len({c["train_loss"] for c in a["curve"]}) == 5      # 5 steps, every one a point
    for x, y in zip(a["curve"], b["curve"], strict=True):
        assert y["train_loss"] == pytest.approx(x["train_loss"], rel=1e-4)
        assert y["dev"]["dev"]["accuracy"] == pytest.approx(x["dev"]["dev"]["accuracy"], rel=1e-4)
    assert a["computation"] == {"padding_free": False, "fused_adamw": False}
    assert b["computation"] == {"padding_free": True, "fused_adamw": has_fused_adamw(CPU)}
    assert "(also: AdamW, clip 1.0" in out["padded log"] and ", dynamic padding" in out["padded log"]
    assert "padding-free steps (every layer but attention on the real tokens only)" in out["free log"]
