"""Benchmark: padded steps, padding-free steps and Hugging Face's Trainer, side by side in one run.

The same model and the same rows of the paper's random batches (batch 32) for all three, each step the recipe's
(AdamW with its fused kernel where torch has one, for both of ours and for the Trainer, whose default it is; bf16
autocast on CUDA, fp32 elsewhere; with --dtype bf16 every way twice, in fp32 and in bf16, side by side, and the ratio
of each way's bf16 to its fp32: ours in bf16 as bert_part4_finetune.py --dtype bf16 runs it, its masks as
part4/data/batches.py's dropout_masks says):
  padded        bert_part4_finetune.py --padding-free off: each batch padded to its own longest input
  padding-free  bert_part4_finetune.py's default: every layer but attention on the real tokens only
  Trainer       transformers.Trainer with DataCollatorWithPadding (dynamic padding) on the same rows, in the same
                order (only when accelerate, which the Trainer needs, is installed: requirements-dev.txt)
For SQuAD (--task squad) also both of ours on batches grouped by length (--group-by-length on).

Fair to every way: each is warmed first (its timed batches run once, untimed: every kernel loaded, on CUDA every
shape's graphs built) before any is timed; then the ways take turns, round after round (--rounds: 2 by default on
CUDA, where a cold first round misreports, 1 on the CPU), the fastest round of each counting. Prints steps/s and real
(non-padding) tokens/s of each, its host time a step (the host's wall time per step, 1 / steps/s) and its device time
a step (CUDA: the GPU's kernels summed under torch.profiler, in one more pass over the same batches; on the CPU the
device is the host, so the two are the same), then the ratios. A step whose device time is far below its host time
is host-bound: the GPU waits for the host.

    python bench/finetune_speed.py --model path/to/bert --task sst2 --steps 30
    python bench/finetune_speed.py --model path/to/bert --task squad --steps 12   # SQuAD v1.1 windows
    python bench/finetune_speed.py --random-base --task sst2        # BERT-base with random weights
    python bench/finetune_speed.py --random-base --task sst2 --dtype bf16 --no-trainer   # fp32 and bf16 side by side
"""

import argparse
import importlib.util
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from transformers import (  # noqa: E402
    AutoTokenizer,
    BertConfig,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertTokenizer,
    DataCollatorWithPadding,
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

import bert_part4_finetune as ft  # noqa: E402
from part4.data import readers  # noqa: E402
from part4.data.batches import collate, dropout_masks, epoch_batches, make_padding_free  # noqa: E402
from part4.models.loading import (  # noqa: E402
    ALONE,
    DTYPE_NAMES,
    autocast,
    autocast_dtype,
    has_fused_adamw,
    load_pretrained,  # noqa: E402
    native_bf16,
    pick_device,
)
from part4.run.training_run import shard, wrapped  # noqa: E402
from part4.tasks import families, squad_spans  # noqa: E402

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


def time_steps(model, enc, batches, device, dtype, fused, *, loss_fn, pad_to=None, lr=2e-5, processes=ALONE):
    """Seconds for len(batches) - 2 training steps (after 2 warm-up steps), the mean batch width and the real tokens
    of the timed steps: the recipe's AdamW groups, schedule (1000 steps, 10 of warmup) and step, and each process's
    share of a batch and the DDP-wrapped model under torchrun (part4/run/training_run.py), as bert_part4_finetune.py
    uses them. Nothing in the loop waits for the device (the real tokens are counted on the host): only the clock's
    two ends do."""
    opt = torch.optim.AdamW(ft.decay_groups(model, 0.01), lr=lr, weight_decay=0.01, fused=fused)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: ft.warmup_then_linear_decay(s, 10, 1000))
    trainer, widths, tokens = wrapped(model, processes, device), [], 0
    for k, idx in enumerate(batches):
        if k == 2:                                    # two warm-up steps, then the clock
            synchronize(device)
            t0 = time.perf_counter()
        rows, weight = shard(idx, processes)
        batch = collate(enc, rows, device, pad_to)
        widths += [batch["input_ids"].shape[-1]] if k >= 2 else []
        tokens += sum(len(enc["input_ids"][i]) for i in rows) if k >= 2 else 0
        with autocast(device, dtype):                 # the step of bert_part4_finetune.py's loop
            loss = loss_fn(trainer, batch) * weight
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainer.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
    synchronize(device)
    return time.perf_counter() - t0, sum(widths) / len(widths), tokens


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def device_seconds(work, device):
    """The seconds the device computed during work(): on CUDA its kernels' times summed under torch.profiler (the GPU
    busy, not the wall time); None elsewhere (the device is the host)."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        work()
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages()) / 1e6


class StepClock(TrainerCallback):
    """The time at the end of every Trainer step."""

    def __init__(self, device):
        self.device, self.ends = device, []

    def on_step_end(self, args, state, control, **kwargs):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.ends.append(time.perf_counter())


def time_trainer(model, tok, enc, batches, device, dtype, lr=2e-5):
    """Seconds of the Trainer's steps 3.. on the same rows in the same order (sequential sampler over the rows of
    our batches), with DataCollatorWithPadding, the same learning rate, weight decay, clipping and 10 warmup steps."""
    keys = ["input_ids", "token_type_ids", *enc["targets"]]
    rows = [{k: enc[k][i] for k in keys} for idx in batches for i in idx]
    clock = StepClock(device)
    with tempfile.TemporaryDirectory() as out:
        targs = TrainingArguments(output_dir=out, per_device_train_batch_size=len(batches[0]), learning_rate=lr,
                                  weight_decay=0.01, max_grad_norm=1.0, warmup_steps=10, max_steps=len(batches),
                                  train_sampling_strategy="sequential", save_strategy="no", logging_strategy="no",
                                  report_to="none", disable_tqdm=True, use_cpu=device.type == "cpu",
                                  bf16=dtype == torch.bfloat16, remove_unused_columns=False, dataloader_pin_memory=False,
                                  seed=0)
        trainer = Trainer(model=model, args=targs, train_dataset=rows, data_collator=DataCollatorWithPadding(tok),
                          callbacks=[clock])
        trainer.remove_callback(PrinterCallback)             # its summary line is not one of ours
        trainer.train()
    tokens = sum(len(enc["input_ids"][i]) for idx in batches[2:] for i in idx)
    return clock.ends[-1] - clock.ends[1], tokens


def training_data(args, tok):
    """Encoded training rows, the loss, and the rows' lengths when ours groups batches by length."""
    if args.task == "squad":
        examples = readers.read_squad_json(args.squad_data, "1.1", "--squad-data")
        enc = squad_spans.encode_squad(tok, examples, args.max_len or 384, 128)
        return enc, squad_spans.SpanExtraction.loss, enc["full_lengths"], BertForQuestionAnswering, {}
    train = readers.read_split(args.data_dir, args.task, "train")[:args.batch_size * (args.steps + 2)]
    return (families.encode_glue(tok, train, args.max_len or 128), families.Classification.loss, None,
            BertForSequenceClassification, {"num_labels": 2})


