"""Padding-free steps (part4/data/batches.py): packed against padded on tiny models, every head family, then main()."""

import copy
import json
import os
import sys
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT, save_tiny, tiny_config
from test_finetune import write_sst2
from transformers import BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification, BertTokenizer

import bert_part4_finetune as ft
from part4.data import batches, readers
from part4.data.batches import collate, epoch_batches, to_device
from part4.models.loading import ALONE, has_fused_adamw
from part4.run import training_run
from part4.tasks import families, squad_spans

CPU = torch.device("cpu")
META = torch.device("meta")
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


def family_batch(kind, labels=2, multiple=1):
    """A padded batch of LENGTHS for a head family (SWAG: two examples of four choices), and its model and loss
    (multiple: its width rounded up to a multiple of it)."""
    if kind == "multiple_choice":
        enc = encoded(LENGTHS, 0, ("labels",))
        enc = {"input_ids": [enc["input_ids"][:4], enc["input_ids"][4:]], "targets": ("labels",), "labels": [1, 3],
               "token_type_ids": [enc["token_type_ids"][:4], enc["token_type_ids"][4:]]}
        return collate(enc, [0, 1], CPU, multiple=multiple), BertForMultipleChoice, {}, families.MultipleChoice.loss
    if kind == "span":
        enc = encoded(LENGTHS, 0, ("start_positions", "end_positions"))
        return (collate(enc, range(len(LENGTHS)), CPU, multiple=multiple), BertForQuestionAnswering, {},
                squad_spans.SpanExtraction.loss)
    enc = encoded(LENGTHS, 0, ("labels",))
    enc["labels"] = [y % 2 for y in enc["labels"]] if labels > 1 else [y * 1.25 for y in enc["labels"]]   # STS-B: 1
    return (collate(enc, range(len(LENGTHS)), CPU, multiple=multiple), BertForSequenceClassification,
            {"num_labels": labels}, families.Classification.loss)


FAMILIES = [("classification", 2), ("classification", 1), ("multiple_choice", 2), ("span", 2)]


def pair(model_class, kwargs, dropout):
    torch.manual_seed(1)
    padded = model_class(tiny_config(100, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, **kwargs))
    return padded.train(), batches.make_padding_free(copy.deepcopy(padded)).train()


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


