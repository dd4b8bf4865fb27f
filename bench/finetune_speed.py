"""Benchmark: our fine-tuning loop against a plain loop, side by side in one run.

Ours (bert_part4_finetune.py): dynamic padding (each batch padded to its own longest input), plus
bf16 autocast and fused AdamW on CUDA. The plain loop: every batch padded to --max-len (the common
default), fp32, unfused AdamW. Same model, same data, same batches; the script prints training
steps/s for both and the ratio.

    python bench/finetune_speed.py --model path/to/bert --task sst2 --steps 30
    python bench/finetune_speed.py --random-base --task sst2        # BERT-base with random weights
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertTokenizer  # noqa: E402

import bert_part4_finetune as ft  # noqa: E402
from bert_part4_common import autocast_dtype, load_pretrained, pick_device  # noqa: E402

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def time_steps(model, enc, batches, device, dtype, fused, pad_to, lr=2e-5):
    """Seconds for len(batches) training steps (after 2 warm-up steps), and the mean batch width."""
    opt = torch.optim.AdamW(ft.decay_groups(model, 0.01), lr=lr, fused=fused)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: ft.warmup_then_linear_decay(s, 10, 1000))
    for idx in batches[:2]:
        ft.train_step(model, ft.collate(enc, idx, device, pad_to), opt, sched, 1.0, dtype)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0, widths = time.perf_counter(), []
    for idx in batches[2:]:
        batch = ft.collate(enc, idx, device, pad_to)
        widths.append(batch["input_ids"].shape[1])
        ft.train_step(model, batch, opt, sched, 1.0, dtype)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, sum(widths) / len(widths)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="pre-trained BERT folder or Hub id")
    p.add_argument("--random-base", action="store_true", help="a randomly initialised BERT-base (speed only)")
    p.add_argument("--vocab", default=os.path.join(SHARED, "bert-base-uncased", "vocab.txt"), help="vocab for --random-base")
    p.add_argument("--task", default="sst2")
    p.add_argument("--data-dir", default=os.path.join(SHARED, "glue_data"))
    p.add_argument("--steps", type=int, default=30, help="timed steps per loop")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-len", type=int, default=128)
    p.add_argument("--device", default="auto")
    args = p.parse_args(argv)
    device = pick_device(args.device)
    if args.random_base:
        tok, name = BertTokenizer(vocab=args.vocab), "random BERT-base (12 layers, H=768)"
        make = lambda: BertForSequenceClassification(BertConfig(num_labels=2))  # noqa: E731
    else:
        tok, name = load_pretrained(AutoTokenizer, args.model), args.model
        make = lambda: load_pretrained(BertForSequenceClassification, args.model, num_labels=2)  # noqa: E731
    train = ft.read_split(args.data_dir, args.task, "train")[:args.batch_size * (args.steps + 2)]
    enc = ft.encode(tok, train, args.max_len)
    batches = ft.epoch_batches(len(train), args.batch_size, 1, 0)[0][:args.steps + 2]
    dtype = autocast_dtype(device, "auto")
    print(f"model {name}; task {args.task}; device {device}; batch {args.batch_size}; {args.steps} timed steps; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    rows = []
    for label, pad_to, dt, fused in (("plain (pad to max length, fp32)", args.max_len, None, False),
                                     ("ours (dynamic padding" + (", bf16, fused AdamW)" if device.type == "cuda" else ")"),
                                      None, dtype, device.type == "cuda")):
        torch.manual_seed(0)
        seconds, width = time_steps(make().to(device).train(), enc, batches, device, dt, fused, pad_to)
        rows.append((label, args.steps / seconds, width))
        print(f"{label:>40}: {args.steps / seconds:7.2f} steps/s  (mean batch width {width:.0f} tokens)")
    print(f"speed-up (steps/s, ours / plain): {rows[1][1] / rows[0][1]:.2f}x")


if __name__ == "__main__":
    main()