def ways(lengths, n, batch_size, steps):
    """(label, batches, padding-free) of every way timed: the paper's random batches padded and padding-free; for
    SQuAD also both on batches grouped by length."""
    paper = epoch_batches(n, batch_size, 1, 0)[0][:steps + 2]
    if len(paper) < 3:
        sys.exit(f"{n} training rows make {len(paper)} batches of {batch_size}: at least 3 are needed (2 warm-up steps)")
    out = [("padded", paper, False), ("padding-free", paper, True)]
    if lengths is not None:
        grouped = epoch_batches(n, batch_size, 1, 0, lengths)[0][:steps + 2]
        out += [("padded, grouped by length", grouped, False), ("padding-free, grouped by length", grouped, True)]
    return out


def report(label, steps, seconds, tokens, width=None, device_s=None):
    """One way's line: steps/s (steps over the seconds timed), real tokens/s, host and device time a step (device_s:
    the device's seconds a step; None on the CPU, where the device is the host)."""
    host_ms = 1000 * seconds / steps
    device_ms = host_ms if device_s is None else 1000 * device_s
    print(f"{label:>34}: {steps / seconds:7.3f} steps/s ({steps} steps in {seconds:.3f} s)  {tokens / seconds:8.0f} real "
          f"tokens/s  ({tokens / steps:.1f} real tokens a step" + (f", mean batch width {width:.0f} tokens" if width else "")
          + f"; host {host_ms:.1f} ms a step, device {device_ms:.1f} ms a step, device busy {device_ms / host_ms:.0%})")
    return steps / seconds


