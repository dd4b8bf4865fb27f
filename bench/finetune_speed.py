"""Benchmark: our fine-tuning loop against a plain loop, side by side in one run.

Ours (bert_part4_finetune.py): dynamic padding (each batch padded to its own longest input), plus
bf16 autocast and fused AdamW on CUDA; for SQuAD also batches grouped by length, as the script does by
default. The plain loop: every batch padded to --max-len (the common default: 128, SQuAD 384), fp32,
unfused AdamW, random batches. Same model, same data; the script prints training steps/s for both
and the ratio.

    python bench/finetune_speed.py --model path/to/bert --task sst2 --steps 30
    python bench/finetune_speed.py --model path/to/bert --task squad --steps 20   # SQuAD v1.1 windows
    python bench/finetune_speed.py --random-base --task sst2        # BERT-base with random weights
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from transformers import (  # noqa: E402
    AutoTokenizer,
    BertConfig,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertTokenizer,
)

import bert_part4_finetune as ft  # noqa: E402
import bert_part4_squad as sq  # noqa: E402
import bert_part4_tasks as tasks  # noqa: E402
from bert_part4_common import ALONE, autocast_dtype, load_pretrained, pick_device  # noqa: E402
from bert_part4_runs import Run, collate, epoch_batches  # noqa: E402

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def add_model_flags(p, task):
    """The model and data flags both benchmarks share."""
    p.add_argument("--model", help="pre-trained BERT folder or Hub id")
    p.add_argument("--random-base", action="store_true", help="a randomly initialised BERT-base (speed only)")
    p.add_argument("--vocab", default=os.path.join(SHARED, "bert-base-uncased", "vocab.txt"), help="vocab for --random-base")
    p.add_argument("--task", default=task, help=f"a GLUE task with two labels (default {task})"
                                                  + ("; or squad" if task == "sst2" else ""))
    p.add_argument("--data-dir", default=os.path.join(SHARED, "glue_data"))


def tokenizer_and_models(args):
    """The tokenizer, the model's name, and make(model_class, **kwargs): a fresh model on every call."""
    if args.random_base:
        return (BertTokenizer(vocab=args.vocab), "random BERT-base (12 layers, H=768)",
                lambda model_class, **kw: model_class(BertConfig(**kw)))
    return (load_pretrained(AutoTokenizer, args.model), args.model,
            lambda model_class, **kw: load_pretrained(model_class, args.model, **kw))


def time_steps(model, enc, batches, device, dtype, fused, pad_to, loss_fn, lr=2e-5, team=ALONE):
    """Seconds for len(batches) - 2 training steps (after 2 warm-up steps), and the mean batch width: the
    recipe's AdamW groups, schedule (1000 steps, 10 of warmup) and train_step, and the Run that shares each batch under torchrun,
    as bert_part4_finetune.py uses them."""
    opt = torch.optim.AdamW(ft.decay_groups(model, 0.01), lr=lr, weight_decay=0.01, fused=fused)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: ft.warmup_then_linear_decay(s, 10, 1000))
    run = Run(team, device, None, None)
    trainer, widths = run.wrap(model), []
    for k, idx in enumerate(batches):
        if k == 2:                                    # two warm-up steps, then the clock
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        rows, weight = run.share(idx)
        batch = collate(enc, rows, device, pad_to)
        widths += [batch["input_ids"].shape[-1]] if k >= 2 else []
        ft.train_step(trainer, batch, opt, sched, 1.0, dtype, run.weighted(loss_fn, weight))
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, sum(widths) / len(widths)


def training_data(args, tok):
    """Encoded training rows, the loss, and the rows' lengths when ours groups batches by length."""
    if args.task == "squad":
        examples = sq.read_squad_json(args.squad_data, "1.1", "--squad-data")
        enc = sq.encode_squad(tok, examples, args.max_len or 384, 128)
        return enc, ft.span_loss, enc["full_lengths"], BertForQuestionAnswering, {}
    train = tasks.read_split(args.data_dir, args.task, "train")[:args.batch_size * (args.steps + 2)]
    return tasks.encode(tok, train, args.max_len or 128), ft.library_loss, None, BertForSequenceClassification, {"num_labels": 2}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_flags(p, "sst2")
    p.add_argument("--squad-data", default=os.path.join(SHARED, "squad", "offline-train-v1.1.json"),
                   help="SQuAD v1.1 JSON for --task squad")
    p.add_argument("--steps", type=int, default=30, help="timed steps per loop")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-len", type=int, help="the plain loop pads to this (default 128; SQuAD 384)")
    p.add_argument("--device", default="auto")
    args = p.parse_args(argv)
    device = pick_device(args.device)
    tok, name, make = tokenizer_and_models(args)
    enc, loss_fn, lengths, model_class, kwargs = training_data(args, tok)
    n = len(enc["input_ids"])
    plain = epoch_batches(n, args.batch_size, 1, 0)[0][:args.steps + 2]
    ours = epoch_batches(n, args.batch_size, 1, 0, lengths)[0][:args.steps + 2]
    pad_to = args.max_len or (384 if args.task == "squad" else 128)
    dtype = autocast_dtype(device, "auto")
    print(f"model {name}; task {args.task}; device {device}; batch {args.batch_size}; {args.steps} timed steps; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    rows = []
    for label, batches, pad, dt, fused in (
            (f"plain (pad to {pad_to}, fp32)", plain, pad_to, None, False),
            ("ours (dynamic padding" + (", grouped by length" if lengths else "")
             + (", bf16, fused AdamW)" if device.type == "cuda" else ")"), ours, None, dtype, device.type == "cuda")):
        torch.manual_seed(0)
        seconds, width = time_steps(make(model_class, **kwargs).to(device).train(), enc, batches, device, dt, fused, pad,
                                    loss_fn)
        rows.append((label, (len(batches) - 2) / seconds, width))
        print(f"{label:>45}: {rows[-1][1]:7.3f} steps/s  (mean batch width {width:.0f} tokens)")
    print(f"speed-up (steps/s, ours / plain): {rows[1][1] / rows[0][1]:.2f}x")


if __name__ == "__main__":
    main()