@pytest.mark.slow
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
    T = batches.packed_bert(bert, batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    ref = padded.bert(**{k: v for k, v in batch.items() if k != "labels"})
    real = batch["attention_mask"].bool()
    assert (T.last_hidden_state - ref.last_hidden_state)[real].abs().max() < 1e-5
    assert (T.last_hidden_state[~real] == 0).all()
    assert (T.pooler_output - ref.pooler_output).abs().max() < 1e-5
    assert packed.state_dict().keys() == padded.state_dict().keys()


def test_the_hidden_dropout_keeps_the_padded_masks_rows():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    keep = mask.bool()
    pack = batches.Packing(batches.real_token_index(keep), tuple(mask.shape), keep[:, None, None, :],
                           mask_draw=batches.MASKS_PADDED)
    x = torch.randn(3, 4, 6)
    torch.manual_seed(3)
    padded = F.dropout(x, 0.3, True)
    torch.manual_seed(3)
    packed = pack.dropout(pack.pack(x), 0.3, True)
    assert pack.index.tolist() == [0, 1, 2, 4, 8, 9, 10, 11]
    assert torch.equal(packed, padded.flatten(0, 1)[pack.index])
    assert torch.equal(pack.unpack(packed)[mask.bool()], packed) and (pack.unpack(packed)[~mask.bool()] == 0).all()
    assert torch.equal(pack.dropout(x, 0.3, False), x)


# --- bf16 on the CPU: masks at the packed shape from 15-bit draws, attention written out, hidden states in bf16 ---

@pytest.mark.parametrize("p", [0.1, 0.5])
def test_a_15_bit_mask_keeps_one_minus_p_and_its_two_halves_are_independent(p):
    torch.manual_seed(0)
    n = 1 << 21
    keep = batches.keep_mask((n,), p, CPU)
    assert keep.dtype == torch.bool and keep.shape == (n,)
    rate = round((1 - p) * 2 ** 15) / 2 ** 15                  # 1 - p to 15 bits: 0.899994 for p 0.1
    sigma = (rate * (1 - rate) / n) ** 0.5
    assert abs(keep.float().mean().item() - rate) < 5 * sigma
    even, odd = keep[0::2].float(), keep[1::2].float()        # the two halves of one call of the generator
    both = (even * odd).mean().item()
    assert abs(both - even.mean().item() * odd.mean().item()) < 5 * (rate * (1 - rate) / (n // 2)) ** 0.5
    torch.manual_seed(0)
    assert torch.equal(batches.keep_mask((n,), p, CPU), keep)      # the seeded generator's draw: a resumed run's too
    x = torch.ones(1000)
    values = batches.dropped(x, p).unique()
    assert values.tolist() == [0.0, pytest.approx(1 / (1 - p))]       # dropped, or kept and scaled by 1 / (1 - p)


def test_the_written_out_attention_is_scaled_dot_product_attention(monkeypatch):
    torch.manual_seed(2)
    attn = tiny_bert_layer_attention(dropout=0.25)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    keep = mask.bool()
    pack = batches.Packing(batches.real_token_index(keep), tuple(mask.shape), keep[:, None, None, :],
                           mask_draw=batches.MASKS_BF16)
    x = torch.randn(int(mask.sum()), attn.query.in_features)
    monkeypatch.setattr(batches, "keep_mask", lambda shape, p, device: torch.ones(shape, dtype=torch.bool))
    written = batches.packed_attention(attn, x, pack)               # every element kept: scaled by 1 / (1 - p)
    attn.eval()
    sdpa = batches.packed_attention(attn, x, pack)                  # dropout off: scaled_dot_product_attention's branch
    assert (written - sdpa / (1 - 0.25)).abs().max() < 1e-5
    monkeypatch.setattr(batches, "keep_mask", lambda shape, p, device: torch.zeros(shape, dtype=torch.bool))
    attn.train()
    assert (batches.packed_attention(attn, x, pack) == 0).all()     # every element dropped: the mask is applied


def tiny_bert_layer_attention(dropout):
    from transformers import BertModel
    return BertModel(tiny_config(100, attention_probs_dropout_prob=dropout)).encoder.layer[0].attention.self.train()


@pytest.mark.slow
@pytest.mark.parametrize("kind, labels", FAMILIES)
def test_a_bf16_padding_free_step_is_as_near_fp32_as_the_padded_bf16_step(kind, labels):
    """bf16 rounding only: the padding-free bf16 step (hidden states kept in bf16) is as far from the fp32 step, in
    its loss and its whole gradient, as autocast's padded bf16 step is (within a factor 2; here 1.0 to 1.4)."""
    batch, model_class, kwargs, loss_fn = family_batch(kind, labels)
    torch.manual_seed(1)
    fp32 = model_class(tiny_config(100, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kwargs)).train()
    padded, packed = copy.deepcopy(fp32), batches.make_padding_free(copy.deepcopy(fp32), batches.MASKS_BF16)
    losses, grads = {}, {}
    for name, model in (("fp32", fp32), ("padded", padded), ("packed", packed)):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name != "fp32"):
            loss = loss_fn(model, batch)
        loss.backward()
        losses[name], grads[name] = loss.item(), torch.cat([p.grad.flatten() for p in model.parameters()])
    off = {name: (grads[name] - grads["fp32"]).norm() / grads["fp32"].norm() for name in ("padded", "packed")}
    assert 0 < off["padded"] < 0.05 and 0 < off["packed"] <= 2 * off["padded"]
    assert abs(losses["packed"] - losses["fp32"]) <= 2 * abs(losses["padded"] - losses["fp32"]) + 1e-2 * losses["fp32"]
    with torch.autocast("cpu", dtype=torch.bfloat16):                 # the hidden states in bf16: not autocast's fp32
        flat = {k: batch[k].flatten(0, -2) for k in ("input_ids", "attention_mask", "token_type_ids")}
        T = batches.packed_bert(packed.base_model, **flat, mask_draw=batches.MASKS_BF16).last_hidden_state
    assert T.dtype == torch.bfloat16


def test_which_masks_a_device_and_dtype_draw():
    assert batches.dropout_masks(CPU, None) == batches.MASKS_PADDED            # fp32 on the CPU: the padded run's
    assert batches.dropout_masks(CPU, torch.bfloat16) == batches.MASKS_BF16
    assert batches.dropout_masks(torch.device("cuda"), torch.bfloat16) == batches.MASKS_PACKED   # fused kernels
    assert batches.dropout_masks(torch.device("mps"), None) == batches.MASKS_PACKED


@pytest.mark.slow
def test_a_bf16_run_records_its_masks_and_a_cpu_without_bf16_says_it_is_slow(tiny_bert_dir, tmp_path, monkeypatch):
    glue = write_sst2(str(tmp_path / "glue"), n_train=40, n_dev=24)
    argv = ["sst2", "1e-3", "--model", tiny_bert_dir, "--data-dir", glue, "--batch-size", "8", "--epochs", "1",
            "--evals", "2", "--device", "cpu"]
    from part4.models import loading
    monkeypatch.setattr(loading, "native_bf16", lambda device: False)       # a CPU without AVX-512-BF16 or AMX
    assert ft.main([*argv, "--dtype", "bf16", "--results-dir", str(tmp_path / "bf16")]) == 0
    assert ft.main([*argv, "--results-dir", str(tmp_path / "fp32")]) == 0
    name = "part4_sst2_lr1e-3_bs8_ep1"
    bf16, fp32 = (json.loads((tmp_path / d / f"{name}.json").read_text()) for d in ("bf16", "fp32"))
    assert bf16["settings"]["dtype"] == "bf16" and fp32["settings"]["dtype"] == "fp32"
    assert bf16["computation"]["dropout_masks"] == batches.MASKS_BF16
    assert fp32["computation"]["dropout_masks"] == batches.MASKS_PADDED
    assert bf16["curve"][-1]["train_loss"] != fp32["curve"][-1]["train_loss"]        # another computation, other masks
    log = (tmp_path / "bf16" / f"{name}.log").read_text()
    assert "autocast bf16, padding-free steps (every layer but attention on the real tokens only; dropout masks: " \
           "packed shape, 15-bit draws)" in log
    assert "without native bf16 (no AMX or AVX-512-BF16): emulated, likely slower than fp32" in log
    assert "native bf16" not in (tmp_path / "fp32" / f"{name}.log").read_text()


def test_native_bf16_reads_what_the_cpu_says_of_itself():
    flags = set()
    if os.path.isfile("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            flags = {w for line in f if line.startswith(("flags", "Features")) for w in line.split()}
    if not flags:
        pytest.skip("no /proc/cpuinfo flags here to compare with")
    from part4.models.loading import native_bf16
    assert native_bf16(CPU) == bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    assert native_bf16(torch.device("mps")) is False


# --- the levers of a CUDA step (batch widths, what the host waits for, attention's kernels), on the CPU and meta ---

def loss_and_gradients(model, batch, loss_fn):
    model.zero_grad()
    loss = loss_fn(model, batch)
    loss.backward()
    return loss.item(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("kind, labels", FAMILIES)
@pytest.mark.parametrize("free", [False, True], ids=["padded", "padding-free"])
def test_rounded_widths_give_the_same_losses_without_dropout(kind, labels, free):
    """A batch padded to a multiple of 8 (13 -> 16 tokens) rather than to its longest input, dropout off: its loss and
    every gradient are those of today's batch up to float rounding (attention is masked; SQuAD's softmax leaves the
    padding out). With dropout the masks drawn at the padded shape fall otherwise: why the CPU keeps its widths."""
    batch, model_class, kwargs, loss_fn = family_batch(kind, labels)
    wide = family_batch(kind, labels, multiple=8)[0]
    assert batch["input_ids"].shape[-1] == 13 and wide["input_ids"].shape[-1] == 16
    model = pair(model_class, kwargs, 0.0)[free]
    (la, ga), (lb, gb) = (loss_and_gradients(model, b, loss_fn) for b in (batch, wide))
    assert abs(la - lb) < 1e-5 and max((g - h).abs().max().item() for g, h in zip(ga, gb)) < 1e-5
    dropped = pair(model_class, kwargs, 0.1)[free]
    drawn = []
    for b in (batch, wide):
        torch.manual_seed(5)
        drawn.append(loss_and_gradients(dropped, b, loss_fn)[0])
    assert abs(drawn[0] - drawn[1]) > 1e-4


def test_an_epoch_makes_far_fewer_distinct_widths_rounded():
    """One epoch of the paper's random batches of 32 over 3,000 rows of 3 to 66 tokens, most short (as SST-2's
    sentences): the widths collate pads them to, each batch's longest (today's) or that rounded up to a multiple of
    8 or 16, against a brute force over the rows' lengths, and how many distinct widths each makes."""
    g = torch.Generator().manual_seed(0)
    lengths = [min(66, 3 + int(x)) for x in torch.empty(3000).exponential_(1 / 14, generator=g).tolist()]
    enc = {"input_ids": [[7] * n for n in lengths], "targets": ()}
    epoch = epoch_batches(len(lengths), 32, 1, seed=0)[0]
    longest = [max(lengths[i] for i in idx) for idx in epoch]
    widths = {m: [collate(enc, idx, CPU, multiple=m, max_width=128)["input_ids"].shape[1] for idx in epoch]
              for m in (1, 8, 16)}
    assert widths[1] == longest
    for m in (8, 16):
        assert widths[m] == [-(-n // m) * m for n in longest]                  # the longest, rounded up to m
    distinct = {m: len(set(w)) for m, w in widths.items()}
    assert distinct[16] <= -(-66 // 16) and distinct[8] <= -(-66 // 8)         # at most one per multiple in range
    assert distinct[16] < distinct[8] < distinct[1] / 2, distinct


def test_the_width_count_counts_the_widths_collate_makes(tiny_bert_dir, tmp_path, capsys):
    """bench/batch_widths.py on a GLUE folder: its counts are those of the batches collate pads, the paper's random
    batches of the whole run, as TrainingRun makes them."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import batch_widths
    glue = write_sst2(str(tmp_path / "glue"), n_train=300, n_dev=4)
    batch_widths.main(["--task", "sst2", "--data-dir", glue, "--vocab", os.path.join(tiny_bert_dir, "vocab.txt"),
                       "--batch-size", "8", "--epochs", "2"])
    out = capsys.readouterr().out.splitlines()
    tok = BertTokenizer(vocab=os.path.join(tiny_bert_dir, "vocab.txt"))
    enc = families.encode_glue(tok, readers.read_split(glue, "sst2", "train"), 128)
    run_batches = [idx for epoch in epoch_batches(300, 8, 2, 0) for idx in epoch]
    assert out[0] == f"sst2: 300 rows, batch 8, 2 epoch(s) = {len(run_batches)} batches"
    for line, m in zip(out[1:], (1, 8, 16), strict=True):
        made = [collate(enc, idx, CPU, multiple=m, max_width=128)["input_ids"].shape[1] for idx in run_batches]
        assert line.split(": ")[1] == f"{len(set(made)):3d} distinct, mean {sum(made) / len(made):.1f} tokens"


def test_a_width_rounded_up_stops_at_the_longest_input_a_run_allows():
    enc = {"input_ids": [[7] * 125, [7] * 3], "targets": ()}
    assert collate(enc, [0, 1], CPU, multiple=8, max_width=128)["input_ids"].shape[1] == 128
    assert collate(enc, [0, 1], CPU, multiple=8, max_width=126)["input_ids"].shape[1] == 126
    assert collate(enc, [0, 1], CPU, multiple=16, max_width=120)["input_ids"].shape[1] == 125  # already past it


@pytest.mark.parametrize("kind, labels", FAMILIES)
def test_a_padding_free_step_reads_nothing_back_from_the_device(kind, labels):
    """The meta device stands in for a GPU: its tensors have shapes and no values, so whatever would make the host
    wait for a CUDA device to read a value back (nonzero, .item(), a tensor's truth) raises there. The recipe's
    whole step on a batch as TrainingRun sends it (made on the host, its real tokens found there): forward, loss,
    backward, clip, AdamW (unfused: the fused kernel has no meta implementation), the schedule, the loss kept and the
    decision to stop or save. The batch without its real tokens: the packing finds them on the device, and raises."""
    batch, model_class, kwargs, loss_fn = family_batch(kind, labels)
    model = pair(model_class, kwargs, 0.1)[1].to(META)
    opt = torch.optim.AdamW(ft.decay_groups(model, 0.01), lr=1e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: ft.warmup_then_linear_decay(s, 2, 10))
    sent = to_device(batches.with_real_tokens(batch), META)
    assert torch.equal(batches.with_real_tokens(batch)["real_tokens"],
                       batches.real_token_index(batch["attention_mask"].view(-1, 13).bool()))   # the index the step used to find
    loss = loss_fn(model, sent)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad()
    kept = loss.detach() / ALONE.world                                 # TrainingRun.step_done keeps it so
    alone = SimpleNamespace(run=SimpleNamespace(processes=ALONE, device=META), received=None, step=1, eval_every=1,
                            steps=10, saved_at=0.0, checkpoint_every=float("inf"))
    assert training_run.TrainingRun.stop_or_save(alone) == (False, False) and kept.device == META
    with pytest.raises(NotImplementedError, match="nonzero"):
        loss_fn(model, to_device(batch, META))


def test_the_attention_of_a_cuda_step_leaves_cudnn_out_and_the_cpu_as_it_is():
    """training_run.wrapped on CUDA with --cudnn-attention off: each call of the model runs with cuDNN's SDPA kernels disabled and
    the flash, memory-efficient and math ones enabled, then as before (evaluation calls the model itself). A device
    object stands for CUDA: nothing runs on it. On the CPU, and with cuDNN allowed, the model is called as it is."""
    names = ("cudnn", "flash", "mem_efficient", "math")

    def enabled():
        return {name: getattr(torch.backends.cuda, f"{name}_sdp_enabled")() for name in names}
    seen, before = [], enabled()

    def model(**batch):
        seen.append(enabled())
        return batch["x"] + 1
    cuda = torch.device("cuda")
    net = training_run.wrapped(model, ALONE, cuda, cudnn_attention=False)
    assert net(x=1) == 2 and seen == [{"cudnn": False, "flash": True, "mem_efficient": True, "math": True}]
    assert enabled() == before
    assert training_run.wrapped(model, ALONE, cuda, cudnn_attention=True) is model
    assert training_run.wrapped(model, ALONE, CPU, cudnn_attention=False) is model


def test_a_run_with_rounded_widths_is_the_run_without_dropout(tmp_path):
    """main() with --pad-to-multiple-of 8 on a model without dropout: every width rounded up to a multiple of 8,
    every train loss and dev score that of today's widths up to float rounding; the results record it as how the
    run was computed (not a setting), the log says it, and a flag with no effect on the CPU says so."""
    model = save_tiny(str(tmp_path / "nodrop"), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    glue = write_sst2(str(tmp_path / "glue"), n_train=64, n_dev=24)
    argv = ["sst2", "1e-3", "--model", model, "--data-dir", glue, "--batch-size", "8", "--epochs", "1", "--evals",
            "4", "--device", "cpu"]
    out, widths = {}, {}
    for way, extra in (("today", []), ("rounded", ["--pad-to-multiple-of", "8", "--cudnn-attention", "off"])):
        sent = []
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(training_run, "to_device", lambda batch, device: sent.append(batch["input_ids"].shape[1]) or batch)
            assert ft.main([*argv, "--results-dir", str(tmp_path / way), *extra]) == 0
        out[way] = json.loads((tmp_path / way / "part4_sst2_lr1e-3_bs8_ep1.json").read_text())
        out[way + " log"] = (tmp_path / way / "part4_sst2_lr1e-3_bs8_ep1.log").read_text()
        assert sent[0] == sent[1]                   # the cost line's timed step: the run's first batch, once more
        widths[way] = sent[1:]
    assert len(widths["today"]) == len(widths["rounded"]) == 8
    assert widths["rounded"] == [-(-w // 8) * 8 for w in widths["today"]] != widths["today"]
    assert len(set(widths["rounded"])) <= len(set(widths["today"]))
    a, b = out["today"], out["rounded"]
    assert a["settings"] == b["settings"]
    for x, y in zip(a["curve"], b["curve"], strict=True):
        assert y["train_loss"] == pytest.approx(x["train_loss"], rel=1e-5)
        assert y["dev"] == x["dev"]                                     # evaluation keeps its own widths
    assert a["computation"]["pad_to_multiple_of"] == 1 and b["computation"]["pad_to_multiple_of"] == 8
    assert ", widths rounded up to multiples of" not in out["today log"] and "cuDNN" not in out["today log"]
    assert (", widths rounded up to multiples of 8 tokens, --cudnn-attention has no effect on cpu: no cuDNN attention "
            "there") in out["rounded log"]


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
    cpu = {"pad_to_multiple_of": 1, "cudnn_attention": False}          # the CPU's: each batch its own width, no cuDNN
    assert a["computation"] == {"padding_free_steps": False, "fused_adamw": False, "dropout_masks": "the padded run's", **cpu}
    assert b["computation"] == {"padding_free_steps": True, "fused_adamw": has_fused_adamw(CPU),
                                "dropout_masks": "the padded run's", **cpu}
    assert "(also: AdamW, clip 1.0" in out["padded log"] and ", dynamic padding" in out["padded log"]
    assert "padding-free steps (every layer but attention on the real tokens only)" in out["free log"]