def measure(args, device, dtypes, fused, tok, data, *, make):
    """steps/s of every way: ours padded and padding-free (and grouped, for SQuAD), then the Trainer, each in every
    autocast dtype of dtypes (None: fp32; two: labelled by theirs). Every way is warmed first (its batches once,
    untimed), then the ways take turns, round after round (--rounds), and the fastest round of each is reported; on
    CUDA one more pass of each under torch.profiler gives its device time."""
    enc, loss_fn, lengths, model_class, kwargs = data
    timed = ways(lengths, len(enc["input_ids"]), args.batch_size, args.steps)
    trainer = not args.no_trainer and importlib.util.find_spec("accelerate") is not None

    def ours(batches, free, dtype):
        torch.manual_seed(0)
        model = make(model_class, **kwargs).to(device).train()
        model = make_padding_free(model, dropout_masks(device, dtype)) if free else model
        return time_steps(model, enc, batches, device, dtype, fused, loss_fn=loss_fn)

    def theirs(dtype):
        torch.manual_seed(0)
        seconds, tokens = time_trainer(make(model_class, **kwargs).to(device), tok, enc, timed[0][1], device, dtype)
        return seconds, None, tokens

    every = []
    for dtype in dtypes:
        named = f", {DTYPE_NAMES[dtype]}" if len(dtypes) > 1 else ""
        every += [(label + named, lambda b=batches, f=free, d=dtype: ours(b, f, d)) for label, batches, free in timed]
        every += [("Trainer" + named, lambda d=dtype: theirs(d))] if trainer else []
    for _, way in every:                    # warmed: every way's shapes loaded before any is timed
        way()
    best, none = {}, (float("inf"), 0, 0)
    for _ in range(args.rounds):            # the fastest round of each way: the least disturbed on a shared machine
        for label, way in every:
            best[label] = min(best.get(label, none), way(), key=lambda r: r[0])
    steps = len(timed[0][1]) - 2
    busy = {label: device_seconds(way, device) for label, way in every}        # None on the CPU
    rate = {}
    for label, (seconds, width, tokens) in best.items():
        device_s = None if busy[label] is None else busy[label] / len(timed[0][1])   # the pass's every step
        name = label.replace("Trainer", "Trainer (DataCollatorWithPadding)")
        rate[label] = report(name, steps, seconds, tokens, width, device_s)
    return rate, lengths is not None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_flags(p, "sst2")
    p.add_argument("--squad-data", default=os.path.join(SHARED, "squad", "offline-train-v1.1.json"),
                   help="SQuAD v1.1 JSON for --task squad")
    p.add_argument("--steps", type=int, default=30, help="timed steps per way")
    p.add_argument("--rounds", type=int, help="each way timed this many times, taking turns, after every way is "
                                              "warmed; the fastest counts (default: 2 on CUDA, 1 elsewhere; a shared "
                                              "machine: 2 or more)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-len", type=int, help="longest input (default 128; SQuAD windows 384)")
    p.add_argument("--device", default="auto")
    p.add_argument("--no-trainer", action="store_true", help="leave Hugging Face's Trainer out")
    p.add_argument("--dtype", choices=("auto", "fp32", "bf16"), default="auto",
                   help="auto (bf16 autocast on CUDA, fp32 elsewhere), fp32, or bf16: every way in fp32 and in bf16 "
                        "side by side, and each way's bf16 against its fp32")
    args = p.parse_args(argv)
    if args.rounds is not None and args.rounds < 1 or args.steps < 1:
        p.error("--rounds and --steps must be at least 1")
    device = pick_device(args.device)
    args.rounds = args.rounds or (2 if device.type == "cuda" else 1)
    tok, name, make = tokenizer_and_models(args)
    fused = has_fused_adamw(device)
    dtypes = [None, torch.bfloat16] if args.dtype == "bf16" else [autocast_dtype(device, args.dtype)]
    print(f"model {name}; task {args.task}; device {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else f" ({cpu_words(device)})")
          + f"; batch {args.batch_size}; {args.steps} timed steps, every way warmed first, best of {args.rounds} "
          f"round(s); {' and '.join('bf16 autocast' if d else 'fp32' for d in dtypes)}; AdamW "
          f"{'fused' if fused else 'unfused'}; device time: "
          + ("CUDA kernels under torch.profiler" if device.type == "cuda" else "the host's (no separate device)")
          + f"; torch {torch.__version__}; load average {os.getloadavg()[0]:.1f}; {torch.get_num_threads()} threads")
    rate, squad = measure(args, device, dtypes, fused, tok, training_data(args, tok), make=make)
    for named in [f", {DTYPE_NAMES[d]}" for d in dtypes] if len(dtypes) > 1 else [""]:
        print(f"padding-free vs padded{named}: {rate['padding-free' + named] / rate['padded' + named]:.2f}x")
        if "Trainer" + named in rate:
            print(f"padding-free vs Trainer{named}: {rate['padding-free' + named] / rate['Trainer' + named]:.2f}x")
        else:
            print("Trainer: not run (" + ("--no-trainer" if args.no_trainer else "accelerate is not installed") + ")")
        if squad:
            print(f"padding-free on random batches vs padded grouped by length{named}: "
                  f"{rate['padding-free' + named] / rate['padded, grouped by length' + named]:.2f}x")
    if len(dtypes) > 1:
        ways_timed = [label[:-len(", fp32")] for label in rate if label.endswith(", fp32")]
        print("bf16 vs fp32, each way: " + "; ".join(f"{w} {rate[w + ', bf16'] / rate[w + ', fp32']:.2f}x"
                                                      for w in ways_timed))


def cpu_words(device):
    """The CPU's name and whether it computes bf16 natively (the conditions a CPU figure needs beside it)."""
    caps = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    return f"{caps.get('cpu_name') or 'CPU'}, native bf16: {'yes' if native_bf16(device) else 'no'}"


if __name__ == "__main__":
    main()
