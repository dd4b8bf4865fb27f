"""Profile: where a warm training step's time goes, host against device, under torch.profiler.

The step of bert_part4_finetune.py (padding-free by default; the recipe's AdamW, clipping and schedule; bf16 autocast
on CUDA) on the paper's random batches of a GLUE task: --warm-steps first (every kernel loaded, every shape's graphs
built), then --steps under torch.profiler. Prints per step: the wall time, the host's time in torch's operators (the
top-level ones, self CPU time summed), the device's kernels (CUDA: their time summed; on the CPU there is no separate
device: the same as the host), the kernels launched; then the top operators by host time and by device time.

    python bench/step_profile.py --random-base --task sst2 --device cuda       # BERT-base, random weights
    python bench/step_profile.py --model path/to/bert --steps 4 --warm-steps 2
    python bench/step_profile.py --random-base --device cpu --dtype bf16 --steps 2 --warm-steps 2   # a bf16 step on the CPU
"""

import argparse
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_speed import add_model_flags, synchronize, time_steps, tokenizer_and_models  # noqa: E402

from part4.data import readers  # noqa: E402
from part4.data.batches import (  # noqa: E402
    dropout_masks,
    epoch_batches,
    make_padding_free,
)
from part4.models.loading import autocast_dtype, has_fused_adamw, pick_device  # noqa: E402
from part4.tasks import families  # noqa: E402

LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def step_profile(prof, steps, cuda):
    """{wall: set by the caller, host, device, launches} per step from a profile of `steps` steps: host, the self CPU
    time of every operator summed; device, the kernels' time summed (CUDA) or None; launches, kernel launches."""
    events = prof.key_averages()
    host = sum(e.self_cpu_time_total for e in events) / 1e6 / steps
    device = sum(e.self_device_time_total for e in events) / 1e6 / steps if cuda else None
    launches = sum(e.count for e in events if e.key in LAUNCHES) / steps if cuda else None
    return {"host": host, "device": device, "launches": launches}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_flags(p, "sst2")
    p.add_argument("--steps", type=int, default=10, help="profiled steps (default 10)")
    p.add_argument("--warm-steps", type=int, default=10, help="steps before the profile (default 10)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--padding-free", choices=("on", "off"), default="on")
    p.add_argument("--top", type=int, default=8, help="operators listed by host and by device time (default 8)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", choices=("auto", "fp32", "bf16"), default="auto",
                   help="autocast (default auto: bf16 on CUDA, fp32 elsewhere); bf16 on the CPU: the padding-free step "
                        "as bert_part4_finetune.py --dtype bf16 runs it")
    args = p.parse_args(argv)
    if min(args.steps, args.warm_steps, args.batch_size, args.top) < 1:
        p.error("--steps, --warm-steps, --batch-size and --top must be at least 1")
    device = pick_device(args.device)
    cuda = device.type == "cuda"
    tok, name, make = tokenizer_and_models(args)
    dtype, fused = autocast_dtype(device, args.dtype), has_fused_adamw(device)
    n = args.batch_size * (args.warm_steps + args.steps + 4)
    train = readers.read_split(args.data_dir, args.task, "train")[:n]
    enc = families.encode_glue(tok, train, 128)
    batches = epoch_batches(len(train), args.batch_size, 1, 0)[0]
    if len(batches) < args.warm_steps + args.steps + 4:
        sys.exit(f"{len(train)} training rows: too few for {args.warm_steps} + {args.steps} steps of {args.batch_size}")
    torch.manual_seed(0)
    from transformers import BertForSequenceClassification
    model = make(BertForSequenceClassification, num_labels=2).to(device).train()
    model = make_padding_free(model, dropout_masks(device, dtype)) if args.padding_free == "on" else model
    warm, profiled = batches[:args.warm_steps + 2], batches[args.warm_steps + 2:args.warm_steps + args.steps + 4]
    time_steps(model, enc, warm, device, dtype, fused, loss_fn=families.Classification.loss)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        time_steps(model, enc, profiled, device, dtype, fused, loss_fn=families.Classification.loss)
        synchronize(device)
        wall = (time.perf_counter() - start) / len(profiled)
    figures = step_profile(prof, len(profiled), cuda)
    device_ms = figures["host"] * 1000 if figures["device"] is None else figures["device"] * 1000
    print(f"model {name}; task {args.task}; device {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if cuda else "")
          + f"; batch {args.batch_size}; padding-free {args.padding_free}; {'bf16 autocast' if dtype else 'fp32'}; "
          f"{args.warm_steps} warm steps, then {len(profiled)} profiled; torch {torch.__version__}; "
          f"{torch.get_num_threads()} threads")
    print(f"per step: wall {wall * 1000:.1f} ms; host (operators' self CPU time) {figures['host'] * 1000:.1f} ms; "
          f"device {device_ms:.1f} ms" + (" (kernels)" if cuda else " (the CPU: the host's)")
          + (f"; {figures['launches']:.0f} kernel launches" if cuda else "")
          + f"; device busy {device_ms / (wall * 1000):.0%} of the wall time")
    for key, label in (("self_cpu_time_total", "host"), ("self_device_time_total", "device")):
        if label == "device" and not cuda:
            continue
        top = sorted(prof.key_averages(), key=lambda e: getattr(e, key), reverse=True)[:args.top]
        print(f"top operators by {label} time a step: " + "; ".join(
            f"{e.key} {getattr(e, key) / 1000 / len(profiled):.2f} ms x{e.count / len(profiled):.0f}" for e in top))


if __name__ == "__main__":
    main()
